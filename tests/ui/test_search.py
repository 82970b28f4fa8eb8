"""The runs page's search over tasks, outputs and tool calls, and its filters."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import calculator, tool  # noqa: E402
from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.testing import call  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, make_run  # noqa: E402


@tool(name="echo")
def shouting(text: str) -> str:
    """Shout the text."""
    return f"loud {text}"


def test_the_runs_page_finds_runs_by_task_and_by_output(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "peru", ["Lima"], task="capital of Peru")
    make_run(store, "chile", ["Santiago de Chile"], task="another capital")
    make_run(store, "sum", ["4"], task="2+2")
    by_task = client.get(f"{BASE}/runs", params={"q": "PERU"}).text
    assert "1 run matching “PERU”" in by_task
    assert 'href="/c-test/runs/peru"' in by_task and "runs/chile" not in by_task
    by_output = client.get(f"{BASE}/runs", params={"q": "santiago"}).text
    assert 'href="/c-test/runs/chile"' in by_output and "runs/peru" not in by_output
    both = client.get(f"{BASE}/runs", params={"q": "capital", "status": "completed"}).text
    assert "2 runs with status completed matching" in both and "runs/sum" not in both
    # the live stream keeps the search, and the search box keeps its text
    assert 'data-stream="/c-test/runs/stream?status=completed&amp;q=capital' in both
    assert 'name="q" value="capital"' in both
    none = client.get(f"{BASE}/runs", params={"q": SCRIPT_XSS}).text
    assert "No runs matching" in none and SCRIPT_XSS not in none
    assert 'value="&lt;script&gt;alert(1)&lt;/script&gt;"' in none


def test_the_search_text_is_cut_to_its_limit(store: RunStore, client: TestClient) -> None:
    make_run(store, "long", ["ok"], task="x" * 300)
    page = client.get(f"{BASE}/runs", params={"q": "x" * 250}).text
    assert f'value="{"x" * 200}"' in page and 'href="/c-test/runs/long"' in page


def test_search_finds_tool_names_arguments_and_results(store: RunStore, client: TestClient) -> None:
    make_run(store, "by-name", [call("calculator", expression="1+1"), "2"])
    make_run(store, "by-args", [call("echo", text="zebra crossing"), "ok"])
    make_run(store, "by-result", [call("echo", text="x"), "fine"], tools=[calculator, shouting])
    make_run(store, "none", ["nothing"])

    def found(text: str) -> set[str]:
        page = client.get(f"{BASE}/runs", params={"q": text}).text
        return {run for run in ("by-name", "by-args", "by-result", "none")
                if f'href="/c-test/runs/{run}"' in page}  # fmt: skip

    assert found("CALCULATOR") == {"by-name"}
    assert found("zebra") == {"by-args"}
    assert found("LOUD X") == {"by-result"}


def test_filters_by_tool_and_by_errors(store: RunStore, client: TestClient) -> None:
    make_run(store, "calc", [call("calculator", expression="1+1"), "2"])
    make_run(store, "bad", [call("calculator", expression="1/0"), "failed"])
    make_run(store, "talk", [call("echo", text="hi"), "hi"])
    make_run(store, "plain", ["done"])
    page = client.get(f"{BASE}/runs", params={"tool": "calculator"}).text
    assert "2 runs that called calculator" in page
    assert "runs/calc" in page and "runs/bad" in page and "runs/talk" not in page
    errors = client.get(f"{BASE}/runs", params={"errors": "1"}).text
    assert "1 run with errors" in errors and "runs/bad" in errors and "runs/calc" not in errors
    # the tool box suggests the tools the runs called
    assert '<option value="calculator">' in page and '<option value="echo">' in page


def test_child_runs_are_nested_under_their_parent(store: RunStore, client: TestClient) -> None:
    from convergent import Agent
    from convergent.testing import scripted

    helper = Agent(scripted("child answer")).as_tool("helper", "Helps.")
    make_run(store, "parent", [call("helper", task="do it"), "done"], tools=[helper])
    make_run(store, "later", ["x"])
    page = client.get(f"{BASE}/runs").text
    rows = page[page.index("<tbody>") : page.index("</tbody>")].split("<tr ")[1:]
    assert [("child" in row, "runs/parent" in row) for row in rows][1:3] == [
        (False, True),
        (True, True),
    ]
    assert 'class="nest"' in rows[2]
    # filtered, every run is a row of its own, a child saying whose it is
    searched = client.get(f"{BASE}/runs", params={"q": "child answer"}).text
    assert "child of" in searched
