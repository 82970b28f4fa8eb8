"""One request or call in one place: the span panel's pages, for every kind of span."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import Agent, Limits, ModelError, ModelSettings, Usage  # noqa: E402
from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.testing import answer, call, scripted, step  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, echo, make_run  # noqa: E402


def priced_run(store: RunStore, run_id: str = "priced") -> None:
    usage = Usage(input_tokens=1_000, output_tokens=200, requests=1)
    make_run(
        store,
        run_id,
        [
            step(call("calculator", expression="6*7"), content="let me count", usage=usage),
            step(call("echo", text=SCRIPT_XSS), usage=usage),
            answer("not done", usage=usage),
        ],
        task="What is 6*7?",
        system_prompt="Answer in numbers.",
        price=(2.5, 10.0),
        limits=Limits(max_cycles=2),
        settings=ModelSettings(temperature=0.0, max_tokens=500),
    )


def test_a_model_request_shows_its_input_output_tokens_cost_and_settings(
    store: RunStore, client: TestClient
) -> None:
    priced_run(store)
    page = client.get(f"{BASE}/runs/priced/spans/cycle/2")
    assert page.status_code == 200
    text = page.text
    assert "Cycle 2: model request" in text
    # the input: the opening messages and what is new since cycle 1's reply
    assert "Answer in numbers." in text and "What is 6*7?" in text
    assert "<pre>42</pre>" in text  # the calculator's result, sent with this request
    assert "let me count" not in text  # cycle 1's reply: not new
    # the output: the calls it asked for, escaped
    assert "&#34;name&#34;: &#34;echo&#34;" in text and SCRIPT_XSS not in text
    assert "1,200 (1,000 in, 200 out)" in text
    assert "$0.0045" in text  # 1,000 x $2.50/M + 200 x $10/M
    assert '<th scope="row">temperature</th><td>0.0</td>' in text
    assert '<th scope="row">max_tokens</th>' in text
    assert "latency" in text and "finish reason" in text


def test_a_call_shows_its_arguments_result_and_time(store: RunStore, client: TestClient) -> None:
    priced_run(store)
    (call_id,) = [
        row[0] for row in store.query("SELECT call_id FROM finished_calls WHERE name = 'echo'")
    ]
    panel = client.get(f"{BASE}/runs/priced/spans/call/{call_id}?panel=1")
    assert panel.status_code == 200 and "<html" not in panel.text  # the panel only
    assert "echo: tool call of cycle 2" in panel.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in panel.text and SCRIPT_XSS not in panel.text
    assert "outcome" in panel.text and "duration" in panel.text


def test_the_answer_after_the_stop_has_a_span_of_its_own(
    store: RunStore, client: TestClient
) -> None:
    priced_run(store)
    run = client.get(f"{BASE}/runs/priced").text
    assert f"{BASE}/runs/priced/spans/after-stop" in run  # the summary and the timeline link it
    assert "answer after the stop" in run
    page = client.get(f"{BASE}/runs/priced/spans/after-stop").text
    assert "The answer after the stop" in page
    assert "not done" in page  # its reply
    assert "the request for the best answer, with no tools" in page
    assert '<th scope="row">plain_answer</th><td>true</td>' in page
    assert "$0.0045" in page


def test_a_failed_request_after_the_stop_says_why(store: RunStore, client: TestClient) -> None:
    make_run(
        store,
        "failed",
        [step(call("calculator", expression="1+1")), ModelError("HTTP 503: overloaded")],
        limits=Limits(max_cycles=1),
    )
    run = client.get(f"{BASE}/runs/failed").text
    assert "The request for an answer after the stop failed" in run
    page = client.get(f"{BASE}/runs/failed/spans/after-stop").text
    assert "No answer: " in page and "HTTP 503: overloaded" in page


def test_unknown_spans_are_one_clear_error(store: RunStore, client: TestClient) -> None:
    make_run(store, "done", ["2"])
    for path, message in (
        ("spans/cycle/9", "has no cycle 9"),
        ("spans/call/nope", "has no call"),
        ("spans/after-stop", "made no request after a stop"),
        ("spans/elsewhere", "no such span"),
    ):
        page = client.get(f"{BASE}/runs/done/{path}")
        assert page.status_code == 404 and message in page.text, path
    panel = client.get(f"{BASE}/runs/done/spans/cycle/9?panel=1")
    assert panel.status_code == 404 and "has no cycle 9" in panel.text


def test_every_bar_and_card_links_its_span(store: RunStore, client: TestClient) -> None:
    helper = Agent(scripted(call("echo", text="inner"), "child done"), [echo]).as_tool(
        "helper", "Helps."
    )
    make_run(store, "parent", [call("helper", task="go"), "done"], tools=[helper])
    page = client.get(f"{BASE}/runs/parent").text
    (call_id,) = [row[0] for row in store.query("SELECT call_id FROM finished_calls "
                                                "WHERE run_id = 'parent'")]  # fmt: skip
    for url in (
        f"{BASE}/runs/parent/spans/cycle/1",
        f"{BASE}/runs/parent/spans/cycle/2",
        f"{BASE}/runs/parent/spans/call/{call_id}",
    ):
        assert f'href="{url}" data-span' in page, url  # a bar of the timeline
        assert f'data-span-card="{url}"' in page, url  # a card
    (child,) = store.children("parent")
    assert f'href="{BASE}/runs/{child.run_id}/spans/cycle/1" data-span' in page  # nested rows
    span = client.get(f"{BASE}/runs/parent/spans/call/{call_id}").text
    assert f'href="{BASE}/runs/{child.run_id}"' in span and "its cycles" in span


def test_a_run_stored_before_requests_were_recorded_says_so(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "old", [step(call("calculator", expression="1+1")), "2"])
    with store.transaction() as conn:  # as a version that kept no request facts wrote it
        conn.execute("DELETE FROM events WHERE type = 'model_responded'")
    page = client.get(f"{BASE}/runs/old/spans/cycle/1").text
    assert "Not recorded: the run was stored by an older convergent" in page


def test_the_favicon_is_no_401(store: RunStore) -> None:
    from convergent.ui.app import create_app

    with TestClient(create_app(store, token="t", base=BASE), base_url="http://127.0.0.1:8765") as c:
        answered = c.get("/favicon.ico")
        assert answered.status_code == 204 and answered.content == b""
        assert answered.headers["x-frame-options"] == "DENY"
        assert c.get("/favicon.ico", headers={"host": "evil.example"}).status_code == 400


def test_a_run_page_opened_before_the_run_is_stored_waits_for_it(
    store: RunStore, client: TestClient
) -> None:
    page = client.get(f"{BASE}/runs/soon")
    assert page.status_code == 200  # a page that waits (no failed load in the browser)
    assert "No run soon is stored in this database yet" in page.text
    assert f'data-stream="{BASE}/runs/soon/stream"' in page.text  # and it follows the database
