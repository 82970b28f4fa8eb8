"""The typed event stream of a run.

Every observable step of a run is one frozen `Event`. The CLI's live view, trace
files, checkpoints and any user callback all read this one stream. Components that
add behaviour (checkpoints, the gate, compression) define their own `Event`
subclasses; `event_to_dict` serialises any of them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any, ClassVar

from pydantic import TypeAdapter

from convergent.clock import now
from convergent.messages import CallOutcome, ToolCall, ToolSpec, Usage
from convergent.stop import StopReason

__all__ = [
    "DELTAS",
    "AnsweredAfterStop",
    "CycleStarted",
    "Event",
    "EventHandler",
    "JsonlTraceWriter",
    "ModelResponded",
    "Nudged",
    "Redirected",
    "RunPaused",
    "RunStarted",
    "RunStopped",
    "RunUnpaused",
    "TextDelta",
    "ToolCallDelta",
    "ToolFinished",
    "ToolStarted",
    "Verified",
    "event_from_dict",
    "event_to_dict",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of all events."""

    type: ClassVar[str] = "event"
    run_id: str
    """Id of the run that emitted the event."""
    cycle: int
    """Cycle number (1-based; 0 before the first model request)."""
    time: float = field(default_factory=now)
    """Unix time at which the event was emitted (from the run's clock)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(Event):
    """A run began (or resumed)."""

    type: ClassVar[str] = "run_started"
    task: str
    """The task text."""
    model: str
    """Name of the model backend."""
    tools: tuple[str, ...]
    """Names of the tools offered to the model."""
    resumed: bool = False
    """Whether the run continues from a checkpoint."""
    elapsed: float = 0.0
    """Seconds the run had been running before this start (0 for a new run)."""
    tool_specs: tuple[ToolSpec, ...] = ()
    """The tools as the model is shown them: each one's ``name``, ``description`` and
    ``parameters`` (the JSON schema of its arguments). The agent's own specs, shared,
    not copied: a run's start costs the same however large the schemas are."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleStarted(Event):
    """A model request is about to be sent."""

    type: ClassVar[str] = "cycle_started"
    message_count: int
    """Messages in the conversation sent with the request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponded(Event):
    """The model replied."""

    type: ClassVar[str] = "model_responded"
    content: str
    """Text of the reply."""
    tool_calls: tuple[ToolCall, ...]
    """Tool calls requested (empty means the model is done)."""
    finish_reason: str | None
    """The provider's finish reason, verbatim."""
    usage: Usage
    """Usage of this request."""
    metadata: dict[str, Any]
    """Extra fields of the reply (``confidence``, ``action``...): recorded only."""
    duration: float
    """Seconds the request took."""
    first_delta: float | None = None
    """Seconds from the request to its first streamed delta; None when it was not
    streamed (nothing listened to the deltas)."""
    settings: dict[str, Any] | None = None
    """The model settings the request was sent with, those that were set (``temperature``,
    ``max_tokens`` as the budgets capped it, ``timeout``...; a schema as its size); None
    when not recorded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AnsweredAfterStop(Event):
    """The request made after a stop, with no tools, for the best answer so far.

    It is not a cycle: its answer becomes the run's output (``output_after_stop``).
    """

    type: ClassVar[str] = "answered_after_stop"
    prompt: str
    """What the model was asked, after the conversation."""
    message_count: int
    """Messages of the conversation sent before the prompt."""
    content: str
    """Text of the reply (empty when the request failed)."""
    finish_reason: str | None
    """The provider's finish reason, verbatim."""
    usage: Usage
    """Usage of this request."""
    duration: float
    """Seconds the request took."""
    settings: dict[str, Any] | None = None
    """The model settings it was sent with (as in `ModelResponded.settings`)."""
    error: str = ""
    """Why there is no answer (the request failed or ran out of time); empty otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(Event):
    """A piece of the model's text, while the reply streams (not kept, not journaled).

    The pieces of one cycle, joined, give the text of its `ModelResponded`. Text
    followed by tool calls is the model thinking aloud, not an answer.
    """

    type: ClassVar[str] = "text_delta"
    text: str
    """The new text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta(Event):
    """A piece of a tool call, while the reply streams (not kept, not journaled).

    The first piece of a call may come before its id and name are known; the pieces of
    one call, joined, give its arguments' JSON text.
    """

    type: ClassVar[str] = "tool_call_delta"
    index: int
    """Position of the call in the reply (0-based)."""
    call_id: str | None
    """The call's id, on the piece that first carries it."""
    name: str | None
    """The tool's name, on the piece that first carries it."""
    arguments: str
    """A piece of the arguments' JSON text."""


DELTAS = (TextDelta, ToolCallDelta)
"""The streaming events: many per cycle, delivered as they come, never kept."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(Event):
    """A tool call began executing."""

    type: ClassVar[str] = "tool_started"
    call_id: str
    """Id of the call."""
    name: str
    """Tool name."""
    arguments: dict[str, Any]
    """Arguments as the model sent them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished(Event):
    """A tool call ended: ``ok``, rejected as the model's mistake, or failed."""

    type: ClassVar[str] = "tool_finished"
    call_id: str
    """Id of the call."""
    name: str
    """Tool name."""
    ok: bool
    """Whether the call succeeded."""
    outcome: CallOutcome
    """``ok``, ``invalid`` (model mistake: unknown tool, bad arguments) or ``failed``."""
    result: str
    """Result text, or the error text."""
    duration: float
    """Seconds the call took."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Arguments as the model sent them (also for a call that never started in this
    process: one interrupted by a crash, reported when the run resumes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Redirected(Event):
    """New user instructions arrived mid-run (an interruption, not a stop)."""

    type: ClassVar[str] = "redirected"
    message: str
    """The new instructions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verified(Event):
    """The verifier judged an answer given without tool calls."""

    type: ClassVar[str] = "verified"
    passed: bool
    """Whether the external check passed (the run then completes)."""
    feedback: str
    """What failed, as sent back to the model; empty when it passed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Nudged(Event):
    """The model got a note instead of a stop: it repeats itself, or its budget runs low."""

    type: ClassVar[str] = "nudged"
    about: str
    """``stalled`` or ``tool_error`` (the note stands in for that stop, once), or
    ``budget`` (80 % of a budget is used)."""
    note: str
    """The note, as the model sees it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPaused(Event):
    """A pause took hold (``steer --pause``): the run waits before its next cycle."""

    type: ClassVar[str] = "run_paused"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunUnpaused(Event):
    """The pause ended (``steer --resume``, or a stop): the run goes on, or stops."""

    type: ClassVar[str] = "run_unpaused"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStopped(Event):
    """The run ended; exactly one per run."""

    type: ClassVar[str] = "run_stopped"
    reason: StopReason
    """Why it stopped."""
    detail: str
    """Human-readable detail for the reason."""
    output: str
    """Final text output."""
    rule: str = ""
    """The rule that gave the stop (`convergent.stop.Stop.rule`: a setting's name such
    as ``max_repeated_calls``, or the fact, such as ``answered``); "" in events written
    before runs named it."""
    usage: Usage
    """Total usage of the run."""
    output_after_stop: bool = False
    """The output is the model's answer to a last request with no tools, after the stop."""


EventHandler = Callable[[Event], None]
"""A callback that receives every event of a run, in order."""

_ADAPTERS: dict[type[Event], TypeAdapter[Any]] = {}


def _event_classes() -> dict[str, type[Event]]:
    """Every event class by its ``type``, found among the loaded subclasses of `Event`."""
    found: dict[str, type[Event]] = {}
    pending = list(Event.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        # dataclass(slots=True) replaces each class: keep the one its module exports
        if getattr(sys.modules.get(cls.__module__), cls.__name__, None) is cls:
            found[cls.type] = cls
    return found


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """Rebuild an event from `event_to_dict` output (its module must be imported).

    Raises:
        ValueError: For an unknown ``type``.
    """
    classes = _event_classes()
    cls = classes.get(str(data.get("type")))
    if cls is None:
        raise ValueError(f"unknown event type {data.get('type')!r}")
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    event: Event = adapter.validate_python({k: v for k, v in data.items() if k != "type"})
    return event


def event_to_dict(event: Event) -> dict[str, Any]:
    """Serialise any event to a JSON-compatible dict with its ``type`` first."""
    cls = type(event)
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    data: dict[str, Any] = adapter.dump_python(event, mode="json")
    return {"type": cls.type, **{f.name: data[f.name] for f in fields(event)}}


class JsonlTraceWriter:
    """An event handler that appends each event as one JSON line to a file.

    Args:
        path: The file (appended to).
        deltas: Write the streaming deltas too (`TextDelta`, `ToolCallDelta`); by
            default they are left out, as their text is in each `ModelResponded`.
    """

    def __init__(self, path: str | Path, *, deltas: bool = False) -> None:
        self.path = Path(path)
        self.deltas = deltas
        self._file: IO[str] = self.path.open("a", encoding="utf-8")

    def __call__(self, event: Event) -> None:
        """Write one event and flush, so a crash loses at most the current line."""
        if not self.deltas and isinstance(event, DELTAS):
            return
        self._file.write(json.dumps(event_to_dict(event), ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()
