"""The console in a real browser: Playwright driving Debian's chromium.

The console runs in a uvicorn server on 127.0.0.1 (in a thread); runs are driven by
`ScriptedModel` in another thread through their own connection to the same database,
as a separate ``convergent run`` process would. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import threading
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from convergent import (
    Agent,
    Limits,
    ModelResponse,
    RunResult,
    ScriptedModel,
    StopPolicy,
    StopReason,
    ToolCall,
    Usage,
    calculator,
    resume,
    tool,
)
from convergent.durability.sqlite import DatabaseSteering, RunStore
from convergent.gate import AskUser
from convergent.messages import Message, ToolSpec, UserMessage
from convergent.models import Model, ModelSettings, StreamPart, TextChunk, ToolCallChunk
from convergent.testing import call, scripted, step
from convergent.ui import WebChannel
from convergent.ui.app import console_of
from convergent.ui.live_text import LiveTextWriter
from convergent.ui.server import Listening, serve_in_thread

from .conftest import IMG_XSS, SCRIPT_XSS, echo, make_run, needs_extra
from .test_resume import stopped_cli_run
from .test_rewind import edited_run

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"

needs_extra()
sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (the dev extra)")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install chromium)"
    ),
]

WAIT_MS = 20_000


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    with sync_api.sync_playwright() as started:
        yield started


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture
def console(store: RunStore) -> Iterator[Listening]:
    with serve_in_thread(store) as listening:
        yield listening


@pytest.fixture
def page(browser: Any, console: Listening) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    opened.dialogs = dialogs
    try:
        yield opened
    finally:
        context.close()
    assert dialogs == [], f"a page opened a dialog: {dialogs}"


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"console-{name}.png"), full_page=True)


class Background:
    """A run driven in a thread through its own connection to the database."""

    def __init__(self, db: Path, run: Callable[[RunStore], Any]) -> None:
        self.result: RunResult | None = None
        self.error: BaseException | None = None

        def main() -> None:
            try:
                with RunStore(db) as store:
                    self.result = asyncio.run(run(store))
            except BaseException as exc:  # reported by join()
                self.error = exc

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 60) -> RunResult:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the run did not end"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


@tool
async def slow_step(n: int) -> str:
    """Take a moment, then report the step."""
    await asyncio.sleep(0.25)
    return f"step {n} done"


def open_run(page: Any, run_id: str) -> None:
    """Click the run's link in the runs table once the live table shows it."""
    link = page.locator(f"table.runs a[href$='/runs/{run_id}']")
    link.wait_for()
    link.click()
    page.wait_for_selector(f"h1:has-text('Run {run_id}')")


def stepping_model(steps: int | None, *, done: str = "all steps done") -> ScriptedModel:
    """One slow step per cycle; after ``steps`` steps (None: never) the answer."""
    count = 0

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        nonlocal count
        count += 1
        usage = Usage(input_tokens=100 + 40 * count, output_tokens=20 + count % 3 * 15, requests=1)
        if steps is not None and count > steps:
            return ModelResponse(content=done, usage=usage)
        last = messages[-1]
        note = f" (told: {last.content})" if isinstance(last, UserMessage) and count > 1 else ""
        step = ToolCall(id=f"s{count}", name="slow_step", arguments={"n": count})
        text = f"working on step {count}{note}"
        return ModelResponse(content=text, tool_calls=(step,), usage=usage)

    return ScriptedModel(script, record_requests=False)


def test_runs_list_filters_and_opens_a_run(store: RunStore, console: Listening, page: Any) -> None:
    make_run(store, "first-run", [step(call("calculator", expression="6*7")), "42"])
    make_run(
        store,
        "capped-run",
        [step(call("calculator", expression="1+1"))] * 2,
        limits=Limits(max_cycles=1),
    )
    page.goto(console.entry)
    assert page.url == f"{console.url}{console.base}/runs"
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 2
    assert "completed" in rows.nth(1).inner_text() or "completed" in rows.nth(0).inner_text()
    page.wait_for_selector("#live.on")
    shot(page, "runs")
    page.select_option("#status", "max_cycles")
    page.click("text=Filter")
    page.wait_for_url(re.compile(r"status=max_cycles"))
    assert page.locator("table.runs tbody tr").count() == 1
    open_run(page, "capped-run")
    page.wait_for_url(f"{console.url}{console.base}/runs/capped-run")
    assert "Why it stopped: max_cycles" in page.inner_text("#summary")


def test_a_live_run_updates_without_reloading(
    store: RunStore, console: Listening, page: Any
) -> None:
    page.goto(console.entry)
    run = Background(
        store.path,
        lambda own: Agent(stepping_model(8), [slow_step], store=own).run("step", run_id="live-run"),
    )
    open_run(page, "live-run")
    page.wait_for_selector("#cycle-3")
    assert "running" in page.inner_text("#summary")
    loads = page.evaluate("performance.getEntriesByType('navigation').length")
    shot(page, "live-run")
    page.wait_for_selector("#summary >> text=Why it stopped: completed")
    assert run.join().stop_reason is StopReason.COMPLETED
    assert page.locator("li.cycle").count() == 9
    assert "all steps done" in page.inner_text("#summary")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == loads
    assert page.locator("#chart svg rect.bar").count() == 9
    shot(page, "completed-run")


def test_answering_ask_user_in_the_page_completes_the_run(
    store: RunStore, console: Listening, page: Any
) -> None:
    def run(own: RunStore) -> Any:
        ask = ToolCall(id="q1", name="ask_user", arguments={"question": "Which colour?"})
        model = ScriptedModel([ModelResponse(tool_calls=(ask,)), "painted it"])
        asker = AskUser(WebChannel(own, "asking", poll_interval=0.05), timeout=30)
        return Agent(model, [asker.tool], store=own).run("paint", run_id="asking")

    background = Background(store.path, run)
    page.goto(console.entry)
    open_run(page, "asking")
    page.wait_for_selector("text=The run asks")
    assert "Which colour?" in page.inner_text("#questions")
    page.fill("#questions input[name=answer]", "blue")
    shot(page, "question")
    page.press("#questions input[name=answer]", "Enter")
    page.wait_for_selector("text=answer sent")
    result = background.join()
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[0].result == "blue"
    page.wait_for_selector("#summary >> text=Why it stopped: completed")
    assert "blue" in page.inner_text("#timeline")


def test_steer_then_stop_a_running_run(store: RunStore, console: Listening, page: Any) -> None:
    def run(own: RunStore) -> Any:
        agent = Agent(stepping_model(None), [slow_step], store=own, limits=Limits(max_cycles=400))
        return agent.run("go on", run_id="steered", steering=DatabaseSteering(own, "steered"))

    background = Background(store.path, run)
    page.goto(console.entry)
    open_run(page, "steered")
    page.wait_for_selector("#cycle-2")
    page.fill("#message", "count faster")
    page.click("text=Send message")
    page.wait_for_selector("text=message sent")
    page.wait_for_selector("#timeline >> text=message delivered: count faster")
    page.wait_for_selector("#timeline >> text=(told: count faster)")
    page.click("button[value=stop]")
    page.wait_for_selector("text=stop sent")
    result = background.join()
    assert result.stop_reason is StopReason.STOPPED
    assert result.stop_detail == "stop requested from the web console"
    page.wait_for_selector("#summary >> text=Why it stopped: stopped")
    shot(page, "stopped")


def test_hostile_model_and_tool_text_renders_as_text(
    store: RunStore, console: Listening, page: Any
) -> None:
    make_run(
        store,
        "hostile",
        [
            step(call("echo", text=IMG_XSS), content=SCRIPT_XSS),
            step(call("echo", text=SCRIPT_XSS), content=IMG_XSS),
            f"{SCRIPT_XSS}{IMG_XSS}",
        ],
        tools=[echo],
        task=SCRIPT_XSS,
    )
    page.goto(console.entry)
    assert SCRIPT_XSS in page.inner_text("table.runs")
    open_run(page, "hostile")
    timeline = page.inner_text("#timeline")
    assert SCRIPT_XSS in timeline and IMG_XSS in timeline
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 1
    page.wait_for_timeout(500)  # an injected onerror handler or script would have run by now
    assert page.dialogs == []
    shot(page, "xss")


def test_keyboard_only_steering_and_rewind(store: RunStore, console: Listening, page: Any) -> None:
    make_run(  # stopped, not completed: a completed run takes no more messages
        store,
        "keys",
        [step(call("calculator", expression=f"{n}+1")) for n in range(3)] + ["4"],
        limits=Limits(max_cycles=3),
        policy=StopPolicy(final_answer=False),
    )
    page.goto(console.entry)

    def tab_to(predicate: str, limit: int = 40) -> None:
        for _ in range(limit):
            page.keyboard.press("Tab")
            if page.evaluate(
                f"(() => {{ const e = document.activeElement; return {predicate}; }})()"
            ):
                return
        raise AssertionError(f"Tab never reached {predicate}")

    tab_to("e.textContent === 'keys'")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{console.url}{console.base}/runs/keys")
    # a stopped run has one message box: the message its resumption will carry
    tab_to("e.id === 'resume-message'")
    page.keyboard.type("look again")
    tab_to("e.textContent === 'Resume the run'", limit=3)
    assert page.locator("#message").count() == 0
    tab_to("e.classList.contains('rewind')")
    # the focused element is visibly marked
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") == "solid"
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Rewind run keys to cycle")
    # the confirmation button takes the focus (autofocus applies once the page has loaded)
    page.wait_for_function(
        "() => (document.activeElement.textContent || '').trim().startsWith('Rewind to cycle')"
    )
    shot(page, "rewind-confirm")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=rewound to cycle")
    assert store.get_run("keys").stop_reason is StopReason.STOPPED
    assert store.get_run("keys").cycles == 1


def test_the_coordinator_page_follows_the_state_file(
    browser: Any, store: RunStore, tmp_path: Path
) -> None:
    fixture = Path(__file__).parents[1] / "coordinator" / "fixtures" / "workflow-state.v1.yaml"
    state = tmp_path / "workflow-state.yaml"
    state.write_text(fixture.read_text())
    with serve_in_thread(store, state_file=state) as console:
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        try:
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(console.entry)
            page.click("nav >> text=Coordinator")
            page.wait_for_selector("#live.on")
            assert page.locator("svg.graph g.node").count() == 5
            assert page.locator("svg.graph line.edge").count() == 2
            assert "1 failed, 41 passed" in page.inner_text("table.checks")
            shot(page, "coordinator")
            state.write_text(fixture.read_text().replace("stall_count: 1", "stall_count: 3"))
            page.wait_for_selector("text=max_stall_count exceeded")
        finally:
            context.close()


class Recorder(http.server.BaseHTTPRequestHandler):
    """An unrelated web server: records the cookies each request brings."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Cookie", "")))
        body = b"<!doctype html><title>another server</title><p>another server</p>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def other_server() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """A server on another loopback port, and the Cookie headers it received."""
    Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Recorder.seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_session_cookie_never_reaches_another_port_and_is_no_token(
    store: RunStore,
    console: Listening,
    page: Any,
    other_server: tuple[str, list[tuple[str, str]]],
) -> None:
    make_run(store, "r1", ["done"])
    page.goto(console.entry)
    page.wait_for_selector("table.runs")
    other, seen = other_server
    # the pages an attacker on another port can serve: any path but the random base
    paths = ("/", "/runs", "/runs/r1", "/c-0000000000000000/runs", "/static/console.js")
    for path in paths:
        page.goto(f"{other}{path}")
        page.wait_for_selector("text=another server")
    assert set(paths) <= {path for path, _ in seen}
    assert [(path, cookie) for path, cookie in seen if cookie] == []
    (session,) = [c for c in page.context.cookies() if c["name"].startswith("convergent")]
    assert session["path"] == console.base and session["httpOnly"]
    assert session["sameSite"] == "Strict" and console.token not in session["value"]
    # the session's value, replayed by whoever got hold of it, is worth nothing as a token
    with httpx.Client(base_url=console.url, timeout=30) as client:
        as_bearer = {"authorization": f"Bearer {session['value']}"}
        assert client.get(f"{console.base}/runs", headers=as_bearer).status_code == 401
        assert client.get("/runs", headers=as_bearer).status_code == 401
        steer = client.post(
            f"{console.base}/runs/r1/steer",
            data={"message": "obey me"},
            headers={**as_bearer, "origin": console.url},
        )
        assert steer.status_code == 401
        as_cookie = {"cookie": f"{session['name']}={session['value']}"}
        assert client.get("/runs", headers=as_cookie).status_code == 401
    assert store.stored_steering("r1", 0) == []
    # while the browser itself still uses its session under the base
    page.goto(f"{console.url}{console.base}/runs")
    assert page.locator("table.runs tbody tr").count() == 1


def test_a_domain_rebound_to_loopback_gets_nothing(playwright: Any, console: Listening) -> None:
    port = console.url.rsplit(":", 1)[1]
    rebinding = playwright.chromium.launch(
        executable_path=str(CHROMIUM),
        args=["--no-sandbox", "--host-resolver-rules=MAP rebound.test 127.0.0.1"],
    )
    try:
        page = rebinding.new_page()
        page.set_default_timeout(WAIT_MS)
        # even with the token (an attacker has none), the rebound name is refused
        response = page.goto(f"http://rebound.test:{port}/?token={console.token}")
        assert response is not None and response.status == 400
        assert "answers only requests addressed to it" in page.inner_text("body")
        assert page.context.cookies() == []
        response = page.goto(f"http://rebound.test:{port}{console.base}/runs")
        assert response is not None and response.status == 400
    finally:
        rebinding.close()


class HeldStream(Model):
    """Streams its first reply in pieces, stopping twice until the test lets it go on."""

    def __init__(self, gates: Sequence[threading.Event]) -> None:
        self.gates = list(gates)
        self.replies = 0

    @property
    def name(self) -> str:
        return "held"

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        raise AssertionError("a watched run streams")

    async def request_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[StreamPart, None]:
        self.replies += 1
        if self.replies > 1:
            yield TextChunk("The answer is 391.")
            yield ModelResponse(content="The answer is 391.")
            return
        yield TextChunk("17 * 23 ")
        yield TextChunk("= 341, I think")
        await asyncio.to_thread(self.gates[0].wait, 30)
        yield ToolCallChunk(0, "c1", "calculator", '{"expression": "17 * 23"}')
        await asyncio.to_thread(self.gates[1].wait, 30)
        call = ToolCall(id="c1", name="calculator", arguments={"expression": "17 * 23"})
        yield ModelResponse(content="17 * 23 = 341, I think", tool_calls=(call,))


def test_the_timeline_streams_the_reply_as_the_model_writes_it(
    store: RunStore, console: Listening, page: Any
) -> None:
    gates = [threading.Event(), threading.Event()]

    def run(own: RunStore) -> Any:
        writer = LiveTextWriter(own.path)
        agent = Agent(HeldStream(gates), [calculator], store=own, observers=[writer])
        return agent.run("What is 17 * 23?", run_id="streaming")

    background = Background(store.path, run)
    try:
        page.goto(console.entry)
        open_run(page, "streaming")
        reply = page.locator("#cycle-1 .model.streaming")
        reply.wait_for()
        page.wait_for_selector("#cycle-1 .model-text >> text=17 * 23 = 341, I think")
        assert reply.locator(".who").inner_text().startswith("model")
        loads = page.evaluate("performance.getEntriesByType('navigation').length")
        shot(page, "streaming")
        gates[0].set()  # a tool call follows: what the model wrote was thinking
        page.wait_for_selector("#cycle-1 .model.streaming .who >> text=thinking")
        gates[1].set()
        page.wait_for_selector("#summary >> text=Why it stopped: completed")
    finally:
        for gate in gates:
            gate.set()
    assert background.join().stop_reason is StopReason.COMPLETED
    assert page.locator(".model.streaming").count() == 0
    assert "17 * 23 = 341, I think" in page.inner_text("#cycle-1")
    assert "The answer is 391." in page.inner_text("#summary")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == loads


@pytest.mark.slow
def test_the_resume_button_continues_a_stopped_run_with_a_message(
    store: RunStore, console: Listening, page: Any, tmp_path: Path
) -> None:
    stopped_cli_run(store, tmp_path, "capped")
    make_run(store, "finished", ["42"])
    page.goto(console.entry)
    open_run(page, "finished")
    assert "it cannot be resumed" in page.inner_text("#controls")
    assert page.locator("text=Resume the run").count() == 0
    page.goto(f"{console.url}{console.base}/runs")
    open_run(page, "capped")
    page.fill("#resume-message", "give the product")
    shot(page, "resume")
    page.click("text=Resume the run")
    page.wait_for_selector("text=with your message")
    page.wait_for_selector("#summary >> text=Why it stopped: completed")
    assert "it is 42" in page.inner_text("#summary")
    page.wait_for_selector("#timeline >> text=message delivered: give the product")
    assert page.locator("text=Resume the run").count() == 0
    launcher = console_of(console.app).launcher
    assert launcher.children[0].wait(timeout=60) == 0


def test_searching_the_runs_list_by_task_and_output(
    store: RunStore, console: Listening, page: Any
) -> None:
    make_run(store, "peru", ["Lima"], task="capital of Peru")
    make_run(store, "chile", ["Santiago"], task="another capital")
    make_run(store, "sum", ["4"], task="2+2")
    page.goto(console.entry)
    assert page.locator("table.runs tbody tr").count() == 3
    page.fill("#search", "CAPITAL")
    page.press("#search", "Enter")
    page.wait_for_url(re.compile(r"q=CAPITAL"))
    assert page.locator("table.runs tbody tr").count() == 2
    assert "matching “CAPITAL”" in page.inner_text("#runs-table")
    page.fill("#search", "santiago")
    page.click("text=Filter")
    page.wait_for_url(re.compile(r"q=santiago"))
    page.wait_for_selector("#live.on")
    shot(page, "search")
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 1 and "chile" in rows.inner_text()
    assert page.input_value("#search") == "santiago"


def test_the_rewind_page_lists_the_files_it_restores(
    store: RunStore, console: Listening, page: Any, tmp_path: Path
) -> None:
    edited_run(store, tmp_path / "ws")
    page.goto(console.entry)
    open_run(page, "files")
    page.click("#cycle-1 a.rewind")
    page.wait_for_selector("text=Rewind run files to cycle 1?")
    rows = page.locator("table.files tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).inner_text() == f"{SCRIPT_XSS}.txt\tdeleted (it did not exist then)"
    assert rows.nth(1).inner_text() == "notes.txt\trestored to its content at the end of cycle 1"
    shot(page, "rewind-files")
    page.click("text=Rewind to cycle 1")
    page.wait_for_selector("text=1 file(s) restored, 1 deleted")
    assert (tmp_path / "ws" / "notes.txt").read_text() == "cycle 1\n"


def test_the_timeline_of_a_run_and_a_chart_without_token_counts(
    store: RunStore, console: Listening, page: Any
) -> None:
    make_run(
        store,
        "timed",
        [step(call("slow_step", n=1), call("echo", text="x")), step(call("slow_step", n=2)), "ok"],
        tools=[slow_step, echo],
    )
    page.goto(console.entry)
    open_run(page, "timed")
    chart = page.locator("#chart")
    assert "reported no token counts" in chart.inner_text()
    assert chart.locator("rect.bar").count() == 0
    steps = page.locator("figure.trace g.step")
    assert steps.count() == 6  # three model requests, three calls
    assert page.locator("figure.trace g.step.tool").count() == 3
    # every row is drawn, the 1 ms echo too, and a call's tooltip gives its time
    for i in range(steps.count()):
        assert steps.nth(i).locator("rect").bounding_box()["width"] >= 1
    tips = [steps.nth(i).locator("title").text_content() or "" for i in range(steps.count())]
    slow = [t for t in tips if t.startswith("slow_step")]
    assert len(slow) == 2 and all(" ms, " in t or " s, " in t for t in slow)
    # one axis for the whole run: each cycle's bars start after the one before
    xs = [float(steps.nth(i).locator("rect").get_attribute("x") or 0) for i in range(6)]
    assert xs[0] <= xs[1] <= xs[3] <= xs[4] < xs[5]
    assert "echo · " in page.locator("figure.trace").inner_text()
    shot(page, "timeline")


def test_typed_output_shows_and_the_run_downloads_as_json(
    store: RunStore, console: Listening, page: Any
) -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        population: int

    make_run(store, "typed", ['{"name": "Lima", "population": 10000000}'], output_type=City)
    page.goto(console.entry)
    open_run(page, "typed")
    typed = page.locator("pre.output-data")
    assert '"population": 10000000' in typed.inner_text()
    with page.expect_download() as started:
        page.click("text=Download the run as JSON")
    download = started.value
    assert download.suggested_filename == "run-typed.json"
    data = json.loads(Path(download.path()).read_text())
    assert data["run"]["output_data"] == {"name": "Lima", "population": 10000000}
    assert data["run"]["status"] == "completed"


# -- the console as a trace view ----------------------------------------------------


def test_child_runs_nest_and_the_runs_list_filters_by_tool_and_errors(
    store: RunStore, console: Listening, page: Any
) -> None:
    helper = Agent(scripted(call("echo", text="inside"), "child done"), [echo]).as_tool(
        "helper", "Helps."
    )
    make_run(store, "parent", [call("helper", task="go"), "done"], tools=[helper])
    make_run(store, "broken", [call("calculator", expression="1/0"), "gave up"])
    page.goto(console.entry)
    rows = page.locator("table.runs tbody tr")
    rows.first.wait_for()
    assert rows.count() == 3  # the child is listed, under its parent
    child = page.locator("table.runs tbody tr.child")
    assert child.count() == 1 and "↳" in child.inner_text()
    assert child.locator("td.run-id").bounding_box()["x"] >= 0
    parent_cell = rows.nth(1).locator("td.run-id a").bounding_box()
    child_cell = child.locator("td.run-id a").bounding_box()
    assert child_cell["x"] > parent_cell["x"]  # indented
    shot(page, "trace-runs-nested")
    page.fill("#tool", "calculator")
    page.click("text=Filter")
    page.wait_for_url(re.compile(r"tool=calculator"))
    assert page.locator("table.runs tbody tr").count() == 1
    assert "broken" in page.inner_text("#runs-table")
    page.fill("#tool", "")
    page.check("#errors")
    page.click("text=Filter")
    page.wait_for_url(re.compile(r"errors=1"))
    assert "1 run with errors" in page.inner_text("#runs-table")
    page.fill("#search", "inside")  # a tool call's argument
    page.uncheck("#errors")
    page.click("text=Filter")
    page.wait_for_url(re.compile(r"q=inside"))
    assert "child of" in page.inner_text("#runs-table")
    shot(page, "trace-runs-search")


def test_the_timeline_nests_a_child_run_and_marks_a_resume(
    store: RunStore, console: Listening, page: Any
) -> None:
    helper = Agent(scripted(call("echo", text="inner"), "child done"), [echo]).as_tool(
        "helper", "Helps."
    )
    # the child's 2 cycles count as the caller's: 1 + 2 + 1 reach the limit of 4
    make_run(
        store,
        "resumed",
        [call("helper", task="go"), call("echo", text="first")],
        tools=[helper, echo],
        limits=Limits(max_cycles=4),
    )
    agent = Agent(scripted(call("echo", text="again"), "all done"), [helper, echo], store=store)
    resumed = resume("resumed", store=store, agent=agent)
    worker = threading.Thread(target=asyncio.run, args=(resumed,))
    worker.start()
    worker.join()
    page.goto(console.entry)
    open_run(page, "resumed")
    trace = page.locator("figure.trace")
    trace.wait_for()
    labels = trace.locator("g.step text").all_text_contents()
    assert [text.split(" · ")[0] for text in labels] == [
        "cycle 1 model",
        "helper",
        "↳ cycle 1 model",
        "↳ echo",
        "↳ cycle 2 model",
        "cycle 2 model",
        "echo",
        "cycle 3 model",
        "echo",
        "cycle 4 model",
    ]
    # the child's bars lie inside the helper call's bar
    helper_bar = trace.locator("g.step.tool.depth-0 rect").first.bounding_box()
    for index in range(trace.locator("g.step.depth-1").count()):
        bar = trace.locator("g.step.depth-1 rect").nth(index).bounding_box()
        assert helper_bar["x"] - 1 <= bar["x"] and bar["x"] + bar["width"] <= (
            helper_bar["x"] + helper_bar["width"] + 2
        )
    mark = trace.locator("g.mark")
    assert mark.count() == 1 and "resumed at cycle 2" in (mark.text_content() or "")
    # the mark lies between the two processes' bars
    mark_x = float(mark.locator("line").get_attribute("x1") or 0)
    before = float(trace.locator("g.step rect").nth(6).get_attribute("x") or 0)
    after = float(trace.locator("g.step rect").nth(7).get_attribute("x") or 0)
    assert before <= mark_x <= after + 1
    assert "resumed" in page.inner_text("#timeline")  # and a card where it went on
    shot(page, "trace-timeline")


def test_a_request_shows_what_the_model_was_sent(
    store: RunStore, console: Listening, page: Any
) -> None:
    make_run(
        store,
        "sent",
        [step(call("calculator", expression="6*7")), "42"],
        task="What is 6*7?",
        system_prompt="Answer in numbers.",
    )
    page.goto(console.entry)
    open_run(page, "sent")
    page.locator("#cycle-2 a.request").click()
    page.wait_for_selector("h1:has-text('What the model was sent in cycle 2')")
    roles = page.locator(".message .badge").all_inner_texts()
    assert roles[:4] == ["system", "user", "assistant", "tool"]
    assert "Answer in numbers." in page.inner_text(".message.system")
    assert '"expression": "6*7"' in page.inner_text(".message.assistant")
    page.click("summary:has-text('calculator')")
    assert '"expression"' in page.inner_text("details.tool-spec pre")
    shot(page, "trace-request")


def test_a_stall_note_is_a_card_and_a_finished_run_takes_no_message(
    store: RunStore, console: Listening, page: Any
) -> None:
    same = step(call("calculator", expression="1+1"))
    make_run(store, "stuck", [same, same, same, same, "it is 2"])
    page.goto(console.entry)
    open_run(page, "stuck")
    card = page.locator("#timeline .event.warn")
    assert "note instead of stopping stalled" in card.first.inner_text()
    assert "{" not in card.first.inner_text()
    assert page.locator("textarea").count() == 1  # the resume box, and no other
    assert page.locator("text=Send message").count() == 0
    assert "Best answer after the stop" in page.inner_text("#summary")
    shot(page, "trace-stalled")
    make_run(store, "done", ["2"])
    page.goto(f"{console.url}{console.base}/runs/done")
    assert page.locator("textarea").count() == 0
    assert "takes no more messages" in page.inner_text("#controls")


def test_a_live_run_counts_its_time_and_shows_the_model_working(
    store: RunStore, console: Listening, page: Any
) -> None:
    tool_done, answer_now = threading.Event(), threading.Event()

    @tool
    def hold() -> str:
        """Wait for the test."""
        tool_done.wait(60)
        return "held"

    def slow_model(messages: Any, tools: Any) -> ModelResponse:
        if not any(message.role == "tool" for message in messages):
            return ModelResponse(tool_calls=(call("hold"),))
        answer_now.wait(60)  # the model "thinks" until the test lets it answer
        return ModelResponse(content="finally")

    def run(own: RunStore) -> Any:
        return Agent(ScriptedModel(slow_model), [hold], store=own).run("wait", run_id="slow")

    background = Background(store.path, run)
    try:
        page.goto(console.entry)
        open_run(page, "slow")
        clock = page.locator("#summary [data-tick]")
        clock.wait_for()
        page.wait_for_function(
            "(before) => document.querySelector('#summary [data-tick]').textContent !== before",
            arg=clock.inner_text(),
        )
        tool_done.set()  # the call ends; the model works on cycle 2, with no text yet
        working = page.locator("#timeline .working")
        working.wait_for()
        assert working.inner_text().startswith("model working…")
        counted = working.locator("[data-tick]").inner_text()
        page.wait_for_function(
            "(before) => document.querySelector('#timeline .working [data-tick]')"
            ".textContent !== before",
            arg=counted,
        )
        assert page.locator("figure.trace g.step.open").count() == 1
        shot(page, "trace-live")
    finally:
        tool_done.set()
        answer_now.set()
    assert background.join().stop_reason is StopReason.COMPLETED
    page.wait_for_selector("#summary >> text=Why it stopped: completed")
    assert page.locator("#timeline .working").count() == 0


def test_a_live_page_opened_before_its_run_recovers_and_moves_while_the_model_works(
    store: RunStore, console: Listening, page: Any
) -> None:
    errors: list[str] = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    refused: list[str] = []
    page.on("response", lambda response: response.status == 401 and refused.append(response.url))
    answer_now = threading.Event()

    def thinking(messages: Any, tools: Any) -> ModelResponse:
        if not any(message.role == "tool" for message in messages):
            answer_now.wait(60)  # the model "thinks" until the test lets it answer
            return ModelResponse(
                content="let me add", tool_calls=(call("calculator", expression="2+2"),)
            )
        return ModelResponse(content="it is 4")

    page.goto(console.entry)
    page.goto(f"{console.url}{console.base}/runs/early")  # before the run is stored
    page.wait_for_selector("text=No run early is stored in this database yet")
    page.wait_for_selector("#live.on")

    def run(own: RunStore) -> Any:
        model = ScriptedModel(thinking)
        settings = ModelSettings(temperature=0.3)
        return Agent(model, [calculator], store=own, settings=settings).run("add", run_id="early")

    background = Background(store.path, run)
    try:
        # the page fills in by itself once the run is stored, without a reload
        page.wait_for_selector("#summary >> text=running")
        working = page.locator("#timeline .working")
        working.wait_for()
        assert page.locator("#timeline >> text=No cycle yet.").count() == 0
        age = page.locator("#summary [data-age]")
        page.wait_for_function(
            "(before) => document.querySelector('#summary [data-age]').textContent !== before",
            arg=age.inner_text(),
        )
        bar = page.locator("figure.trace g.step.open rect")
        width = float(bar.get_attribute("width") or 0)
        page.wait_for_function(
            "(before) => Number(document.querySelector('figure.trace g.step.open rect')"
            ".getAttribute('width')) > before + 1",
            arg=width,
        )
        shot(page, "live-working")
        page.locator("figure.trace a.span-link").last.click()
        panel = page.locator("#span-panel")
        panel.wait_for(state="visible")
        assert "Cycle 1: model request" in panel.inner_text()
        assert "the model is working on it" in panel.inner_text()
        page.keyboard.press("Escape")
        panel.wait_for(state="hidden")
    finally:
        answer_now.set()
    assert background.join().stop_reason is StopReason.COMPLETED
    page.wait_for_selector("#summary >> text=Why it stopped: completed")
    page.locator("#cycle-1 .call").click()  # a card opens its call
    panel = page.locator("#span-panel")
    panel.wait_for(state="visible")
    page.wait_for_selector("#span-panel >> text=calculator: tool call of cycle 1")
    page.locator("figure.trace a.span-link").first.click()  # a bar opens its request
    page.wait_for_selector("#span-panel >> text=Cycle 1: model request")
    assert "temperature" in panel.inner_text() and "0.3" in panel.inner_text()
    assert "let me add" in panel.inner_text()
    shot(page, "span-panel")
    assert refused == [] and errors == [], (refused, errors)


def test_the_overview_across_runs_and_two_runs_compared(
    store: RunStore, console: Listening, page: Any
) -> None:
    usage = Usage(input_tokens=900, output_tokens=60, requests=1)
    for n in range(3):
        make_run(
            store,
            f"done-{n}",
            [step(call("calculator", expression=f"{n}*7"), usage=usage), "fine"],
            price=(1.0, 10.0),
        )
    same = step(call("echo", text="again"), usage=usage)
    make_run(store, "looping", [same] * 4 + ["gave up"], price=(1.0, 10.0), tools=[echo])
    make_run(
        store,
        "other",
        [step(call("calculator", expression="0*7"), usage=usage), "different"],
        price=(1.0, 10.0),
    )
    page.goto(console.entry)
    # tick two runs (the live table keeps them ticked), then compare them
    page.locator("input[name=run][value='done-0']").check()
    page.locator("input[name=run][value='other']").check()
    page.click("text=Compare the two runs ticked")
    page.wait_for_selector("h2:has-text('Where they diverged')")
    assert "They did the same for 1 cycle, and first differed at cycle 2" in page.inner_text("main")
    assert page.locator("tr.first-difference").count() == 1
    assert page.locator(".chart.spend polyline").count() == 2
    shot(page, "compare")
    page.click("nav >> text=Across runs")
    page.wait_for_selector("h1:has-text('Across runs')")
    assert "5 runs of the last 30 days" in page.inner_text("main")
    reasons = page.locator(".chart.reasons g.reason-row")
    assert reasons.count() == 2  # completed and stalled
    assert page.locator(".chart.periods rect.r-completed").count() >= 1
    shot(page, "overview")
    page.locator(".chart.reasons a").nth(1).click()  # the stalled runs alone
    page.wait_for_url(re.compile(r"reason=stalled"))
    assert "1 run of the last 30 days, stopped stalled" in page.inner_text("main")
    assert "echo" in page.inner_text("table.across >> nth=1")
