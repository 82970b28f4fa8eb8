"""What the run page shows: a stored run read back as a timeline, cycle by cycle.

Everything comes from the run database: the tool calls from ``finished_calls`` (they
survive compaction and carry their cycle), the model's text from the current
conversation, usage and duration per cycle from the checkpoints, and gate decisions,
verdicts, steering and compaction from the stored events. A call requested but not
finished yet is shown as running.

Long values (a task, an output, a tool's result or arguments, the model's text) are
cut to `CLIP` characters by SQLite itself, so a run of many megabytes is never read
whole for a page; each view says how many characters it left out, and the run's JSON
download has them all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from convergent.durability.sqlite import PendingQuestion, RunStore, RunSummary
from convergent.durability.sqlite._codec import parse_usage
from convergent.messages import CallOutcome, Usage
from convergent.ui.cards import EventView, describe_event
from convergent.ui.questions import OpenQuestion, open_questions

__all__ = ["CallView", "CycleView", "EventView", "RunView", "load_run_view"]

CYCLES_SHOWN = 100
"""A run page shows this many cycles (the latest, or those up to the one asked for)."""
CALLS_SHOWN = 150
"""A run page shows fewer cycles when theirs have more calls than this, in all (but at
least one cycle)."""
CALLS_PER_CYCLE = 50
"""Calls of one cycle a run page shows (the others are counted; each has its span page)."""
CLIP = 2000
"""Characters of one long value a page shows (the rest is in the run's JSON download)."""
_ERRORS = frozenset({CallOutcome.FAILED, CallOutcome.INVALID, CallOutcome.INTERRUPTED})
NOT_CARDS = frozenset({"model_responded", "answered_after_stop"})
"""Stored events that are no card: a request's facts, shown in its span and the summary."""


@dataclass(slots=True)
class CallView:
    """One tool call of a cycle."""

    call_id: str
    """Id of the call."""
    name: str
    """Tool name."""
    arguments: str
    """Arguments, pretty-printed JSON (the raw start of the JSON text when cut)."""
    outcome: CallOutcome | Literal["running", "unfinished"]
    """How it ended; ``running`` while it runs, ``unfinished`` when its process ended
    before it did."""
    result: str = ""
    """Result or error text (at most `CLIP` characters)."""
    duration: float | None = None
    """Seconds it took, once finished."""
    arguments_cut: int = 0
    """Characters of the arguments' JSON text not shown."""
    result_cut: int = 0
    """Characters of the result not shown."""
    finished_at: float | None = None
    """Unix time it finished, once finished."""


@dataclass(slots=True)
class CycleView:
    """One model request and what followed from it."""

    number: int
    """The cycle (1-based)."""
    text: str = ""
    """What the model said (at most `CLIP` characters)."""
    text_cut: int = 0
    """Characters of the model's text not shown."""
    calls: list[CallView] = field(default_factory=list)
    """The calls it requested, in order."""
    events: list[EventView] = field(default_factory=list)
    """Stored events of the cycle."""
    tokens: int | None = None
    """Tokens of the cycle (input + output), once its checkpoint is stored."""
    seconds: float | None = None
    """Seconds the cycle took, once its checkpoint is stored."""
    streaming: str = ""
    """For a reply the running model is still writing: ``model``, or ``thinking`` when
    tool calls follow its text; empty once the reply is stored."""
    more_calls: int = 0
    """Calls of the cycle not shown, past `CALLS_PER_CYCLE`."""
    hidden: set[str] = field(default_factory=set)
    """Ids of the finished calls not shown."""

    @property
    def stalled(self) -> bool:
        """Whether a call of this cycle repeated without progress.

        It was refused as a repetition, or noted as one after it ran (a read).
        """
        return any(call.outcome == CallOutcome.NOT_EXECUTED for call in self.calls) or any(
            event.type == "nudged" and event.title.endswith("stalled") for event in self.events
        )

    @property
    def errors(self) -> int:
        """Calls of this cycle that failed or were the model's mistake."""
        return sum(call.outcome in _ERRORS for call in self.calls)


@dataclass(slots=True)
class RunView:
    """Everything the run page shows about one run."""

    summary: RunSummary
    """The stored summary (task, output and stop detail cut to `CLIP` characters)."""
    cut: dict[str, int]
    """Characters not shown of ``task``, ``output`` and ``stop_detail``."""
    cycles: list[CycleView]
    """The latest cycles, oldest first."""
    before: list[EventView]
    """Events before the first cycle (steering delivered at the start)."""
    hidden: int
    """Older cycles not shown."""
    later: int
    """Newer cycles not shown (when an earlier window was asked for)."""
    open_questions: list[OpenQuestion]
    """Questions the running run waits on in the console."""
    pending: list[PendingQuestion]
    """Questions the stopped run waits on (answer to resume)."""
    paused: bool
    """Whether the latest pause command is in force."""
    checkpoints: list[int]
    """Cycles a rewind can return to."""
    output_data: str = ""
    """The typed output (``RunSummary.output_data``) as indented JSON, at most `CLIP`
    characters; empty when the run has none."""
    after_stop: str = ""
    """The recorded request for an answer after the run's stop: ``answered``, ``failed``
    (then the output is the model's last text), or empty when none was recorded."""


def load_run_view(
    store: RunStore, run_id: str, *, upto: int | None = None, count: int = CYCLES_SHOWN
) -> RunView:
    """Read one run for the run page: its summary and ``count`` cycles up to ``upto``.

    Only the rows of the cycles shown are read, so the page of a run with many
    thousands of cycles costs about as much as the page of a short one.

    Raises:
        UserError: If no run has this id.
    """
    summary = store.get_run(run_id, clip=CLIP)
    ((task, output, detail),) = store.query(
        "SELECT length(task), length(output), length(stop_detail) FROM runs WHERE run_id = ?",
        [run_id],
    )
    data = _output_data(summary)
    cut = {
        "task": task - len(summary.task),
        "output": output - len(summary.output),
        "stop_detail": detail - len(summary.stop_detail),
        "output_data": max(0, len(data) - CLIP),
    }
    last = summary.cycles if upto is None else max(0, min(upto, summary.cycles))
    first = _first_shown(store, run_id, max(1, last - count + 1), last)
    cycles = {n: CycleView(n) for n in range(first, last + 1)}
    _add_calls(store, run_id, first, last, cycles)
    _add_messages(store, run_id, first, last, cycles, running=summary.running)
    checkpoints = _checkpoints(store, run_id, first - 1, last)
    _add_usage(checkpoints, cycles)
    before = _add_events(store, run_id, first, last, cycles)
    running = summary.running
    pending: list[PendingQuestion] = []
    if (
        not running
        and summary.stop_reason is not None
        and summary.stop_reason.value == "needs_user"
    ):
        pending = store.pending_questions(run_id)
    return RunView(
        summary=summary,
        cut=cut,
        cycles=[cycles[n] for n in sorted(cycles)],
        before=before,
        hidden=first - 1,
        later=summary.cycles - last,
        open_questions=open_questions(store, run_id) if running else [],
        pending=pending,
        paused=running and _paused(store, run_id),
        checkpoints=[cycle for cycle, _, _ in checkpoints],
        output_data=data[:CLIP],
        after_stop="" if running else _after_stop(store, run_id, summary.cycles),
    )


def _after_stop(store: RunStore, run_id: str, cycles: int) -> str:
    """Whether the stop's request for an answer was recorded, and how it went."""
    rows = store.query(
        "SELECT json_extract(data, '$.error') FROM events WHERE run_id = ? "
        "AND type = 'answered_after_stop' AND cycle = ? ORDER BY seq DESC LIMIT 1",
        [run_id, cycles],
    )
    if not rows:
        return ""
    return "failed" if rows[0][0] else "answered"


def _first_shown(store: RunStore, run_id: str, first: int, last: int) -> int:
    """The first cycle a page shows: ``first``, or a later one when there are many calls.

    The cycles shown make at most `CALLS_SHOWN` calls (counting `CALLS_PER_CYCLE` of a
    cycle at most), but the page keeps at least ``last``.
    """
    rows = store.query(
        "SELECT cycle, COUNT(*) FROM finished_calls WHERE run_id = ? AND cycle BETWEEN ? AND ? "
        "GROUP BY cycle ORDER BY cycle DESC",
        [run_id, first, last],
    )
    made = 0
    for cycle, calls in rows:
        made += min(calls, CALLS_PER_CYCLE)
        if made > CALLS_SHOWN and cycle < last:
            return int(cycle) + 1
    return first


def _output_data(summary: RunSummary) -> str:
    """The run's typed output as indented JSON, or empty when it has none."""
    if summary.output_data is None:
        return ""
    return json.dumps(summary.output_data, indent=2, ensure_ascii=False)


def _checkpoints(
    store: RunStore, run_id: str, first: int, last: int
) -> list[tuple[int, Usage, float]]:
    rows = store.query(
        "SELECT cycle, usage, elapsed FROM checkpoints WHERE run_id = ? AND cycle BETWEEN ? AND ? "
        "ORDER BY cycle",
        [run_id, first, last],
    )
    return [(cycle, parse_usage(usage), elapsed) for cycle, usage, elapsed in rows]


def _arguments(text: str | None, length: int | None) -> tuple[str, int]:
    """Arguments' JSON text as shown (pretty-printed when whole) and the characters cut."""
    if text is None or length is None:
        return "null", 0
    if length > len(text):
        return text, length - len(text)
    return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True), 0


def _add_calls(
    store: RunStore, run_id: str, first: int, last: int, cycles: dict[int, CycleView]
) -> None:
    rows = store.query(
        "SELECT cycle, call_id, name, substr(arguments, 1, ?1), length(arguments), outcome, "
        "substr(result, 1, ?1), length(result), duration, finished_at FROM finished_calls "
        "WHERE run_id = ?2 AND cycle BETWEEN ?3 AND ?4 ORDER BY cycle, position, finished_at",
        [CLIP, run_id, first, last],
    )
    for cycle, call_id, name, arguments, length, outcome, result, total, duration, at in rows:
        view = cycles.setdefault(cycle, CycleView(cycle))
        if len(view.calls) >= CALLS_PER_CYCLE:
            view.more_calls += 1
            view.hidden.add(call_id)
            continue
        shown, cut = _arguments(arguments, length)
        view.calls.append(
            CallView(
                call_id,
                name,
                shown,
                CallOutcome(outcome),
                result,
                duration,
                arguments_cut=cut,
                result_cut=total - len(result),
                finished_at=at,
            )
        )


def _add_messages(
    store: RunStore,
    run_id: str,
    first: int,
    last: int,
    cycles: dict[int, CycleView],
    *,
    running: bool,
) -> None:
    """Attach the model's text to its cycle, and the calls still running.

    A response with calls belongs to the cycle its finished calls name; a response
    without calls follows the cycle before it; the calls of the latest response that
    have no row yet are running (or were cut off by a crash). Only the messages between
    the checkpoints around the cycles shown are read.
    """
    ((epoch, count, total),) = store.query(
        "SELECT epoch, message_count, cycles FROM runs WHERE run_id = ?", [run_id]
    )

    def boundary(cycle: int, default: int) -> int:
        point = store.query(
            "SELECT epoch, message_count FROM checkpoints WHERE run_id = ? AND cycle = ?",
            [run_id, cycle],
        )
        # a checkpoint of an older epoch (before a compaction) says nothing about this one
        return int(point[0][1]) if point and point[0][0] == epoch else default

    start = boundary(first - 1, 0) if first > 1 else 0
    end = boundary(last, count) if last < total else count
    said = _assistant_messages(store, run_id, epoch, start, end)
    where = {call.call_id: n for n, view in cycles.items() for call in view.calls}
    numbers = _cycle_numbers([[c.call_id for c in m.calls] for m in said], where, last)
    for message, number in zip(said, numbers, strict=True):
        if number < first or number not in cycles:
            continue
        view = cycles[number]
        view.text, view.text_cut = message.text, message.text_cut
        known = {call.call_id for call in view.calls} | view.hidden
        for position, call in enumerate(message.calls):
            if call.call_id in known:
                continue
            if len(view.calls) >= CALLS_PER_CYCLE:
                view.more_calls += 1
                continue
            call.outcome = "running" if running else "unfinished"
            view.calls.insert(min(position, len(view.calls)), call)


@dataclass(slots=True)
class _Said:
    """An assistant message as the page needs it: its text and its calls, cut."""

    text: str
    """What the model said (cut to `CLIP`)."""
    text_cut: int
    """Characters not shown."""
    calls: list[CallView]
    """The calls it requested (``unfinished`` until a stored row says how they ended)."""


def _assistant_messages(
    store: RunStore, run_id: str, epoch: int, start: int, end: int
) -> list[_Said]:
    """The assistant messages among ``messages[start:end]``, long values cut by SQLite."""
    window = (
        "WHERE m.run_id = ?2 AND m.epoch = ?3 AND m.seq >= ?4 AND m.seq < ?5 "
        "AND json_extract(m.data, '$.role') = 'assistant' ORDER BY m.seq"
    )
    bounds = [CLIP, run_id, epoch, start, end]
    said: dict[int, _Said] = {}
    for seq, text, length in store.query(
        "SELECT m.seq, substr(json_extract(m.data, '$.content'), 1, ?1), "
        f"length(json_extract(m.data, '$.content')) FROM messages m {window}",
        bounds,
    ):
        shown = str(text or "")
        said[seq] = _Said(shown, (length or 0) - len(shown), [])
    calls = store.query(
        "SELECT m.seq, json_extract(c.value, '$.id'), json_extract(c.value, '$.name'), "
        "substr(json_extract(c.value, '$.arguments'), 1, ?1), "
        "length(json_extract(c.value, '$.arguments')) "
        f"FROM messages m, json_each(m.data, '$.tool_calls') c {window}, c.key",
        bounds,
    )
    for seq, call_id, name, arguments, length in calls:
        shown, cut = _arguments(arguments, length)
        said[seq].calls.append(CallView(call_id, name, shown, "unfinished", arguments_cut=cut))
    return list(said.values())


def _cycle_numbers(calls: Sequence[Sequence[str]], where: dict[str, int], last: int) -> list[int]:
    """The cycle of each assistant message, from the ids of the calls it requested.

    A message whose calls finished is placed by them; one after it is the next cycle;
    the ones before the first placed message (after a compaction) count back from it,
    and without any placed message the last one is the latest cycle.
    """
    numbers: list[int | None] = [next((where[i] for i in ids if i in where), None) for ids in calls]
    for i in range(1, len(numbers)):
        before = numbers[i - 1]
        if numbers[i] is None and before is not None:
            numbers[i] = before + 1
    anchor = next((i for i, n in enumerate(numbers) if n is not None), None)
    if anchor is None:
        return [last - len(numbers) + 1 + i for i in range(len(numbers))]
    base = numbers[anchor]
    assert base is not None
    return [base - anchor + i if n is None else n for i, n in enumerate(numbers)]


def _add_usage(checkpoints: Sequence[tuple[int, Any, float]], cycles: dict[int, CycleView]) -> None:
    before_tokens, before_seconds = 0, 0.0
    for cycle, usage, elapsed in checkpoints:
        if cycle in cycles:
            cycles[cycle].tokens = usage.total_tokens - before_tokens
            cycles[cycle].seconds = max(0.0, elapsed - before_seconds)
        before_tokens, before_seconds = usage.total_tokens, elapsed


def _add_events(
    store: RunStore, run_id: str, first: int, last: int, cycles: dict[int, CycleView]
) -> list[EventView]:
    before: list[EventView] = []
    rows = store.query(
        "SELECT data FROM events WHERE run_id = ? AND cycle BETWEEN ? AND ? "
        "AND type NOT IN (SELECT value FROM json_each(?)) ORDER BY seq",
        [run_id, 0 if first == 1 else first, last, json.dumps(sorted(NOT_CARDS))],
    )
    for (text,) in rows:
        data = json.loads(text)
        cycle = int(data.get("cycle", 0))
        view = describe_event(data)
        if len(view.detail) > CLIP:
            more = len(view.detail) - CLIP
            view = replace(view, detail=f"{view.detail[:CLIP]}… ({more:,} more characters)")
        if cycle in cycles:
            cycles[cycle].events.append(view)
        elif cycle < 1:
            before.append(view)
    return before


def _paused(store: RunStore, run_id: str) -> bool:
    rows = store.query(
        "SELECT kind FROM steering WHERE run_id = ? AND kind IN ('pause', 'resume') "
        "ORDER BY id DESC LIMIT 1",
        [run_id],
    )
    return bool(rows) and rows[0][0] == "pause"
