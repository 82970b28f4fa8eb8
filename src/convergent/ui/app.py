"""The console's Starlette application: pages, live streams and actions.

`create_app` builds it over one run database (and optionally one workflow state
file). Pages are rendered on the server; each page's live parts are fragments that
the page's event stream sends again when they change. Every action is a POST form that
redirects back (post/redirect/get), so reloading a page never repeats one.

The pages live under the console's random base path (see `convergent.ui.auth`); every
address a page names starts with it. A database opened read-only is shown with its
actions disabled.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import secrets
from collections.abc import AsyncIterator, Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, urlencode

import anyio.to_thread
from jinja2 import Environment
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from convergent._run_id import check_run_id
from convergent.durability.sqlite import RunStore, RunSummary
from convergent.exceptions import ConvergentError, UserError
from convergent.ui import actions
from convergent.ui.auth import Address, TokenGuard, new_base
from convergent.ui.compare import compare_runs
from convergent.ui.download import run_json
from convergent.ui.explain import STATUSES, explain_stop
from convergent.ui.live_text import live_version, read_live_text, show_live_text
from convergent.ui.overview import (
    REASONS,
    WINDOWS,
    OverviewQuery,
    load_overview,
    overview_query,
)
from convergent.ui.request import load_request
from convergent.ui.rewind import plan_rewind
from convergent.ui.spans import load_after_stop_span, load_call_span, load_model_span
from convergent.ui.sse import EventStreamResponse, FragmentStream, digest
from convergent.ui.timeline import CLIP, load_run_view
from convergent.ui.trace import draw, load_trace, running_clock
from convergent.ui.views import build_chart, environment
from convergent.ui.workflow import load_workflow_view

__all__ = ["Console", "console_of", "create_app"]

T = TypeVar("T")

PAGE_SIZE = 50
"""Runs per page."""
MAX_FORM_BYTES = 256 * 1024
"""Largest form body accepted."""
DEFAULT_PORT = 8765
"""The port ``convergent ui`` listens on unless told otherwise."""


@dataclass
class Console:
    """The state the routes share: the database, the templates, notices, the launcher.

    Args:
        store: The run database.
        state_file: The coordinator's state file, if one is shown.
        launcher: Starts resumed runs.
        base: The path every page lives under.
    """

    store: RunStore
    state_file: Path | None
    launcher: actions.Launcher
    base: str = ""
    env: Environment = field(default_factory=environment)
    notices: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Messages shown once after an action, by the key in the redirect."""
    changes: int = 0
    """Changes this server wrote itself (the database does not report its own)."""
    stopping: bool = False
    """Set when the server shuts down: the event streams end."""
    streams: set[FragmentStream] = field(default_factory=set)
    """The event streams open now (each leaves the set when its page goes away)."""
    reader: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="convergent-console")
    )
    """The one thread that reads the database for pages, streams and downloads.

    The memory SQLite takes for a long value goes back to the thread's own allocator
    arena; with one reading thread, a console holds at most one such arena, however
    many pages are open (with a pool, every thread would keep the largest it saw)."""

    def __post_init__(self) -> None:
        self.env.globals.update(
            base=self.base, readonly=self.readonly, run_url=self.run_url, span_url=self.span_url
        )

    async def read(self, work: Callable[..., T], *args: Any) -> T:
        """Run ``work(*args)`` in the reading thread (see `reader`)."""
        return await asyncio.get_running_loop().run_in_executor(
            self.reader, functools.partial(work, *args)
        )

    @property
    def readonly(self) -> bool:
        """Whether the database is open read-only (then every action is disabled)."""
        return self.store.readonly

    def run_url(self, run_id: str, suffix: str = "") -> str:
        """The address of a run's page (``suffix``: one of its actions or streams)."""
        return f"{self.base}/runs/{quote(run_id, safe='')}{suffix}"

    def span_url(self, run_id: str, kind: str, key: str | int = "") -> str:
        """The address of one span of a run (its panel's page).

        ``kind`` is ``model`` (``key``: the cycle), ``tool`` (``key``: the call's id) or
        ``after_stop``.
        """
        path = {"model": "cycle", "tool": "call", "after_stop": "after-stop"}[kind]
        tail = f"/{quote(str(key), safe='')}" if kind != "after_stop" else ""
        return self.run_url(run_id, f"/spans/{path}{tail}")

    def version(self) -> Hashable:
        """Moves whenever the database may have changed (cheap: one pragma)."""
        return (self.store.steering_version(), self.changes)

    def notice(self, text: str, tone: str = "good") -> str:
        """Keep a message for the next page and return its key."""
        while len(self.notices) > 100:
            self.notices.pop(next(iter(self.notices)))
        key = secrets.token_urlsafe(6)
        self.notices[key] = (tone, text)
        return key

    def render(self, name: str, **values: Any) -> str:
        """Render a template."""
        return self.env.get_template(name).render(**values)

    def page(self, request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        """A full page, with the notice the redirect named, if any."""
        notice = self.notices.pop(request.query_params.get("note", ""), None)
        html = self.render(name, notice=notice, has_state=self.state_file is not None, **values)
        return HTMLResponse(html, status_code=status)


def _live(fragments: dict[str, str]) -> dict[str, Markup]:
    """Fragments wrapped for a page: already escaped by their own templates."""
    return {key: Markup(html) for key, html in fragments.items()}


def _hashes(fragments: dict[str, str]) -> dict[str, str]:
    return {key: digest(html) for key, html in fragments.items()}


# -- runs page --------------------------------------------------------------------------


SEARCH_CHARACTERS = 200
"""Longest search text the runs page uses (the rest is ignored)."""


@dataclass(frozen=True, slots=True)
class RunsQuery:
    """What the runs page shows: a status, a search text, a tool, errors, and a page."""

    status: str | None
    """Only runs with this status (one of `STATUSES`), or all."""
    search: str
    """Only runs whose task or output, or a tool call's name, arguments or result,
    contains it (empty: all)."""
    page: int
    """The page (1-based)."""
    tool: str = ""
    """Only runs that called this tool (empty: all)."""
    errors: bool = False
    """Only runs with a failed call or an error stop."""
    parent: str = ""
    """Only the child runs of this run (then the other filters are not used)."""

    @property
    def filtered(self) -> bool:
        """Whether any filter is set (then child runs are listed among the others)."""
        return bool(self.status or self.search or self.tool or self.errors or self.parent)

    def link(self, console: Console, page: int | None, path: str = "/runs") -> str:
        """The address of ``path`` for this query on ``page``."""
        values = (
            ("status", self.status),
            ("q", self.search),
            ("tool", self.tool),
            ("errors", "1" if self.errors else None),
            ("parent", self.parent),
            ("page", page),
        )
        query = urlencode({k: v for k, v in values if v})
        return f"{console.base}{path}" + (f"?{query}" if query else "")


def _runs_query(request: Request) -> RunsQuery:
    status = request.query_params.get("status") or None
    if status is not None and status not in STATUSES:
        status = None
    try:
        page = max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        page = 1
    search = request.query_params.get("q", "").strip()[:SEARCH_CHARACTERS]
    tool = request.query_params.get("tool", "").strip()[:SEARCH_CHARACTERS]
    errors = request.query_params.get("errors", "") not in ("", "0")
    parent = request.query_params.get("parent", "").strip()[:SEARCH_CHARACTERS]
    return RunsQuery(status, search, page, tool, errors, parent)


CHILD_DEPTH = 5
"""Levels of child runs the runs page nests under a run (deeper ones: on their parent's page)."""
CHILDREN_NESTED = 5
"""Child runs the runs page nests under one run, at most (the others: a link to them all)."""
NESTED_ROWS = 10
"""Child runs, of any level, the runs page nests under one listed run, at most."""


@dataclass(frozen=True, slots=True)
class RunRow:
    """One row of the runs table: a run, and how deep it is nested under its parent."""

    run: RunSummary
    """The run."""
    depth: int = 0
    """0 for a run listed for itself; 1 for its child runs, 2 for theirs..."""
    more: int = 0
    """For the row that closes a run's nested children: how many more it has (``run``
    is then the parent)."""


def _with_children(store: RunStore, runs: list[RunSummary]) -> list[RunRow]:
    """Each run followed by some of its child runs, nested, and how many more it has.

    As ``convergent runs`` lists them, but a few to a run (`CHILDREN_NESTED`, and
    `NESTED_ROWS` in all under one listed run): a page stays small however many child
    runs a run started.
    """
    rows: list[RunRow] = []
    budget = 0

    def add(run: RunSummary, depth: int) -> None:
        nonlocal budget
        rows.append(RunRow(run, depth))
        if depth >= CHILD_DEPTH:
            return
        total = store.count_children(run.run_id)
        shown = store.children(run.run_id, clip=CLIP, limit=min(CHILDREN_NESTED, budget))
        budget -= len(shown)
        for child in shown:
            add(child, depth + 1)
        if total > len(shown):
            rows.append(RunRow(run, depth + 1, more=total - len(shown)))

    for run in runs:
        budget = NESTED_ROWS
        add(run, 0)
    return rows


def _runs_fragments(console: Console, query: RunsQuery) -> dict[str, str]:
    store = console.store
    filters: dict[str, Any] = {
        "search": query.search or None,
        "tool": query.tool or None,
        "errors": query.errors,
        "top_only": not query.filtered,
    }
    if query.parent:
        total = store.count_children(query.parent)
    else:
        total = store.count_runs(query.status, **filters)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    page = min(query.page, pages)
    offset = (page - 1) * PAGE_SIZE
    if query.parent:
        runs = store.children(query.parent, clip=CLIP, limit=PAGE_SIZE, offset=offset)
    else:
        runs = store.list_runs(PAGE_SIZE, offset=offset, status=query.status, clip=CLIP, **filters)
    rows = [RunRow(run) for run in runs] if query.filtered else _with_children(store, runs)
    table = console.render(
        "_runs_table.html",
        rows=rows,
        total=total,
        page=page,
        pages=pages,
        query=query,
        link=lambda p: query.link(console, p),
    )
    return {"runs-table": table}


async def runs_page(request: Request) -> Response:
    """Every stored run, newest first, filtered by status and search text, and paginated."""
    console: Console = request.app.state.console
    query = _runs_query(request)
    fragments = await console.read(_runs_fragments, console, query)
    return console.page(
        request,
        "runs.html",
        live=_live(fragments),
        hashes=_hashes(fragments),
        stream=query.link(console, query.page, "/runs/stream"),
        statuses=STATUSES,
        query=query,
        tools=await console.read(console.store.tool_names),
    )


async def runs_stream(request: Request) -> Response:
    """Live updates of the runs page."""
    console: Console = request.app.state.console
    query = _runs_query(request)
    return _stream(console, lambda: _runs_fragments(console, query))


# -- across runs ------------------------------------------------------------------------


async def overview_page(request: Request) -> Response:
    """Stop reasons, notes, cost and cycles across runs, by model, tool and day."""
    console: Console = request.app.state.console
    query = overview_query(dict(request.query_params))
    overview = await console.read(load_overview, console.store, query)
    return console.page(
        request,
        "overview.html",
        stream=None,
        overview=overview,
        query=query,
        windows=WINDOWS,
        reasons=REASONS,
        link=lambda **changes: _overview_link(console, query, changes),
    )


def _overview_link(console: Console, query: OverviewQuery, changes: dict[str, str]) -> str:
    """The overview's address with some filters changed."""
    values = {
        "since": query.since,
        "reason": query.reason,
        "model": query.model,
        "tool": query.tool,
        "scope": query.scope,
    }
    values.update(changes)
    return f"{console.base}/overview?" + urlencode({k: v for k, v in values.items() if v})


async def compare_page(request: Request) -> Response:
    """Two runs side by side: settings, cycles, where they diverged, cost."""
    console: Console = request.app.state.console
    first = request.query_params.getlist("run")
    left = request.query_params.get("a") or (first[0] if first else "")
    right = request.query_params.get("b") or (first[1] if len(first) > 1 else "")
    comparison = None
    if left and right:
        try:
            ids = (check_run_id(left.strip()), check_run_id(right.strip()))
            comparison = await console.read(compare_runs, console.store, *ids)
        except ConvergentError as exc:
            return _error(console, request, exc, 404)
    recent = await console.read(lambda: console.store.list_runs(30, clip=80, top_only=True))
    return console.page(
        request,
        "compare.html",
        stream=None,
        comparison=comparison,
        left=left,
        right=right,
        recent=recent,
    )


# -- run page ---------------------------------------------------------------------------


def _run_id(request: Request) -> str:
    """The run id of the address (one clear error for a malformed one).

    Raises:
        UserError: If it breaks the rule of `convergent._run_id`.
    """
    return check_run_id(request.path_params["run_id"])


def _upto(request: Request) -> int | None:
    raw = request.query_params.get("upto", "")
    return int(raw) if raw.isdigit() else None


CHILD_TASK_SHOWN = 200
"""Characters of a child run's task the run page shows."""
CHILDREN_SHOWN = 20
"""Child runs the run page lists (all of them: on the runs page, 50 to a page)."""


RUN_FRAGMENTS = ("summary", "controls", "questions", "chart", "timeline")
"""The live parts of a run page, by element id."""


def _run_fragments(console: Console, run_id: str, upto: int | None = None) -> dict[str, str]:
    store = console.store
    view = load_run_view(store, run_id, upto=upto)
    run = view.summary
    if run.running:
        show_live_text(view, read_live_text(store.path, run_id))
    clock = running_clock(store, run) if run.running else None
    working = _working(view, clock)
    shown_last = run.cycles - view.later
    trace = load_trace(
        store,
        run_id,
        view.hidden + 1,
        shown_last,
        working=working.cycle if working is not None else None,
    )
    values = {
        "view": view,
        "run": run,
        "why": explain_stop(run),
        "chart": build_chart(view.cycles),
        "trace": draw(trace) if trace is not None else None,
        "children": store.children(run_id, clip=CHILD_TASK_SHOWN, limit=CHILDREN_SHOWN),
        "children_total": store.count_children(run_id),
        "clock": clock,
        "working": working,
    }
    return {key: console.render(f"_run_{key}.html", **values) for key in RUN_FRAGMENTS}


@dataclass(frozen=True, slots=True)
class Working:
    """A running run's model request that has produced nothing yet."""

    cycle: int
    """The cycle whose request it is."""
    seconds: float
    """How long it has been working."""


def _working(view: Any, clock: Any) -> Working | None:
    """The model request in progress with no text yet, if the run is in one."""
    run = view.summary
    if clock is None or view.later or view.paused:
        return None
    if any(cycle.streaming for cycle in view.cycles):
        return None
    last = view.cycles[-1] if view.cycles else None
    if last is not None and any(call.outcome in ("running",) for call in last.calls):
        return None  # its tools are working, not the model
    return Working(run.cycles + 1, clock.request_seconds)


def _not_stored_yet(console: Console, run_id: str) -> dict[str, str]:
    """A run page's parts for a run not stored (yet): it fills in once the run is."""
    summary = console.render("_run_awaited.html", run_id=run_id)
    return {key: summary if key == "summary" else "" for key in RUN_FRAGMENTS}


async def run_page(request: Request) -> Response:
    """One run: its summary, stop reason, actions, chart and timeline.

    A run not stored yet (a page opened as the run starts) gets a page that waits for
    it: its stream fills the page in once the run is stored.
    """
    console: Console = request.app.state.console
    upto = _upto(request)
    try:
        run_id = _run_id(request)
    except UserError as exc:
        return _error(console, request, exc, 404)
    try:
        fragments = await console.read(_run_fragments, console, run_id, upto)
    except ConvergentError as exc:
        if await console.read(console.store.exists, run_id):
            return _error(console, request, exc, 404)
        fragments = _not_stored_yet(console, run_id)
    return console.page(
        request,
        "run.html",
        run_id=run_id,
        live=_live(fragments),
        hashes=_hashes(fragments),
        stream=console.run_url(run_id, "/stream" + (f"?upto={upto}" if upto is not None else "")),
    )


async def run_stream(request: Request) -> Response:
    """Live updates of a run page."""
    console: Console = request.app.state.console
    try:
        run_id = _run_id(request)
    except UserError:
        return Response(status_code=404)
    upto = _upto(request)
    path = console.store.path

    def version() -> Hashable:
        # the database, and the reply the running model is writing (not in the database)
        return (console.version(), live_version(path, run_id))

    return _stream(console, lambda: _run_fragments(console, run_id, upto), version=version)


async def request_page(request: Request) -> Response:
    """What one cycle's model request was sent: system prompt, messages and tools."""
    console: Console = request.app.state.console
    try:
        run_id = _run_id(request)
        cycle = _cycle(request.path_params["cycle"])
        sent = await console.read(load_request, console.store, run_id, cycle)
    except (ConvergentError, ValueError) as exc:
        return _error(console, request, exc, 404)
    return console.page(request, "request.html", sent=sent, stream=None)


async def span_page(request: Request) -> Response:
    """One model request, tool call or answer after the stop, in one place.

    With ``?panel=1`` only the panel's HTML, which the run page shows beside the timeline.
    """
    console: Console = request.app.state.console
    try:
        run_id = _run_id(request)
        what, key = request.path_params["kind"], request.path_params.get("key", "")
        if what == "cycle":
            span = await console.read(load_model_span, console.store, run_id, _cycle(key))
        elif what == "call":
            span = await console.read(load_call_span, console.store, run_id, key)
        elif what == "after-stop":
            span = await console.read(load_after_stop_span, console.store, run_id)
        else:
            raise ValueError(f"no such span: {what}")
    except (ConvergentError, ValueError) as exc:
        if request.query_params.get("panel"):
            return HTMLResponse(f'<p class="notice bad">{escape(str(exc))}</p>', status_code=404)
        return _error(console, request, exc, 404)
    # "run" names the run for the links to its download (as on the run page)
    if request.query_params.get("panel"):
        return HTMLResponse(console.render("_span.html", span=span, run=span))
    return console.page(request, "span.html", stream=None, span=span, run=span)


async def run_download(request: Request) -> Response:
    """The whole run as JSON (every value in full), sent a few rows at a time."""
    console: Console = request.app.state.console
    try:
        run_id = _run_id(request)
        chunks = await console.read(run_json, console.store, run_id)
    except ConvergentError as exc:
        return _error(console, request, exc, 404)

    async def sent() -> AsyncIterator[bytes]:
        while (chunk := await console.read(next, chunks, None)) is not None:
            yield chunk

    return StreamingResponse(
        sent(),
        media_type="application/json",
        headers={"content-disposition": f'attachment; filename="run-{run_id}.json"'},
    )


# -- actions ----------------------------------------------------------------------------


async def _form(request: Request) -> dict[str, str]:
    """The urlencoded form of a POST (first value of each field)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ValueError("form too large")
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {key: values[0] for key, values in fields.items()}


async def _act(request: Request, act: Callable[[str, dict[str, str]], str]) -> Response:
    """Run an action on the addressed run in a worker thread; redirect to its page.

    ``act`` gets the run id and the form, and returns the notice to show.
    """
    console: Console = request.app.state.console
    try:
        run_id = _run_id(request)
        if console.readonly:
            raise UserError(f"{console.store.path} is open read-only: nothing can be changed")
        form = await _form(request)
    except UserError as exc:
        return _error(console, request, exc, 400)
    except ValueError:
        return _error(console, request, ValueError("the form is too large"), 413)
    try:
        text = await anyio.to_thread.run_sync(act, run_id, form)
    except (ConvergentError, ValueError) as exc:
        return _error(console, request, exc, 400)
    finally:
        console.changes += 1
    key = console.notice(text)
    return RedirectResponse(console.run_url(run_id, f"?note={key}"), status_code=303)


async def steer_action(request: Request) -> Response:
    """Send new instructions to a run."""
    store = request.app.state.console.store
    return await _act(
        request, lambda run_id, form: actions.steer(store, run_id, form.get("message", ""))
    )


async def control_action(request: Request) -> Response:
    """Stop, pause or resume a running run."""
    store = request.app.state.console.store
    return await _act(
        request, lambda run_id, form: actions.control(store, run_id, form.get("action", ""))
    )


async def answer_action(request: Request) -> Response:
    """Answer the run's question (while it runs) or resume it with the answer."""
    console: Console = request.app.state.console

    def act(run_id: str, form: dict[str, str]) -> str:
        raw = form.get("question_id", "")
        question_id = int(raw) if raw.isdigit() else None
        return actions.answer(
            console.store, console.launcher, run_id, form.get("answer", ""), question_id
        )

    return await _act(request, act)


async def resume_action(request: Request) -> Response:
    """Resume a stopped or interrupted run, with an optional message."""
    console: Console = request.app.state.console
    return await _act(
        request,
        lambda run_id, form: actions.resume(
            console.store, console.launcher, run_id, form.get("message", "")
        ),
    )


def _cycle(value: str) -> int:
    if not value.isdigit():
        raise ValueError(f"not a cycle number: {value!r}")
    return int(value)


async def rewind_confirm(request: Request) -> Response:
    """Ask for confirmation before rewinding (a rewind discards later cycles)."""
    console: Console = request.app.state.console
    try:
        run_id = _run_id(request)
        cycle = _cycle(request.query_params.get("cycle", ""))
        run = await console.read(lambda: console.store.get_run(run_id, clip=CLIP))
        plan = await console.read(plan_rewind, console.store, run_id, cycle)
    except (ConvergentError, ValueError) as exc:
        return _error(console, request, exc, 400)
    return console.page(request, "rewind.html", run=run, cycle=cycle, plan=plan)


async def rewind_action(request: Request) -> Response:
    """Rewind a run to the end of a cycle (after the confirmation page)."""
    store = request.app.state.console.store
    return await _act(
        request,
        lambda run_id, form: actions.rewind(store, run_id, _cycle(form.get("cycle", ""))),
    )


# -- coordinator ------------------------------------------------------------------------


def _workflow_fragments(console: Console) -> dict[str, str]:
    assert console.state_file is not None
    view = load_workflow_view(console.state_file)
    return {"workflow": console.render("_workflow.html", view=view)}


def _state_version(console: Console) -> Hashable:
    assert console.state_file is not None
    try:
        stat = console.state_file.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


async def coordinator_page(request: Request) -> Response:
    """The workflow state file: atoms as a graph, checks, counters and the decision."""
    console: Console = request.app.state.console
    if console.state_file is None:
        return console.page(request, "coordinator.html", live=None, hashes={}, stream=None)
    fragments = await console.read(_workflow_fragments, console)
    return console.page(
        request,
        "coordinator.html",
        live=_live(fragments),
        hashes=_hashes(fragments),
        stream=f"{console.base}/coordinator/stream",
        path=str(console.state_file),
    )


async def coordinator_stream(request: Request) -> Response:
    """Live updates of the coordinator page (when the state file changes)."""
    console: Console = request.app.state.console
    if console.state_file is None:
        return Response(status_code=404)
    return _stream(
        console, lambda: _workflow_fragments(console), version=lambda: _state_version(console)
    )


# -- plumbing ---------------------------------------------------------------------------


def _stream(
    console: Console,
    render: Callable[[], dict[str, str]],
    version: Callable[[], Hashable] | None = None,
) -> EventStreamResponse:
    def safe_render() -> dict[str, str]:
        try:
            return render()
        except ConvergentError:
            # the run was deleted or the database is busy: keep what the page shows
            return {}

    stream = FragmentStream(
        version or console.version,
        safe_render,
        stopping=lambda: console.stopping,
        worker=console.read,
    )
    return EventStreamResponse(stream, console.streams)


def _error(console: Console, request: Request, exc: Exception, status: int) -> HTMLResponse:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    run_id = request.path_params.get("run_id")
    try:
        back = console.run_url(check_run_id(run_id)) if run_id else f"{console.base}/runs"
    except UserError:
        back = f"{console.base}/runs"
    return console.page(request, "error.html", status=status, message=message, back=back)


async def home(request: Request) -> Response:
    """The runs page is the start page."""
    console: Console = request.app.state.console
    return RedirectResponse(f"{console.base}/runs", status_code=303)


def create_app(
    store: RunStore,
    *,
    token: str,
    state_file: Path | str | None = None,
    address: Address | None = None,
    base: str | None = None,
) -> TokenGuard:
    """The console as an ASGI application, guarded by ``token`` (see `convergent.ui.auth`).

    Args:
        store: The run database (the caller closes it; opened read-only, the console
            only shows it).
        token: The secret every request must carry.
        state_file: A coordinator ``workflow-state.yaml`` to show, if any.
        address: Where it listens (the ``Host`` headers it answers); default
            127.0.0.1:8765.
        base: The path the pages live under (default: a fresh random one).
    """
    base = base if base is not None else new_base()
    console = Console(
        store=store,
        state_file=Path(state_file) if state_file is not None else None,
        launcher=actions.Launcher(store.path.resolve()),
        base=base,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            console.stopping = True
            console.reader.shutdown(wait=False)

    app = Starlette(
        routes=[
            Route("/", home),
            Route("/runs", runs_page),
            Route("/overview", overview_page),
            Route("/compare", compare_page),
            Route("/runs/stream", runs_stream),
            Route("/runs/{run_id}", run_page),
            Route("/runs/{run_id}/stream", run_stream),
            Route("/runs/{run_id}/download", run_download),
            Route("/runs/{run_id}/cycles/{cycle}/request", request_page),
            Route("/runs/{run_id}/spans/{kind}", span_page),
            Route("/runs/{run_id}/spans/{kind}/{key}", span_page),
            Route("/runs/{run_id}/steer", steer_action, methods=["POST"]),
            Route("/runs/{run_id}/control", control_action, methods=["POST"]),
            Route("/runs/{run_id}/answer", answer_action, methods=["POST"]),
            Route("/runs/{run_id}/resume", resume_action, methods=["POST"]),
            Route("/runs/{run_id}/rewind", rewind_confirm, methods=["GET"]),
            Route("/runs/{run_id}/rewind", rewind_action, methods=["POST"]),
            Route("/coordinator", coordinator_page),
            Route("/coordinator/stream", coordinator_stream),
            Mount("/static", StaticFiles(directory=Path(__file__).with_name("static"))),
        ],
        lifespan=lifespan,
    )
    app.state.console = console
    return TokenGuard(app, token, base=base, address=address or Address("127.0.0.1", DEFAULT_PORT))


def console_of(app: TokenGuard) -> Console:
    """The `Console` behind an application built by `create_app`."""
    inner: Any = app.app
    console: Console = inner.state.console
    return console
