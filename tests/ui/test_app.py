"""The console's routes over a real run store, through Starlette's test client."""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import ScriptedModel, StopReason, Verification, calculator
from convergent.gate import AskUser, ExecutiveGate, QueueChannel
from convergent.store import RunStore
from convergent.ui.app import console_of, create_app
from convergent.ui.questions import open_questions, post_question

from .conftest import IMG_XSS, ORIGIN, SCRIPT_XSS, TOKEN, call, make_run, post


def test_every_request_needs_the_token(store: RunStore) -> None:
    app = create_app(store, token=TOKEN)
    with TestClient(app, base_url=ORIGIN) as client:
        for url in ("/", "/runs", "/runs/x", "/runs/stream", "/static/console.js", "/coordinator"):
            response = client.get(url)
            assert response.status_code == 401, url
            assert "token" in response.text
        assert client.get("/runs?token=wrong").status_code == 401
        assert client.get("/runs", headers={"cookie": f"convergent_x={TOKEN}"}).status_code == 401
        entered = client.get(f"/runs?status=completed&token={TOKEN}", follow_redirects=False)
        assert entered.status_code == 303
        assert entered.headers["location"] == "/runs?status=completed"
        cookie = entered.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN in cookie
        assert client.get("/runs").status_code == 200
        client.cookies.clear()
        bearer = client.get("/runs", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200


def test_changes_need_a_post_from_the_same_origin(store: RunStore, client: TestClient) -> None:
    make_run(store, "r1", [call_script("6*7"), "42"])
    url = "/runs/r1/steer"
    assert client.post(url, data={"message": "hi"}).status_code == 403
    other = client.post(url, data={"message": "hi"}, headers={"origin": "http://evil.example"})
    assert other.status_code == 403
    spoofed = client.post(url, data={"message": "hi"}, headers={"referer": "http://evil.example/"})
    assert spoofed.status_code == 403
    assert client.get(url).status_code == 405
    assert store.stored_steering("r1", 0) == []
    by_referer = client.post(
        url,
        data={"message": "hi"},
        headers={"referer": f"{ORIGIN}/runs/r1"},
        follow_redirects=False,
    )
    assert by_referer.status_code == 303
    assert [text for _, _, text in store.stored_steering("r1", 0)] == ["hi"]


def call_script(expression: str) -> dict[str, object]:
    return {"tool_calls": [call("calculator", expression=expression)]}


def test_security_headers_forbid_inline_script_and_framing(client: TestClient) -> None:
    response = client.get("/runs")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"


def test_model_output_and_tool_results_are_shown_as_text(
    store: RunStore, client: TestClient
) -> None:
    make_run(
        store,
        "xss",
        [
            {"content": f"thinking {SCRIPT_XSS}", "tool_calls": [call("echo", text=IMG_XSS)]},
            {"content": "", "tool_calls": [call("echo", text=SCRIPT_XSS)]},
            f"final {IMG_XSS} {SCRIPT_XSS}",
        ],
        task=f"task {SCRIPT_XSS}",
    )
    for url in ("/runs", "/runs/xss"):
        page = client.get(url).text
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "onerror=alert(1)>" not in page.replace("&gt;", "")  # only escaped
    page = client.get("/runs/xss").text
    assert html.escape(SCRIPT_XSS, quote=False) in page
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    # the only script element is the console's own file
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/console.js" defer>']


def test_runs_page_lists_filters_and_paginates(store: RunStore, client: TestClient) -> None:
    make_run(store, "done-1", [call_script("1+1"), "2"])
    make_run(store, "capped", [call_script("1+1"), call_script("2+2")], limits=limits(1))
    page = client.get("/runs").text
    assert "done-1" in page and "capped" in page and "2 runs" in page
    filtered = client.get("/runs?status=max_cycles").text
    assert "capped" in filtered and "done-1" not in filtered
    assert "reached max_cycles=1" in filtered
    assert client.get("/runs?status=nonsense").status_code == 200
    for n in range(60):
        store_run_row(store, f"bulk-{n:02d}", updated=1000.0 + n)
    first = client.get("/runs").text
    assert "62 runs, page 1 of 2" in first and 'rel="next"' in first
    second = client.get("/runs?page=2").text
    assert "bulk-00" in second and "bulk-59" not in second


def limits(cycles: int) -> object:
    from convergent import Limits

    return Limits(max_cycles=cycles)


def store_run_row(store: RunStore, run_id: str, *, updated: float) -> None:
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO runs (run_id, task, model, status, stop_reason, cycles, usage, elapsed, "
            "started_at, updated_at, epoch, message_count, state_version) "
            "VALUES (?, 'bulk', 'scripted', 'stopped', 'completed', 1, '{}', 0, ?, ?, 1, 0, 2)",
            (run_id, updated, updated),
        )


def test_run_page_shows_the_timeline_and_explains_the_stop(
    store: RunStore, client: TestClient
) -> None:
    make_run(
        store,
        "stall",
        [{"content": "again", "tool_calls": [call("calculator", expression="1+1")]}] * 4,
        limits=limits(10),
    )
    page = client.get("/runs/stall").text
    assert "Why it stopped: stalled" in page
    assert "same call with the same arguments" in page
    assert page.count('class="cycle"') == 4
    assert "not_executed" in page and ">stall<" in page
    assert "&#34;expression&#34;: &#34;1+1&#34;" in page
    assert "<svg" in page and 'class="bar"' in page
    assert client.get("/runs/nope").status_code == 404


def test_steering_a_stopped_run_queues_the_message(store: RunStore, client: TestClient) -> None:
    make_run(store, "r1", [call_script("1+1"), call_script("2+2")], limits=limits(1))
    response = post(client, "/runs/r1/steer", message="try harder")
    assert response.status_code == 303
    notice = client.get(response.headers["location"]).text
    assert "delivered when the run resumes" in notice
    assert [(k, t) for _, k, t in store.stored_steering("r1", 0)] == [("message", "try harder")]
    refused = post(client, "/runs/r1/control", action="stop")
    assert refused.status_code == 400 and "is not running" in refused.text
    empty = post(client, "/runs/r1/steer", message="  ")
    assert empty.status_code == 400 and "empty" in empty.text


def test_a_live_run_is_stopped_and_paused_through_steering(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "live", [call_script("1+1"), call_script("2+2")], limits=limits(1))
    mark_running(store, "live")
    page = client.get("/runs/live").text
    assert 'value="stop"' in page and 'value="pause"' in page
    assert post(client, "/runs/live/control", action="pause").status_code == 303
    assert 'value="resume"' in client.get("/runs/live").text
    assert post(client, "/runs/live/control", action="stop").status_code == 303
    kinds = [kind for _, kind, _ in store.stored_steering("live", 0)]
    assert kinds == ["pause", "stop"]
    assert post(client, "/runs/live/control", action="explode").status_code == 400


def mark_running(store: RunStore, run_id: str) -> None:
    import os

    with store.transaction() as conn:
        conn.execute(
            "UPDATE runs SET status = 'running', stop_reason = NULL, pid = ? WHERE run_id = ?",
            (os.getpid(), run_id),
        )


def test_an_open_question_is_answered_in_the_page(store: RunStore, client: TestClient) -> None:
    make_run(store, "asks", [call_script("1+1"), call_script("2+2")], limits=limits(1))
    mark_running(store, "asks")
    question_id = post_question(store, "asks", f"pick one {IMG_XSS}")
    page = client.get("/runs/asks").text
    assert "The run asks" in page and "&lt;img src=x" in page
    assert f'name="question_id" value="{question_id}"' in page
    response = post(
        client, "/runs/asks/answer", answer="the blue one", question_id=str(question_id)
    )
    assert response.status_code == 303
    assert open_questions(store, "asks") == []
    assert store.query("SELECT answer FROM questions WHERE id = ?", [question_id]) == [
        ("the blue one",)
    ]
    again = post(client, "/runs/asks/answer", answer="x", question_id=str(question_id))
    assert again.status_code == 400


def test_answering_a_needs_user_run_resumes_it(store: RunStore, client: TestClient) -> None:
    script = Path(store.path).with_name("script.json")
    script.write_text(
        '[{"tool_calls": [{"name": "ask_user", "arguments": {"question": "which?"}}]},'
        ' "you chose it"]'
    )
    import asyncio

    from convergent import Agent, RunRecipe

    recipe = RunRecipe(
        model=f"scripted:{script}",
        tools=("ask_user",),
        ask_via="none",
        workspace=str(script.parent),
    )
    result = asyncio.run(Agent.from_recipe(recipe).run("ask", run_id="needs", store=store))
    assert result.stop_reason is StopReason.NEEDS_USER
    page = client.get("/runs/needs").text
    assert "Answer and resume" in page and "which?" in page
    response = post(client, "/runs/needs/answer", answer="the left one")
    assert response.status_code == 303
    launcher = console_of(client.app).launcher  # type: ignore[arg-type]
    assert launcher.children[0].wait(timeout=60) == 0
    run = store.get_run("needs")
    assert run.stop_reason is StopReason.COMPLETED and run.output == "you chose it"
    timeline = client.get("/runs/needs").text
    assert "the left one" in timeline
    refused = post(client, "/runs/needs/answer", answer="more")
    assert refused.status_code == 400 and "nothing to resume" in refused.text


def test_rewind_asks_for_confirmation_first(store: RunStore, client: TestClient) -> None:
    make_run(store, "rw", [call_script("1+1"), call_script("2+2"), "done"])
    page = client.get("/runs/rw").text
    assert 'href="/runs/rw/rewind?cycle=1"' in page
    confirm = client.get("/runs/rw/rewind?cycle=1").text
    assert "Rewind run rw to cycle 1?" in confirm and 'name="cycle" value="1"' in confirm
    assert store.get_run("rw").cycles == 3
    response = post(client, "/runs/rw/rewind", cycle="1")
    assert response.status_code == 303
    run = store.get_run("rw")
    assert run.cycles == 1 and run.stop_reason is StopReason.STOPPED
    assert "rewound to cycle 1" in client.get(response.headers["location"]).text
    assert post(client, "/runs/rw/rewind", cycle="9").status_code == 400
    assert post(client, "/runs/rw/rewind", cycle="x").status_code == 400


async def test_the_event_stream_sends_changed_fragments_only(store: RunStore) -> None:
    from convergent.ui.sse import fragment_stream

    versions = iter([1, 1, 2, 3])
    pages = iter([{"a": "x", "b": "y"}, {"a": "x", "b": "z"}, {"a": "x", "b": "z"}])
    stream = fragment_stream(lambda: next(versions), lambda: next(pages), poll=0.0)
    assert await anext(stream) == b"retry: 1000\n\n"
    first = await anext(stream)
    assert first.startswith(b"event: update\ndata: ") and b'"a"' in first and b'"b"' in first
    second = await anext(stream)
    assert b'"b"' in second and b'"a"' not in second
    assert await anext(stream) == b": idle\n\n"
    await stream.aclose()


def test_runs_page_is_quick_with_many_runs(store: RunStore, client: TestClient) -> None:
    for n in range(2000):
        store_run_row(store, f"many-{n}", updated=float(n))
    client.get("/runs")
    started = time.perf_counter()
    page = client.get("/runs").text
    assert time.perf_counter() - started < 1.0
    assert "2000 runs, page 1 of 40" in page


def test_a_long_run_is_shown_in_windows_of_cycles(store: RunStore, client: TestClient) -> None:
    script = [
        {"content": f"step {n}", "tool_calls": [call("calculator", expression=f"{n}+1")]}
        for n in range(1, 150)
    ]
    make_run(store, "long", [*script, "done"], limits=limits(200))
    latest = client.get("/runs/long").text
    assert latest.count('class="cycle"') == 100
    assert 'id="cycle-150"' in latest and 'id="cycle-50"' not in latest
    assert ">step 51<" in latest and "50 earlier cycles not shown" in latest
    assert 'href="/runs/long?upto=50"' in latest
    earlier = client.get("/runs/long?upto=50").text
    assert earlier.count('class="cycle"') == 50
    assert ">step 1<" in earlier and ">step 50<" in earlier and ">step 51<" not in earlier
    assert "&#34;expression&#34;: &#34;50+1&#34;" in earlier
    assert "100 later cycles not shown" in earlier
    assert 'data-stream="/runs/long/stream?upto=50"' in earlier


def test_gate_decisions_verdicts_and_answers_appear_in_their_cycles(
    store: RunStore, client: TestClient
) -> None:
    unsure = {"clarity": 0.3, "certainty": 0.9, "question": "Which total?", "reason": "vague"}
    sure = {"clarity": 1, "certainty": 0.99, "question": "", "reason": "clear"}
    scorer = ScriptedModel([json.dumps(unsure), json.dumps(sure), json.dumps(sure)])
    asker = AskUser(QueueChannel(answers=["the yearly one"]), timeout=5)
    make_run(
        store,
        "gated",
        [
            {"content": "maybe monthly?", "tool_calls": [call("calculator", expression="1+1")]},
            {"content": "yearly", "tool_calls": [call("calculator", expression="12*3")]},
            "36?",
            "36",
        ],
        tools=[calculator, asker.tool],
        gate=ExecutiveGate(scorer, asker),
        verifier=lambda answer: Verification(answer == "36", "give only the number"),
    )
    page = client.get("/runs/gated").text
    cycle1 = page[page.index('id="cycle-1"') : page.index('id="cycle-2"')]
    assert "gate" in cycle1 and "asked (score): score 0.30 against threshold 0.85" in cycle1
    assert "Asked: Which total?" in cycle1
    assert "asked via queue" in cycle1 and "Which total? -&gt; the yearly one" in cycle1
    cycle3 = page[page.index('id="cycle-3"') : page.index('id="cycle-4"')]
    assert "verifier" in cycle3 and "failed: give only the number" in cycle3
    assert "verifier</strong> passed" in page[page.index('id="cycle-4"') :]


def test_a_call_cut_off_by_a_dead_process_is_shown_unfinished(
    store: RunStore, client: TestClient
) -> None:
    import asyncio
    import threading

    from convergent import Agent, tool

    @tool
    async def hang() -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel([{"content": "trying", "tool_calls": [call("hang")]}])

    async def cut_off() -> None:
        run = Agent(model, [hang], store=store).run("hang", run_id="cut")
        try:
            await asyncio.wait_for(run, 0.3)
        except TimeoutError:
            pass

    worker = threading.Thread(target=asyncio.run, args=(cut_off(),))
    worker.start()
    worker.join()
    with store.transaction() as conn:  # its process is gone
        conn.execute("UPDATE runs SET pid = -1 WHERE run_id = 'cut'")
    page = client.get("/runs/cut").text
    assert "Why it stopped: interrupted" in page and "It can be resumed" in page
    assert '<span class="badge unfinished">unfinished</span>' in page
    assert ">trying<" in page
