"""The runs page's search over tasks and outputs."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent.durability.sqlite import RunStore  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, make_run  # noqa: E402


def test_the_runs_page_finds_runs_by_task_and_by_output(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "peru", ["Lima"], task="capital of Peru")
    make_run(store, "chile", ["Santiago de Chile"], task="another capital")
    make_run(store, "sum", ["4"], task="2+2")
    by_task = client.get(f"{BASE}/runs", params={"q": "PERU"}).text
    assert "1 run whose task or output contains “PERU”" in by_task
    assert 'href="/c-test/runs/peru"' in by_task and "runs/chile" not in by_task
    by_output = client.get(f"{BASE}/runs", params={"q": "santiago"}).text
    assert 'href="/c-test/runs/chile"' in by_output and "runs/peru" not in by_output
    both = client.get(f"{BASE}/runs", params={"q": "capital", "status": "completed"}).text
    assert "2 runs with status completed whose task" in both and "runs/sum" not in both
    # the live stream keeps the search, and the search box keeps its text
    assert 'data-stream="/c-test/runs/stream?status=completed&amp;q=capital' in both
    assert 'name="q" value="capital"' in both
    none = client.get(f"{BASE}/runs", params={"q": SCRIPT_XSS}).text
    assert "No runs whose task or output contains" in none and SCRIPT_XSS not in none
    assert 'value="&lt;script&gt;alert(1)&lt;/script&gt;"' in none


def test_the_search_text_is_cut_to_its_limit(store: RunStore, client: TestClient) -> None:
    make_run(store, "long", ["ok"], task="x" * 300)
    page = client.get(f"{BASE}/runs", params={"q": "x" * 250}).text
    assert f'value="{"x" * 200}"' in page and 'href="/c-test/runs/long"' in page
