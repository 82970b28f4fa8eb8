"""What the run page shows: a stored run read back as a timeline, cycle by cycle.

Everything comes from the run database: the tool calls from ``finished_calls`` (they
survive compaction and carry their cycle), the model's text from the current
conversation, usage and duration per cycle from the checkpoints, and gate decisions,
verdicts, steering and compaction from the stored events. A call requested but not
finished yet is shown as running.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from convergent.messages import Usage
from convergent.store import PendingQuestion, RunStore, RunSummary
from convergent.store._codec import parse_usage
from convergent.ui.questions import OpenQuestion, open_questions

__all__ = ["CallView", "CycleView", "EventView", "RunView", "load_run_view"]

CYCLES_SHOWN = 100
"""A run page shows this many cycles (the latest, or those up to the one asked for)."""


@dataclass(slots=True)
class CallView:
    """One tool call of a cycle."""

    call_id: str
    """Id of the call."""
    name: str
    """Tool name."""
    arguments: str
    """Arguments, pretty-printed JSON."""
    outcome: str
    """``ok``, ``invalid``, ``failed``, ``needs_user``, ``not_executed``, ``interrupted``;
    ``running`` while it runs, ``unfinished`` when its process ended before it did."""
    result: str = ""
    """Result or error text."""
    duration: float | None = None
    """Seconds it took, once finished."""


@dataclass(frozen=True, slots=True)
class EventView:
    """A stored event (gate decision, verdict, steering, compaction, answer)."""

    type: str
    """The event's type (``gate_decided``, ``verified``...)."""
    title: str
    """A short label."""
    detail: str
    """What happened, in words."""
    tone: str = "info"
    """``info``, ``good`` or ``bad``: how the page colours it."""


@dataclass(slots=True)
class CycleView:
    """One model request and what followed from it."""

    number: int
    """The cycle (1-based)."""
    text: str = ""
    """What the model said."""
    calls: list[CallView] = field(default_factory=list)
    """The calls it requested, in order."""
    events: list[EventView] = field(default_factory=list)
    """Stored events of the cycle."""
    tokens: int | None = None
    """Tokens of the cycle (input + output), once its checkpoint is stored."""
    seconds: float | None = None
    """Seconds the cycle took, once its checkpoint is stored."""

    @property
    def stalled(self) -> bool:
        """Whether a call of this cycle was refused as a repetition (the run stalled)."""
        return any(call.outcome == "not_executed" for call in self.calls)

    @property
    def errors(self) -> int:
        """Calls of this cycle that failed or were the model's mistake."""
        return sum(call.outcome in ("failed", "invalid", "interrupted") for call in self.calls)


@dataclass(slots=True)
class RunView:
    """Everything the run page shows about one run."""

    summary: RunSummary
    """The stored summary."""
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


def load_run_view(
    store: RunStore, run_id: str, *, upto: int | None = None, count: int = CYCLES_SHOWN
) -> RunView:
    """Read one run for the run page: its summary and ``count`` cycles up to ``upto``.

    Only the rows of the cycles shown are read, so the page of a run with many
    thousands of cycles costs about as much as the page of a short one.

    Raises:
        UserError: If no run has this id.
    """
    summary = store.get_run(run_id)
    last = summary.cycles if upto is None else max(0, min(upto, summary.cycles))
    first = max(1, last - count + 1)
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
        cycles=[cycles[n] for n in sorted(cycles)],
        before=before,
        hidden=first - 1,
        later=summary.cycles - last,
        open_questions=open_questions(store, run_id) if running else [],
        pending=pending,
        paused=running and _paused(store, run_id),
        checkpoints=[cycle for cycle, _, _ in checkpoints],
    )


def _checkpoints(
    store: RunStore, run_id: str, first: int, last: int
) -> list[tuple[int, Usage, float]]:
    rows = store.query(
        "SELECT cycle, usage, elapsed FROM checkpoints WHERE run_id = ? AND cycle BETWEEN ? AND ? "
        "ORDER BY cycle",
        [run_id, first, last],
    )
    return [(cycle, parse_usage(usage), elapsed) for cycle, usage, elapsed in rows]


def _pretty(arguments: Any) -> str:
    return json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True)


def _add_calls(
    store: RunStore, run_id: str, first: int, last: int, cycles: dict[int, CycleView]
) -> None:
    rows = store.query(
        "SELECT cycle, call_id, name, arguments, outcome, result, duration FROM finished_calls "
        "WHERE run_id = ? AND cycle BETWEEN ? AND ? ORDER BY cycle, position, finished_at",
        [run_id, first, last],
    )
    for cycle, call_id, name, arguments, outcome, result, duration in rows:
        view = cycles.setdefault(cycle, CycleView(cycle))
        view.calls.append(
            CallView(call_id, name, _pretty(json.loads(arguments)), outcome, result, duration)
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
    rows = store.query(
        "SELECT data FROM messages WHERE run_id = ? AND epoch = ? AND seq >= ? AND seq < ? "
        "ORDER BY seq",
        [run_id, epoch, start, end],
    )
    where = {call.call_id: n for n, view in cycles.items() for call in view.calls}
    assistant: list[dict[str, Any]] = []
    for (data,) in rows:
        message = json.loads(data)
        if message.get("role") == "assistant":
            assistant.append(message)
    numbers = _cycle_numbers(assistant, where, last)
    for message, number in zip(assistant, numbers, strict=True):
        if number < first or number not in cycles:
            continue
        view = cycles[number]
        view.text = str(message.get("content") or "")
        known = {call.call_id for call in view.calls}
        for position, call in enumerate(message.get("tool_calls") or []):
            if call["id"] not in known:
                view.calls.insert(
                    min(position, len(view.calls)),
                    CallView(
                        call["id"],
                        call["name"],
                        _pretty(call.get("arguments")),
                        "running" if running else "unfinished",
                    ),
                )


def _cycle_numbers(
    assistant: Sequence[dict[str, Any]], where: dict[str, int], last: int
) -> list[int]:
    """The cycle of each assistant message.

    A message whose calls finished is placed by them; one after it is the next cycle;
    the ones before the first placed message (after a compaction) count back from it,
    and without any placed message the last one is the latest cycle.
    """
    numbers: list[int | None] = []
    for message in assistant:
        ids = [call["id"] for call in message.get("tool_calls") or []]
        numbers.append(next((where[i] for i in ids if i in where), None))
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
        "SELECT data FROM events WHERE run_id = ? AND cycle BETWEEN ? AND ? ORDER BY seq",
        [run_id, 0 if first == 1 else first, last],
    )
    for (text,) in rows:
        data = json.loads(text)
        cycle = int(data.get("cycle", 0))
        view = describe_event(data)
        if cycle in cycles:
            cycles[cycle].events.append(view)
        elif cycle < 1:
            before.append(view)
    return before


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "n/a"


def describe_event(data: dict[str, Any]) -> EventView:
    """A stored event as a title, a sentence and a tone."""
    kind = str(data.get("type", "event"))
    match kind:
        case "gate_decided":
            asked = data.get("decision") == "asked"
            detail = (
                f"{data.get('decision')} ({data.get('trigger')}): score {_score(data.get('score'))}"
                f" against threshold {_score(data.get('threshold'))}; clarity "
                f"{_score(data.get('clarity'))}, certainty {_score(data.get('certainty'))}"
            )
            if data.get("reason"):
                detail += f". {data['reason']}"
            if data.get("question"):
                detail += f" Asked: {data['question']}"
            return EventView(kind, "gate", detail, "bad" if asked else "good")
        case "verified":
            passed = bool(data.get("passed"))
            detail = "passed" if passed else f"failed: {data.get('feedback', '')}"
            return EventView(kind, "verifier", detail, "good" if passed else "bad")
        case "redirected":
            return EventView(kind, "steering", f"message delivered: {data.get('message', '')}")
        case "context_compacted":
            detail = (
                f"{data.get('method')}: {data.get('messages_before')} -> "
                f"{data.get('messages_after')} messages, {data.get('tokens_before')} -> "
                f"{data.get('tokens_after')} tokens (window {data.get('window')})"
            )
            if data.get("error"):
                detail += f"; summary failed: {data['error']}"
            return EventView(kind, "compaction", detail)
        case "user_answered":
            status = data.get("status")
            answer = data.get("answer")
            detail = f"{data.get('question', '')} -> " + (
                f"{answer}" if answer is not None else f"({status})"
            )
            tone = "good" if status == "answered" else "bad"
            return EventView(kind, f"asked via {data.get('channel', '?')}", detail, tone)
        case _:
            rest = {k: v for k, v in data.items() if k not in ("type", "run_id", "cycle", "time")}
            return EventView(kind, kind.replace("_", " "), json.dumps(rest, ensure_ascii=False))


def _paused(store: RunStore, run_id: str) -> bool:
    rows = store.query(
        "SELECT kind FROM steering WHERE run_id = ? AND kind IN ('pause', 'resume') "
        "ORDER BY id DESC LIMIT 1",
        [run_id],
    )
    return bool(rows) and rows[0][0] == "pause"
