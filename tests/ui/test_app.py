"""The console's routes over a real run store, through Starlette's test client."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import (
    Agent,
    ScriptedModel,
    StopReason,
    Usage,
    Verification,
    calculator,
)
from convergent.durability.sqlite import RunStore
from convergent.gate import AskUser, ExecutiveGate, QueueChannel
from convergent.testing import answer, call, step, write_script
from convergent.ui.app import console_of, create_app
from convergent.ui.questions import open_questions, post_question
from query_plans import outer_plan, recorded_queries  # noqa: E402

from .conftest import BASE, IMG_XSS, ORIGIN, SCRIPT_XSS, TOKEN, make_run, post


def test_every_request_needs_the_token(store: RunStore) -> None:
    app = create_app(store, token=TOKEN, base=BASE)
    with TestClient(app, base_url=ORIGIN) as client:
        for url in ("/", "/runs", f"{BASE}/runs", f"{BASE}/runs/x", f"{BASE}/runs/stream",
                    f"{BASE}/static/console.js", f"{BASE}/coordinator"):  # fmt: skip
            response = client.get(url)
            assert response.status_code == 401, url
            assert "token" in response.text
        assert client.get(f"{BASE}/runs?token=wrong").status_code == 401
        entered = client.get(f"/runs?status=completed&token={TOKEN}", follow_redirects=False)
        assert entered.status_code == 303
        assert entered.headers["location"] == f"{BASE}/runs?status=completed"
        assert client.get(f"{BASE}/runs").status_code == 200
        client.cookies.clear()
        bearer = client.get(f"{BASE}/runs", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200
        assert client.get("/runs", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_the_cookie_holds_a_session_scoped_to_the_base_never_the_token(store: RunStore) -> None:
    app = create_app(store, token=TOKEN, base=BASE)
    with TestClient(app, base_url=ORIGIN) as client:
        entered = client.get(f"/?token={TOKEN}", follow_redirects=False)
        cookie = SimpleCookie(entered.headers["set-cookie"])
        (morsel,) = cookie.values()
        session = morsel.value
        assert TOKEN not in entered.headers["set-cookie"] and len(session) >= 40
        assert morsel["path"] == BASE and morsel["httponly"] and morsel["samesite"] == "Strict"
        client.cookies.clear()
        as_cookie = {"cookie": f"{morsel.key}={session}"}
        assert client.get(f"{BASE}/runs", headers=as_cookie).status_code == 200
        # outside the base (where a browser would not send it anyway) it opens nothing
        assert client.get("/runs", headers=as_cookie).status_code == 401
        # replayed as a token it opens nothing
        for headers in (
            {"authorization": f"Bearer {session}"},
            {"cookie": f"{morsel.key}={TOKEN}"},
        ):
            assert client.get(f"{BASE}/runs", headers=headers).status_code == 401
            assert client.get("/runs", headers=headers).status_code == 401
        # the login form posts the token in the body, never in an address
        form = client.get("/")
        assert 'action="/login"' in form.text and 'type="password"' in form.text
        wrong = client.post("/login", data={"token": "nope"}, headers={"origin": ORIGIN})
        assert wrong.status_code == 401
        logged = client.post(
            "/login", data={"token": TOKEN}, headers={"origin": ORIGIN}, follow_redirects=False
        )
        assert logged.status_code == 303 and logged.headers["location"] == f"{BASE}/runs"
        assert f"Path={BASE}" in logged.headers["set-cookie"]


def test_changes_need_a_post_from_the_same_origin(store: RunStore, client: TestClient) -> None:
    make_run(
        store,
        "r1",
        [call("calculator", expression="6*7"), call("calculator", expression="7*6")],
        limits=limits(1),
    )
    url = f"{BASE}/runs/r1/steer"
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


def test_security_headers_forbid_inline_script_and_framing(client: TestClient) -> None:
    response = client.get(f"{BASE}/runs")
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
            step(call("echo", text=IMG_XSS), content=f"thinking {SCRIPT_XSS}"),
            step(call("echo", text=SCRIPT_XSS)),
            f"final {IMG_XSS} {SCRIPT_XSS}",
        ],
        task=f"task {SCRIPT_XSS}",
    )
    for url in (f"{BASE}/runs", f"{BASE}/runs/xss"):
        page = client.get(url).text
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "onerror=alert(1)>" not in page.replace("&gt;", "")  # only escaped
    page = client.get(f"{BASE}/runs/xss").text
    assert html.escape(SCRIPT_XSS, quote=False) in page
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    # the only script element is the console's own file
    assert re.findall(r"<script[^>]*>", page) == [f'<script src="{BASE}/static/console.js" defer>']


def test_runs_page_lists_filters_and_paginates(store: RunStore, client: TestClient) -> None:
    make_run(store, "done-1", [call("calculator", expression="1+1"), "2"])
    make_run(
        store,
        "capped",
        [call("calculator", expression="1+1"), call("calculator", expression="2+2")],
        limits=limits(1),
    )
    page = client.get(f"{BASE}/runs").text
    assert "done-1" in page and "capped" in page and "2 runs" in page
    filtered = client.get(f"{BASE}/runs?status=max_cycles").text
    assert "capped" in filtered and "done-1" not in filtered
    assert "reached max_cycles=1" in filtered
    assert client.get(f"{BASE}/runs?status=nonsense").status_code == 200
    for n in range(60):
        store_run_row(store, f"bulk-{n:02d}", updated=1000.0 + n)
    first = client.get(f"{BASE}/runs").text
    assert "62 runs, page 1 of 2" in first and 'rel="next"' in first
    second = client.get(f"{BASE}/runs?page=2").text
    assert "bulk-00" in second and "bulk-59" not in second


def test_the_cost_of_a_priced_run_shows_in_dollars(store: RunStore, client: TestClient) -> None:
    tokens = Usage(input_tokens=1200, output_tokens=300, requests=1)
    script = [step(call("calculator", expression="1+1"), usage=tokens), answer("2", usage=tokens)]
    make_run(store, "priced", script, price=(1.0, 4.0))
    make_run(store, "free", [call("calculator", expression="1+1"), "2"])
    # two requests of 1,200 input tokens at $1 and 300 output tokens at $4 per million
    runs = client.get(f"{BASE}/runs").text
    row = runs[runs.index('href="/c-test/runs/priced"') :]
    assert '<td class="num">$0.0048</td>' in row[: row.index("</tr>")]
    row = runs[runs.index('href="/c-test/runs/free"') :]
    assert '<td class="num">-</td>' in row[: row.index("</tr>")]
    page = client.get(f"{BASE}/runs/priced").text
    assert "<dt>Cost</dt><dd>$0.0048</dd>" in page


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
        [step(call("calculator", expression="1+1"), content="again")] * 4,
        limits=limits(10),
    )
    page = client.get(f"{BASE}/runs/stall").text
    assert "Why it stopped: stalled" in page
    assert "same call with the same arguments" in page
    assert page.count('class="cycle"') == 4
    assert ">stall<" in page
    assert "&#34;expression&#34;: &#34;1+1&#34;" in page
    assert "<svg" in page and 'class="line"' in page
    unknown = client.get(f"{BASE}/runs/nope")  # a page that waits for the run to be stored
    assert unknown.status_code == 200 and "No run nope is stored in this database yet" in (
        unknown.text
    )


def test_run_page_links_child_runs_and_their_parent(store: RunStore, client: TestClient) -> None:
    child = Agent(ScriptedModel(["42"]))
    make_run(
        store,
        "boss",
        [step(call("helper", "c1", task="six times seven")), "42 it is"],
        tools=[child.as_tool("helper", "Does arithmetic.")],
    )
    page = client.get(f"{BASE}/runs/boss").text
    assert "Child runs" in page
    assert f'<a href="{BASE}/runs/boss.1.c1">boss.1.c1</a>' in page
    assert "six times seven" in page
    child_page = client.get(f"{BASE}/runs/boss.1.c1").text
    assert f'<a href="{BASE}/runs/boss">boss</a> (call c1)' in child_page
    assert "Child runs" not in child_page


def test_steering_a_stopped_run_queues_the_message(store: RunStore, client: TestClient) -> None:
    make_run(
        store,
        "r1",
        [call("calculator", expression="1+1"), call("calculator", expression="2+2")],
        limits=limits(1),
    )
    response = post(client, f"{BASE}/runs/r1/steer", message="try harder")
    assert response.status_code == 303
    notice = client.get(response.headers["location"]).text
    assert "delivered when the run resumes" in notice
    assert [(k, t) for _, k, t in store.stored_steering("r1", 0)] == [("message", "try harder")]
    refused = post(client, f"{BASE}/runs/r1/control", action="stop")
    assert refused.status_code == 400 and "is not running" in refused.text
    empty = post(client, f"{BASE}/runs/r1/steer", message="  ")
    assert empty.status_code == 400 and "empty" in empty.text


def test_a_completed_run_refuses_a_message(store: RunStore, client: TestClient) -> None:
    make_run(store, "done", [call("calculator", expression="6*7"), "42"])
    assert "it takes no more messages" in client.get(f"{BASE}/runs/done").text
    refused = post(client, f"{BASE}/runs/done/steer", message="and now?")
    assert refused.status_code == 400
    assert "ended completed; there is nothing to steer" in refused.text
    assert store.stored_steering("done", 0) == []


def test_a_live_run_is_stopped_and_paused_through_steering(
    store: RunStore, client: TestClient
) -> None:
    make_run(
        store,
        "live",
        [call("calculator", expression="1+1"), call("calculator", expression="2+2")],
        limits=limits(1),
    )
    mark_running(store, "live")
    page = client.get(f"{BASE}/runs/live").text
    assert 'value="stop"' in page and 'value="pause"' in page
    assert post(client, f"{BASE}/runs/live/control", action="pause").status_code == 303
    assert 'value="resume"' in client.get(f"{BASE}/runs/live").text
    assert post(client, f"{BASE}/runs/live/control", action="stop").status_code == 303
    kinds = [kind for _, kind, _ in store.stored_steering("live", 0)]
    assert kinds == ["pause", "stop"]
    assert post(client, f"{BASE}/runs/live/control", action="explode").status_code == 400


def mark_running(store: RunStore, run_id: str) -> None:
    import os

    with store.transaction() as conn:
        conn.execute(
            "UPDATE runs SET status = 'running', stop_reason = NULL, pid = ? WHERE run_id = ?",
            (os.getpid(), run_id),
        )


def test_an_open_question_is_answered_in_the_page(store: RunStore, client: TestClient) -> None:
    make_run(
        store,
        "asks",
        [call("calculator", expression="1+1"), call("calculator", expression="2+2")],
        limits=limits(1),
    )
    mark_running(store, "asks")
    question_id = post_question(store, "asks", f"pick one {IMG_XSS}")
    page = client.get(f"{BASE}/runs/asks").text
    assert "The run asks" in page and "&lt;img src=x" in page
    assert f'name="question_id" value="{question_id}"' in page
    response = post(
        client, f"{BASE}/runs/asks/answer", answer="the blue one", question_id=str(question_id)
    )
    assert response.status_code == 303
    assert open_questions(store, "asks") == []
    assert store.query("SELECT answer FROM questions WHERE id = ?", [question_id]) == [
        ("the blue one",)
    ]
    again = post(client, f"{BASE}/runs/asks/answer", answer="x", question_id=str(question_id))
    assert again.status_code == 400


def test_answering_a_needs_user_run_resumes_it(store: RunStore, client: TestClient) -> None:
    script = Path(store.path).with_name("script.json")
    model = write_script(script, call("ask_user", question="which?"), "you chose it")
    import asyncio

    from convergent import AgentSpec, build_agent

    spec = AgentSpec(
        model=model,
        tools=("ask_user",),
        ask_via="none",
        workspace=str(script.parent),
    )
    result = asyncio.run(build_agent(spec).run("ask", run_id="needs", store=store))
    assert result.stop_reason is StopReason.NEEDS_USER
    page = client.get(f"{BASE}/runs/needs").text
    assert "Answer and resume" in page and "which?" in page
    response = post(client, f"{BASE}/runs/needs/answer", answer="the left one")
    assert response.status_code == 303, response.text[-2000:]
    launcher = console_of(client.app).launcher  # type: ignore[arg-type]
    assert launcher.children[0].wait(timeout=60) == 0
    run = store.get_run("needs")
    assert run.stop_reason is StopReason.COMPLETED and run.output == "you chose it"
    timeline = client.get(f"{BASE}/runs/needs").text
    assert "the left one" in timeline
    refused = post(client, f"{BASE}/runs/needs/answer", answer="more")
    assert refused.status_code == 400 and "nothing to resume" in refused.text


def test_rewind_asks_for_confirmation_first(store: RunStore, client: TestClient) -> None:
    make_run(
        store,
        "rw",
        [call("calculator", expression="1+1"), call("calculator", expression="2+2"), "done"],
    )
    page = client.get(f"{BASE}/runs/rw").text
    assert f'href="{BASE}/runs/rw/rewind?cycle=1"' in page
    confirm = client.get(f"{BASE}/runs/rw/rewind?cycle=1").text
    assert "Rewind run rw to cycle 1?" in confirm and 'name="cycle" value="1"' in confirm
    assert store.get_run("rw").cycles == 3
    response = post(client, f"{BASE}/runs/rw/rewind", cycle="1")
    assert response.status_code == 303
    run = store.get_run("rw")
    assert run.cycles == 1 and run.stop_reason is StopReason.STOPPED
    assert "rewound to cycle 1" in client.get(response.headers["location"]).text
    assert post(client, f"{BASE}/runs/rw/rewind", cycle="9").status_code == 400
    assert post(client, f"{BASE}/runs/rw/rewind", cycle="x").status_code == 400


async def test_the_event_stream_sends_changed_fragments_only(store: RunStore) -> None:
    from convergent.ui.sse import FragmentStream, digest

    versions = iter([1, 1, 2, 3])
    pages = iter([{"a": "x", "b": "y"}, {"a": "x", "b": "z"}, {"a": "x", "b": "z"}])
    stream = FragmentStream(lambda: next(versions), lambda: next(pages), poll=0.0)
    events = stream.events()
    assert await anext(events) == b"retry: 1000\n\n"
    first = await anext(events)
    assert first.startswith(b"event: update\ndata: ") and b'"a"' in first and b'"b"' in first
    second = await anext(events)
    assert b'"b"' in second and b'"a"' not in second
    assert await anext(events) == b": idle\n\n"
    # between renders the stream keeps the digests of what it sent, not the HTML
    assert stream.sent == {"a": digest("x"), "b": digest("z")}
    await events.aclose()
    assert stream.closed and stream.sent == {} and stream.render is None


def test_runs_page_reads_one_page_of_many_runs(
    store: RunStore, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 2,000 runs the page reads its 50 rows in the index's order, sorting none."""
    for n in range(2000):
        store_run_row(store, f"many-{n}", updated=float(n))
    ran = recorded_queries(store, monkeypatch)
    page = client.get(f"{BASE}/runs").text
    assert "2000 runs, page 1 of 40" in page
    assert "many-1999" in page and "many-1950" in page and "many-1949" not in page
    (listing,) = [(sql, values) for sql, values in ran if "ORDER BY updated_at" in sql]
    assert listing[1][-2:] == (50, 0)  # LIMIT 50 OFFSET 0
    steps = outer_plan(store, listing)
    assert steps[0] == "SCAN runs USING INDEX runs_updated", steps
    assert not [step for step in steps if "TEMP B-TREE" in step], steps


def test_a_long_run_is_shown_in_windows_of_cycles(store: RunStore, client: TestClient) -> None:
    script = [
        step(call("calculator", expression=f"{n}+1"), content=f"step {n}") for n in range(1, 150)
    ]
    make_run(store, "long", [*script, "done"], limits=limits(200))
    latest = client.get(f"{BASE}/runs/long").text
    assert latest.count('class="cycle"') == 100
    assert 'id="cycle-150"' in latest and 'id="cycle-50"' not in latest
    assert ">step 51<" in latest and "50 earlier cycles not shown" in latest
    assert f'href="{BASE}/runs/long?upto=50"' in latest
    earlier = client.get(f"{BASE}/runs/long?upto=50").text
    assert earlier.count('class="cycle"') == 50
    assert ">step 1<" in earlier and ">step 50<" in earlier and ">step 51<" not in earlier
    assert "&#34;expression&#34;: &#34;50+1&#34;" in earlier
    assert "100 later cycles not shown" in earlier
    assert f'data-stream="{BASE}/runs/long/stream?upto=50"' in earlier


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
            step(call("calculator", expression="1+1"), content="maybe monthly?"),
            step(call("calculator", expression="12*3"), content="yearly"),
            "36?",
            "36",
        ],
        tools=[calculator, asker.tool],
        gate=ExecutiveGate(scorer, asker),
        verifier=lambda answer: Verification(answer == "36", "give only the number"),
    )
    page = client.get(f"{BASE}/runs/gated").text
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

    model = ScriptedModel([step(call("hang"), content="trying")])

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
    page = client.get(f"{BASE}/runs/cut").text
    assert "Why it stopped: interrupted" in page and "It can be resumed" in page
    assert '<span class="badge unfinished">unfinished</span>' in page
    assert ">trying<" in page


@pytest.mark.parametrize("run_id", ["-x", "x" * 231, ".hidden", "a%20b"])
def test_a_malformed_run_id_is_one_clear_error(
    store: RunStore, client: TestClient, run_id: str
) -> None:
    page = client.get(f"{BASE}/runs/{run_id}")
    assert page.status_code == 404 and "run id must be 1-128 letters" in page.text
    answered = post(client, f"{BASE}/runs/{run_id}/answer", answer="x")
    assert answered.status_code == 400 and "run id must be 1-128 letters" in answered.text
    assert client.get(f"{BASE}/runs/{run_id}/stream").status_code == 404
    assert console_of(client.app).launcher.children == []  # type: ignore[arg-type]


def needs_user_run(store: RunStore, folder: Path, run_id: str) -> Path:
    """A run started by ``convergent run`` in ``folder`` with a relative script and a
    workspace of its own, stopped needs_user; returns the script."""
    (folder / "ws").mkdir()
    script = folder / "s.json"
    write_script(script, call("ask_user", question="which?"), "you chose it")
    started = subprocess.run(
        [sys.executable, "-m", "convergent", "run", "pick", "--model", "scripted:s.json",
         "--workspace", "ws", "--ask-via", "none", "--run-id", run_id, "--db", str(store.path),
         "--json"],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert started.returncode == 1 and '"needs_user"' in started.stdout, started.stderr
    return script


@pytest.mark.slow
def test_answering_resumes_a_run_started_with_a_relative_script_and_a_workspace(
    store: RunStore, client: TestClient, tmp_path: Path
) -> None:
    needs_user_run(store, tmp_path, "rel")
    response = post(client, f"{BASE}/runs/rel/answer", answer="the left one")
    assert response.status_code == 303
    assert "did not start" not in client.get(response.headers["location"]).text
    launcher = console_of(client.app).launcher  # type: ignore[arg-type]
    assert launcher.children[0].wait(timeout=60) == 0
    run = store.get_run("rel")
    assert run.stop_reason is StopReason.COMPLETED and run.output == "you chose it"


@pytest.mark.slow
def test_a_resume_that_cannot_start_is_reported_as_failed(
    store: RunStore, client: TestClient, tmp_path: Path
) -> None:
    needs_user_run(store, tmp_path, "gone").unlink()  # its script is gone
    response = post(client, f"{BASE}/runs/gone/answer", answer="the left one")
    assert response.status_code == 400
    text = html.unescape(response.text)
    assert "the resume did not start: error: script file not found:" in text
    assert str(tmp_path / "s.json") in text and "resuming" not in text
    assert store.get_run("gone").stop_reason is StopReason.NEEDS_USER


def test_a_read_only_database_is_shown_with_every_action_disabled(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as writable:
        make_run(
            writable,
            "r1",
            [call("calculator", expression="1+1"), call("calculator", expression="2+2")],
            limits=limits(1),
        )
        make_run(
            writable,
            "asks",
            [step(call("ask_user", question="which?"))],
            tools=[AskUser(QueueChannel(answers=[]), timeout=0.01).tool],
        )
    with RunStore(path, readonly=True) as store:
        app = create_app(store, token=TOKEN, base=BASE)
        with TestClient(app, base_url=ORIGIN) as client:
            client.headers["authorization"] = f"Bearer {TOKEN}"
            runs = client.get(f"{BASE}/runs").text
            assert "open read-only" in runs and "r1" in runs and "asks" in runs
            for run_id in ("r1", "asks"):
                page = client.get(f"{BASE}/runs/{run_id}").text
                assert "open read-only" in page and '<form method="post"' not in page
                assert "rewind to here" not in page
            assert "which?" in client.get(f"{BASE}/runs/asks").text
            actions = {
                "steer": "message",
                "answer": "answer",
                "resume": "message",
                "rewind": "cycle",
                "control": "action",
            }
            for action, field in actions.items():
                data = {field: "stop" if action == "control" else "0"}
                refused = post(client, f"{BASE}/runs/r1/{action}", **data)
                assert refused.status_code == 400 and "is open read-only" in refused.text
            assert console_of(app).launcher.children == []
    with RunStore(path) as check:
        assert check.stored_steering("r1", 0) == []
        assert check.get_run("r1").cycles == 1


def test_the_running_and_interrupted_filters_page_in_sql(
    store: RunStore, client: TestClient
) -> None:
    import os

    dead = 4_194_305  # above Linux's largest process id: no such process
    with store.transaction() as conn:
        for n in range(130):
            pid = os.getpid() if n % 13 == 0 else (None if n % 13 == 1 else dead + n)
            conn.execute(
                "INSERT INTO runs (run_id, task, model, status, cycles, usage, elapsed, "
                "started_at, updated_at, pid, epoch, message_count, state_version) "
                "VALUES (?, 'job', 'scripted', 'running', 1, '{}', 0, ?, ?, ?, 1, 0, 2)",
                (f"job-{n:03d}", float(n), float(n), pid),
            )
    store_run_row(store, "finished", updated=500.0)
    assert store.count_runs("running") == 10 and store.count_runs("interrupted") == 120
    interrupted = store.list_runs(50, offset=50, status="interrupted")
    expected = [f"job-{n:03d}" for n in reversed(range(130)) if n % 13 != 0][50:100]
    assert [run.run_id for run in interrupted] == expected
    assert all(run.status == "interrupted" for run in interrupted)
    live = [run.run_id for run in store.iter_runs(status="running", page=3)]
    assert live == [f"job-{n:03d}" for n in reversed(range(0, 130, 13))]
    page = client.get(f"{BASE}/runs?status=interrupted&page=3").text
    assert "120 runs with status interrupted, page 3 of 3" in page
    assert page.count('class="status-interrupted"') == 20 and "job-001" in page
