"""The run page's timeline: the whole run on one time axis, as trace views draw it.

Every model request and every tool call of the cycles shown is one row, placed at the
time it happened since the run started; an agent called as a tool has its child run's
rows nested under that call, inside the call's span; a mark shows where a resumed run
went on. The axis counts the run's own running time (``elapsed``, summed over every
process that ran it), so the hours a run lay stopped between two processes take no
room, and the mark says where one process ended and the next began.

Where the times come from: a cycle's model request starts when the cycle starts (the
``elapsed`` its checkpoint records) and ends when the first of its calls starts, or,
for an answer, when the next cycle would start; a call ends at its ``finished_at`` and
lasts its ``duration``; a child run starts at its ``started_at``. Wall times become
running time through each process's start (the stored ``run_started`` events).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from convergent.durability.sqlite import RunStore, RunSummary
from convergent.ui.timeline import CALLS_PER_CYCLE

__all__ = ["Bar", "Clock", "Drawing", "Span", "Trace", "draw", "load_trace", "running_clock"]

CHILD_LEVELS = 2
"""Levels of child runs nested in a timeline (deeper ones: on their own page)."""
CHILD_CYCLES = 50
"""Cycles of a child run its parent's timeline shows (the rest: on the child's page)."""
CHILDREN_NESTED = 10
"""Child runs one timeline nests (the others' calls are drawn as calls: each child's
own page has its rows)."""
MAX_ROWS = 600
"""Rows one timeline draws at most (a page stays small however wide its cycles are)."""
ROW = 20
"""Height of a row, in SVG units."""
LABEL = 240
"""Width of the labels' column."""
INDENT = 14
"""How far a child run's labels are indented, per level."""
MIN_WIDTH = 2.0
"""The narrowest bar: a call of a millisecond is still drawn."""
ROOM = 20.0
"""Seconds the axis runs past now while a request goes on (the console draws a running
run's page again at least every 10 s)."""


@dataclass(frozen=True, slots=True)
class Span:
    """One row of the timeline: a model request, a tool call, or a child run's part."""

    kind: str
    """``model``, ``tool``, or ``after_stop`` (the request for an answer after the stop)."""
    label: str
    """``cycle N model`` or the tool's name."""
    start: float
    """Seconds of running time from the (top) run's start."""
    end: float
    """Where it ends (as ``start``)."""
    depth: int = 0
    """0 for the run itself, 1 for a child run's rows, 2 for a grandchild's."""
    run_id: str = ""
    """The run it belongs to (a child run's rows link to its page)."""
    open: bool = False
    """Still going on (a running run's current request): its end is now."""
    cycle: int = 0
    """The cycle it belongs to (of the run it belongs to)."""
    call_id: str = ""
    """A tool call's id."""

    @property
    def seconds(self) -> float:
        """How long it took (so far)."""
        return max(0.0, self.end - self.start)


@dataclass(slots=True)
class Trace:
    """The spans of a run's cycles shown, with the places a resumed run went on."""

    spans: list[Span] = field(default_factory=list)
    """Top to bottom."""
    resumes: list[tuple[float, int]] = field(default_factory=list)
    """Where a process took the run over: its running time and the cycle it went on from."""
    nest_left: int = CHILDREN_NESTED
    """Child runs that may still be nested (each one nested takes one)."""
    not_nested: int = 0
    """Child runs of the cycles shown drawn as their call only (past `CHILDREN_NESTED`)."""
    not_drawn: int = 0
    """Requests and calls left out past `MAX_ROWS`."""

    def add(self, span: Span) -> bool:
        """Add a row, unless the drawing has `MAX_ROWS` already; whether it was added."""
        if len(self.spans) >= MAX_ROWS:
            self.not_drawn += 1
            return False
        self.spans.append(span)
        return True


@dataclass(frozen=True, slots=True)
class _Process:
    """One process's part of a run: when it took the run, and the run's time then."""

    wall: float
    """Unix time it started or resumed the run."""
    elapsed: float
    """The run's running seconds at that moment."""
    cycle: int = 0
    """The cycle it went on from."""


def _processes(store: RunStore, run_id: str, started_at: float) -> list[_Process]:
    """The processes that ran ``run_id``, oldest first (from its ``run_started`` events).

    Each event says when its process started and how long the run had run before (a
    run stored before these events were: its start only).
    """
    found = [_Process(started_at, 0.0)]
    rows = store.query(
        "SELECT time, cycle, json_extract(data, '$.elapsed'), json_extract(data, '$.resumed') "
        "FROM events WHERE run_id = ? AND type = 'run_started' ORDER BY seq",
        [run_id],
    )
    for wall, cycle, elapsed, resumed in rows:
        if elapsed is None or wall < found[-1].wall:
            continue
        if resumed:
            found.append(_Process(wall, elapsed, cycle))
        else:
            found[0] = _Process(wall, 0.0)  # closer to the clock of its running time
    return found


def _running_time(processes: Sequence[_Process], wall: float) -> float:
    """The run's running time at the Unix time ``wall``."""
    process = processes[0]
    for later in processes[1:]:
        if later.wall > wall:
            break
        process = later
    return process.elapsed + max(0.0, wall - process.wall)


@dataclass(frozen=True, slots=True)
class Clock:
    """A running run's times now, for the page to count on from."""

    elapsed: float
    """The run's running seconds."""
    request_seconds: float
    """Seconds since its current model request started: since its latest call ended,
    or its process took the run, whichever came last."""


def running_clock(store: RunStore, run: RunSummary) -> Clock:
    """The times of a running run now (see `Clock`)."""
    processes = _processes(store, run.run_id, run.started_at)
    ((ended,),) = store.query(
        "SELECT max(finished_at) FROM finished_calls WHERE run_id = ?", [run.run_id]
    )
    now = time.time()
    since = max(ended or 0.0, processes[-1].wall)
    return Clock(_running_time(processes, now), max(0.0, now - since))


def load_trace(
    store: RunStore, run_id: str, first: int, last: int, *, working: int | None = None
) -> Trace | None:
    """The timeline of cycles ``first`` to ``last`` of a run; None if nothing was timed.

    Args:
        store: The run database.
        run_id: The run.
        first: The first cycle shown.
        last: The last cycle shown.
        working: The cycle whose model request is going on now (a running run's), drawn
            up to now.

    Raises:
        UserError: If no run has this id.
    """
    trace = Trace()
    run = store.get_run(run_id, clip=1)
    processes = _processes(store, run_id, run.started_at)
    trace.resumes = [(process.elapsed, process.cycle) for process in processes[1:]]
    ended = _add_cycles(store, trace, run_id, first, last, processes, origin=0.0, depth=0)
    if working is not None:
        now = _running_time(processes, time.time())
        start = max(ended or 0.0, processes[-1].elapsed)
        trace.add(
            Span("model", f"cycle {working} model", start, now, 0, run_id, True, cycle=working)
        )
    elif last >= run.cycles and not run.running:
        _add_after_stop(store, trace, run, processes, ended)
    return trace if trace.spans else None


def _add_after_stop(
    store: RunStore,
    trace: Trace,
    run: RunSummary,
    processes: Sequence[_Process],
    ended: float | None,
) -> None:
    """The request made after the run's stop, if it made one and recorded it."""
    rows = store.query(
        "SELECT time, cycle, json_extract(data, '$.duration') FROM events WHERE run_id = ? "
        "AND type = 'answered_after_stop' ORDER BY seq DESC LIMIT 1",
        [run.run_id],
    )
    if not rows or rows[0][1] != run.cycles:
        return  # none, or one of an earlier stop the run was resumed from
    wall, cycle, took = rows[0]
    end = max(_running_time(processes, wall), ended or 0.0)
    start = max(ended or 0.0, end - float(took or 0.0))
    label = "answer after the stop"
    trace.add(Span("after_stop", label, start, end, run_id=run.run_id, cycle=cycle))


def _add_cycles(
    store: RunStore,
    trace: Trace,
    run_id: str,
    first: int,
    last: int,
    processes: Sequence[_Process],
    *,
    origin: float,
    depth: int,
) -> float | None:
    """Add the spans of one run's cycles (a child run's at ``origin``, nested).

    Returns where the last of them ended (in the run's own running time), if known.
    """
    starts = dict(
        store.query(
            "SELECT cycle, elapsed FROM checkpoints WHERE run_id = ? AND cycle BETWEEN ? AND ?",
            [run_id, first - 1, last],
        )
    )
    calls: dict[int, list[tuple[str, str, float, float]]] = {}
    for cycle, call_id, name, finished, took in store.query(
        "SELECT cycle, call_id, name, finished_at, duration FROM finished_calls "
        "WHERE run_id = ? AND cycle BETWEEN ? AND ? ORDER BY cycle, position, finished_at",
        [run_id, first, last],
    ):
        done = _running_time(processes, finished)
        made = calls.setdefault(cycle, [])
        if len(made) >= CALLS_PER_CYCLE:
            trace.not_drawn += 1  # as the cycle's card shows them
            continue
        made.append((call_id, name, done - took, done))
    children: dict[str, str] = {}
    if depth < CHILD_LEVELS and calls:
        children = dict(
            store.query("SELECT parent_call_id, run_id FROM runs WHERE parent_run_id = ?", [run_id])
        )
    previous_end: float | None = None
    for cycle in range(first, last + 1):
        start = starts.get(cycle - 1, previous_end)
        if start is not None and previous_end is not None:
            start = max(start, previous_end)
        made = calls.get(cycle, [])
        if start is not None:
            # calls are placed by the wall clock, cycles by the run's own: the two may
            # differ by a few milliseconds, which must not put a call before its request
            made = [(i, n, max(begin, start), max(done, start)) for i, n, begin, done in made]
        end = min((begin for _, _, begin, _ in made), default=starts.get(cycle))
        if end is not None and start is not None:
            end = max(end, start)
        if start is not None and end is not None:
            label = f"cycle {cycle} model"
            trace.add(
                Span("model", label, origin + start, origin + end, depth, run_id, cycle=cycle)
            )
        for call_id, name, begin, finish in made:
            drawn = trace.add(
                Span(
                    "tool",
                    name,
                    origin + begin,
                    origin + finish,
                    depth,
                    run_id,
                    cycle=cycle,
                    call_id=call_id,
                )
            )
            child_id = children.get(call_id)
            if child_id is None or not drawn:
                continue
            if trace.nest_left <= 0:
                trace.not_nested += 1
                continue
            trace.nest_left -= 1
            child = store.get_run(child_id, clip=1, data=False)
            _add_cycles(
                store,
                trace,
                child.run_id,
                1,
                min(child.cycles, CHILD_CYCLES),
                _processes(store, child.run_id, child.started_at),
                origin=origin + _running_time(processes, child.started_at),
                depth=depth + 1,
            )
        previous_end = max([end or 0.0, *(finish for *_, finish in made)]) if made else end
    return previous_end


@dataclass(frozen=True, slots=True)
class Bar:
    """A span laid out: where its row and its bar are."""

    span: Span
    """What it shows."""
    y: float
    """Top of its row."""
    x: float
    """Where its bar starts."""
    width: float
    """The bar's length (at least `MIN_WIDTH`)."""

    @property
    def label_x(self) -> float:
        """Where its label starts (indented for a child run's rows)."""
        return 4 + INDENT * self.span.depth

    @property
    def tip(self) -> str:
        """The bar's tooltip: what it is, when and how long."""
        span = self.span
        where = f"{span.run_id}: " if span.depth else ""
        going = " so far" if span.open else ""
        return (
            f"{where}{span.label}: {_duration(span.seconds)}{going}, "
            f"from {span.start:.3f} s to {span.end:.3f} s"
        )

    @property
    def took(self) -> str:
        """Its duration, shortly (``1 ms``, ``2.40 s``)."""
        return _duration(self.span.seconds)


@dataclass(frozen=True, slots=True)
class Drawing:
    """A trace laid out for the page's SVG."""

    width: int
    """Width of the drawing."""
    height: int
    """Height of the drawing."""
    bars: list[Bar]
    """The rows, top to bottom."""
    total: float
    """Seconds the axis spans."""
    marks: list[tuple[float, str]]
    """Vertical marks: where (x) and what (``resumed at cycle N``)."""
    ticks: list[tuple[float, str]]
    """The axis's ticks: where (x) and the time."""
    top: int
    """Where the first row starts (room for the axis above)."""
    scale: float = 1.0
    """SVG units per second of the axis (a growing bar lengthens by this much a second)."""
    not_nested: int = 0
    """Child runs drawn as their call only (see `Trace.not_nested`)."""
    not_drawn: int = 0
    """Requests and calls left out (see `Trace.not_drawn`)."""

    @property
    def nested(self) -> bool:
        """Whether it shows a child run's rows."""
        return any(bar.span.depth for bar in self.bars)


def draw(trace: Trace, *, width: int = 900) -> Drawing:
    """Lay a trace out: one row per span, time scaled to the width left of the labels.

    While a request is going on, the axis runs `ROOM` past now, so that its bar can
    grow on the page (the page's script lengthens it) until the page is drawn again.
    """
    total = max((span.end for span in trace.spans), default=0.0) or 1.0
    if any(span.open for span in trace.spans):
        total += max(ROOM, total * 0.25)
    scale = (width - LABEL - 8) / total
    top = 18
    bars = [
        Bar(
            span,
            top + index * ROW,
            round(LABEL + span.start * scale, 2),
            round(max(MIN_WIDTH, span.seconds * scale), 2),
        )
        for index, span in enumerate(trace.spans)
    ]
    marks = [
        (round(LABEL + at * scale, 2), f"resumed at cycle {cycle}") for at, cycle in trace.resumes
    ]
    ticks = [(round(LABEL + total * i / 4 * scale, 2), _duration(total * i / 4)) for i in range(5)]
    height = top + len(bars) * ROW + 4
    return Drawing(
        width, height, bars, total, marks, ticks, top, scale, trace.not_nested, trace.not_drawn
    )


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m {rest:02d}s"
