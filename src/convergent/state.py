"""The serialisable state of a run: enough to checkpoint it and to continue it later."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from convergent._frozen import blank, slot_setters
from convergent.digest import text_digest
from convergent.exceptions import UserError
from convergent.messages import (
    NO_USAGE,
    AssistantMessage,
    CallOutcome,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    tool_result_message,
)
from convergent.stop import StopReason

__all__ = ["STATE_SCHEMA_VERSION", "BudgetState", "MonitorState", "RunState", "ToolCallRecord"]

STATE_SCHEMA_VERSION = 8
"""Bumped whenever the serialised shape of `RunState` changes."""


@dataclass(slots=True, kw_only=True)
class BudgetState:
    """What a run's budget keeps between decisions; serialisable, inside `MonitorState`."""

    noted: bool = False
    """The model was told what is left of its budgets (once per run)."""
    child_cycles: int = 0
    """Cycles run by child agents this run called as tools; they count against
    ``max_cycles`` beside the run's own."""
    tool_calls: int = 0
    """Tool calls admitted so far."""
    calls_by_tool: dict[str, int] = field(default_factory=dict)
    """Tool calls admitted so far, by tool (only for tools with a cap)."""
    model_seconds: float = 0.0
    """Seconds spent in model requests (time outside them is the tools' and waits')."""
    longest_request: float = 0.0
    """Seconds of the longest model request (time kept for the answer after a stop)."""
    longest_reply: int = 0
    """Output tokens of the longest reply so far (room kept for the answer after a stop)."""


@dataclass(slots=True, kw_only=True)
class MonitorState:
    """What a run's counters remember between decisions; serialisable, kept in `RunState`."""

    stretch: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Calls seen since the last change, least recently seen first: the call's digest
    (`call_digest`) -> (the meaning of its last result, as in ``results``; how many times
    in a row it gave it)."""
    results: dict[int, tuple[int, int]] = field(default_factory=dict)
    """The last result of each recent call, least recently seen first: the call's digest
    -> (the digest of its text; its meaning, the digest of the first of the results in a
    row that meant the same)."""
    started: dict[int, float] = field(default_factory=dict)
    """When each recent call last started, in seconds outside model requests (kept
    across changes: time passes whatever changed)."""
    recent: list[int] = field(default_factory=list)
    """The last calls, oldest first, each as one number: the call's digest times 2**64
    plus its result's meaning, as in ``results`` (cycles, and what is new)."""
    since_break: int = 0
    """Calls since the last one a cycle may not span (declared state-changing, or made
    after real time passed)."""
    notes_given: int = 0
    """Stall notes given in the current episode."""
    watched: list[int] = field(default_factory=list)
    """Digests of the calls of the pattern a note was given for in this episode."""
    failing_steps: int = 0
    """Failing steps in a row."""
    repeated_failures: int = 0
    """The most times one call failed in this streak of failing steps."""
    failed_calls: list[int] = field(default_factory=list)
    """Digests of the calls that failed in this streak, once per failing step each
    failed in (the latest `_KEYS_KEPT`)."""
    failure_notes: int = 0
    """Notes given for the failure streaks."""
    mistakes: int = 0
    """Steps in a row whose every call was the model's mistake."""
    mistake_notes: int = 0
    """Notes given for the mistake streak."""
    rejections: int = 0
    """Answers in a row rejected by the verifier or the output type."""
    rejection_notes: int = 0
    """Notes given for the rejected-answer streak."""
    continuations: int = 0
    """Replies in a row that were not an answer (empty, cut, refused)."""
    partial: str = ""
    """The text of the replies cut at the token limit so far, to be continued."""
    messages: list[int] = field(default_factory=list)
    """Digests of the user's messages (the task, steering), to tell a repeated one."""
    budget: BudgetState = field(default_factory=BudgetState)
    """What the run's budgets keep between decisions (`convergent.loop.budget.Budget`)."""
    ended: dict[int, float] = field(default_factory=dict)
    """When each recent call last ended, in seconds outside model requests (the wait
    before the same call again)."""
    stretch_notes: int = 0
    """Notes given, by any rule, since a call last succeeded with something new."""
    mistaken_calls: list[int] = field(default_factory=list)
    """Digests of the mistaken calls of this streak of mistakes, once per step each was
    made in (the latest `_KEYS_KEPT`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    """One executed tool call, as reported in a run's result."""

    cycle: int
    """Cycle in which the model requested the call."""
    id: str
    """Call id."""
    name: str
    """Tool name."""
    arguments: dict[str, Any]
    """Arguments as the model sent them."""
    ok: bool
    """Whether the call succeeded."""
    outcome: CallOutcome
    """How it ended: ``ok``, ``invalid`` (the model's mistake), ``failed`` (the tool's),
    ``needs_user`` or ``interrupted`` (its process died mid-call and the tool is not safe
    to re-run)."""
    result: str
    """Result text, or error text."""
    duration: float
    """Seconds the call took."""
    fatal: bool = False
    """The failure was one the tool declared unrecoverable (the run stopped at once)."""

    def to_message(self) -> ToolResultMessage:
        """The observation this call gives the model."""
        return tool_result_message(self.id, self.name, self.result, not self.ok)


_OK = CallOutcome.OK
(
    _SET_CYCLE,
    _SET_ID,
    _SET_NAME,
    _SET_ARGUMENTS,
    _SET_OK,
    _SET_OUTCOME,
    _SET_RESULT,
    _SET_DURATION,
    _SET_FATAL,
) = slot_setters(
    ToolCallRecord,
    ("cycle", "id", "name", "arguments", "ok", "outcome", "result", "duration", "fatal"),
)


def new_record(
    call: ToolCall,
    outcome: CallOutcome,
    text: str,
    cycle: int,
    duration: float = 0.0,
    fatal: bool = False,
) -> ToolCallRecord:
    """The record of one call that ended with ``outcome`` and ``text``.

    It is made at the cost of a plain object, not through the frozen dataclass's
    ``__init__``: the loop makes one per call.
    """
    record = blank(ToolCallRecord)
    _SET_CYCLE(record, cycle)
    _SET_ID(record, call.id)
    _SET_NAME(record, call.name)
    _SET_ARGUMENTS(record, call.arguments)
    _SET_OK(record, outcome == _OK)
    _SET_OUTCOME(record, outcome)
    _SET_RESULT(record, text)
    _SET_DURATION(record, duration)
    _SET_FATAL(record, fatal)
    return record


@dataclass(slots=True, kw_only=True)
class RunState:
    """Everything needed to continue a run; mutated by the loop as the run goes on."""

    run_id: str
    """Unique id of the run."""
    task: str
    """The original task."""
    model: str = ""
    """Name of the model backend that ran it."""
    messages: list[Message] = field(default_factory=list)
    """The conversation, oldest first (may be compacted)."""
    cycles: int = 0
    """Model requests made so far."""
    usage: Usage = NO_USAGE
    """Total usage so far."""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    """Executed tool calls so far."""
    monitor: MonitorState = field(default_factory=MonitorState)
    """The counters behind the stop facts: repeats, streaks, notes, and the budget's."""
    elapsed: float = 0.0
    """Wall-clock seconds spent running, summed over every process that ran it."""
    started_at: float = 0.0
    """Unix time at which the run first started."""
    stop_reason: StopReason | None = None
    """Why the run stopped, once it has."""
    stop_detail: str = ""
    """Human-readable detail of the stop."""
    stop_rule: str = ""
    """The rule that gave the stop (`convergent.stop.Stop.rule`); "" before the stop, and
    in states written before version 7."""
    output: str = ""
    """Final text output, once stopped."""
    output_after_stop: bool = False
    """The output is the answer the model gave after the stop, in a request with no tools."""
    output_json: Any = None
    """The output as plain JSON data, validated against the run's output type (a
    ``completed`` run of an agent with ``output_type`` or ``output_schema``); else None.
    `RunResult.output_data` holds it as a value of that type."""
    schema_version: int = STATE_SCHEMA_VERSION
    """Version of this serialised shape."""

    def pending_calls(self) -> list[ToolCall]:
        """Calls of the last assistant message that have no result yet (interrupted work)."""
        answered: set[str] = set()
        for message in reversed(self.messages):
            if isinstance(message, ToolResultMessage):
                answered.add(message.tool_call_id)
            elif isinstance(message, AssistantMessage):
                return [call for call in message.tool_calls if call.id not in answered]
            else:
                return []
        return []

    def to_jsonable(self) -> dict[str, Any]:
        """Plain JSON-compatible dict of the whole state."""
        data: dict[str, Any] = _state_adapter().dump_python(self, mode="json")
        return data

    @classmethod
    def from_jsonable(cls, data: Any) -> RunState:
        """Rebuild a state from `to_jsonable` output, upgrading older schema versions.

        Version 1 lacked each record's ``fatal`` (it starts False). Versions 1 and 2 kept
        per-run repeat counts and a streak of failed calls instead of the ``monitor``:
        such a state continues with fresh counters. Versions before 4 lacked
        the output's JSON data (None); versions 4 and 5 named it ``output_data``.
        Versions before 7 lacked the stop's rule (``stop_rule``: "").
        Version 4 counted repeats by exact results: its repeat and streak counters start
        afresh, its budget note and child cycles stay. Versions 5 to 7 knew each call in
        the counters by its canonical key: the counters go on under its digest.
        Older states also held the replay positions of scripted
        models (``model_positions``), which the run store now keeps beside the state
        (`RunStore.model_positions`): here they are ignored.

        Raises:
            UserError: If the state was written by a newer version, or is malformed.
        """
        version = data.get("schema_version", 1) if isinstance(data, dict) else None
        if isinstance(version, int) and version > STATE_SCHEMA_VERSION:
            raise UserError(
                f"this run state has schema version {version}; this convergent reads up to "
                f"{STATE_SCHEMA_VERSION} (upgrade convergent)"
            )
        if isinstance(data, dict):
            old = isinstance(version, int) and version < 3
            dropped = ("call_counts", "tool_error_streak") if old else ()
            data = {k: v for k, v in data.items() if k not in (*dropped, "model_positions")}
            monitor = data.get("monitor")
            if isinstance(version, int) and isinstance(monitor, dict):
                if version < 5:
                    data["monitor"] = upgraded_monitor(monitor)
                elif version < 8:
                    data["monitor"] = digested_keys(monitor)
            if isinstance(version, int) and version < 6 and "output_data" in data:
                data["output_json"] = data.pop("output_data")
        try:
            state: RunState = _state_adapter().validate_python(data)
        except ValidationError as exc:
            raise UserError(f"malformed run state: {exc.errors()[0]['msg']}") from None
        state.schema_version = STATE_SCHEMA_VERSION
        return state


def upgraded_monitor(old: dict[str, Any]) -> dict[str, Any]:
    """A version-4 monitor as this version's: fresh counters, the budget's kept."""
    return {
        "budget": {
            "noted": bool(old.get("budget_noted", False)),
            "child_cycles": int(old.get("child_cycles", 0) or 0),
        }
    }


_KEYED = ("stretch", "results", "started", "ended")
"""The monitor's maps keyed by a call (by its digest since version 8)."""
_KEY_LISTS = ("failed_calls", "mistaken_calls")
"""The monitor's lists of calls (by their digests since version 8)."""


def digested_keys(monitor: dict[str, Any]) -> dict[str, Any]:
    """A stored monitor of run state versions 5 to 7, its calls known by digest.

    Those versions kept each call's canonical key; the digest is computed from it, so
    the counters go on as they were.
    """
    upgraded = dict(monitor)
    for name in _KEYED:
        entries = monitor.get(name)
        if isinstance(entries, dict):
            upgraded[name] = {_old_key(key): value for key, value in entries.items()}
    for name in _KEY_LISTS:
        keys = monitor.get(name)
        if isinstance(keys, list):
            upgraded[name] = [_old_key(key) for key in keys]
    return upgraded


def _old_key(key: object) -> object:
    return text_digest(key) if isinstance(key, str) else key


@functools.cache
def _state_adapter() -> TypeAdapter[RunState]:
    """The run state's pydantic adapter, built on first use.

    Building its schema takes about 10 ms, which importing convergent should not cost a
    run that is never stored or loaded.
    """
    return TypeAdapter(RunState)
