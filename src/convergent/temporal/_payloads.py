"""What workflows and activities pass each other, as JSON-compatible dataclasses.

Messages, responses and states travel as the same JSON the run store keeps, so that a
history recorded by one version of the worker reads back the same way. One item that
enters a run (a task, a steering message, an answer, a tool result, a model reply) may
be at most `ITEM_LIMIT` bytes. The agent spec travels in fields named ``recipe``, the
spec's first name, which the histories of runs in flight hold (as does a run workflow's
result).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from convergent.messages import Message, ModelResponse, ToolCall, ToolSpec
from convergent.models.base import ModelSettings

__all__ = [
    "ITEM_LIMIT",
    "TASK_PREVIEW",
    "TOO_LARGE",
    "USER_ERROR",
    "Blueprint",
    "DescribeRun",
    "ModelAnswer",
    "ModelCall",
    "RunStart",
    "ToolBlueprint",
    "ToolRun",
    "dump_messages",
    "dump_response",
    "item_too_large",
    "load_messages",
    "load_response",
]

TASK_PREVIEW = 200
"""Characters of a run's task its workflow's memo keeps, for ``runs --temporal``."""

ITEM_LIMIT = 2 * 1024 * 1024
"""Bytes one item of a run may have: Temporal's default limit on one payload (2 MB).

The conversation as a whole has no limit (it lives in the payload store); one item
over this size is almost always a mistake (it is more text than any model reads).
"""


USER_ERROR = "UserError"
"""Error type of an activity or run that failed on a caller's mistake (never retried)."""

TOO_LARGE = "ItemTooLarge"
"""Error type of a model reply over the limit on one item (never retried)."""


def item_too_large(what: str, text: str) -> str | None:
    """Why ``text`` cannot enter a run, naming the limit; None if it can."""
    size = len(text.encode())
    if size <= ITEM_LIMIT:
        return None
    return (
        f"{what} is {size / 1024 / 1024:.1f} MB, over the {ITEM_LIMIT // 1024 // 1024} MB "
        "limit on one item of a Temporal run"
    )


_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_SPECS: TypeAdapter[list[ToolSpec]] = TypeAdapter(list[ToolSpec])
_SETTINGS: TypeAdapter[ModelSettings] = TypeAdapter(ModelSettings)
_CALL: TypeAdapter[ToolCall] = TypeAdapter(ToolCall)


def dump_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as JSON-compatible dicts."""
    dumped: list[dict[str, Any]] = _MESSAGES.dump_python(list(messages), mode="json")
    return dumped


def load_messages(data: list[dict[str, Any]]) -> list[Message]:
    """Messages from `dump_messages` output."""
    return _MESSAGES.validate_python(data)


def dump_response(response: ModelResponse) -> dict[str, Any]:
    """A model response as a JSON-compatible dict."""
    dumped: dict[str, Any] = _RESPONSE.dump_python(response, mode="json")
    return dumped


def load_response(data: dict[str, Any]) -> ModelResponse:
    """A model response from `dump_response` output."""
    return _RESPONSE.validate_python(data)


def dump_specs(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as JSON-compatible dicts."""
    dumped: list[dict[str, Any]] = _SPECS.dump_python(list(specs), mode="json")
    return dumped


def load_specs(data: list[dict[str, Any]]) -> list[ToolSpec]:
    """Tool specs from `dump_specs` output."""
    return _SPECS.validate_python(data)


def dump_settings(settings: ModelSettings | None) -> dict[str, Any] | None:
    """Model settings as a JSON-compatible dict."""
    if settings is None:
        return None
    dumped: dict[str, Any] = _SETTINGS.dump_python(settings, mode="json")
    return dumped


def load_settings(data: dict[str, Any] | None) -> ModelSettings | None:
    """Model settings from `dump_settings` output."""
    return None if data is None else _SETTINGS.validate_python(data)


def dump_call(call: ToolCall) -> dict[str, Any]:
    """A tool call as a JSON-compatible dict."""
    dumped: dict[str, Any] = _CALL.dump_python(call, mode="json")
    return dumped


def load_call(data: dict[str, Any]) -> ToolCall:
    """A tool call from `dump_call` output."""
    return _CALL.validate_python(data)


@dataclass
class ToolBlueprint:
    """What the workflow needs to know of one tool that runs on a worker."""

    name: str
    description: str
    parameters: dict[str, Any]
    timeout: float | None
    idempotent: bool
    modifies_files: bool
    terminal: bool
    read_only: bool | None = None


@dataclass
class Blueprint:
    """An agent as a worker built it from its spec: what the workflow rebuilds it from."""

    model_name: str
    context_window: int | None
    system_prompt: str | None
    tools: list[ToolBlueprint]
    scorer_name: str | None = None
    model_price: dict[str, Any] | None = None
    """The model's price (`convergent.models._prices.dump_price`), None when unknown."""
    scorer_price: dict[str, Any] | None = None
    """The scorer's price, likewise."""


@dataclass
class DescribeRun:
    """What the ``describe`` activity builds the agent from."""

    recipe: dict[str, Any]
    """The run's agent spec, as JSON."""
    probe: dict[str, str] | None = None
    """Claim of a payload the client stored: the worker must read it from its store."""


@dataclass
class RunStart:
    """The input of a run workflow: a new task, or a state to continue."""

    recipe: dict[str, Any]
    """The run's agent spec, as JSON."""
    run_id: str
    task: str | None = None
    state: dict[str, Any] | None = None
    answers: dict[str, str] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    """Steering messages still to deliver (carried over from the previous workflow run)."""
    paused: bool = False
    """Whether a pause was in force when the previous workflow run handed over."""
    cycles_per_run: int | None = None
    """Hand over to a fresh workflow run after this many cycles (default: when Temporal
    suggests it, as the history grows long)."""
    probe: dict[str, str] | None = None
    """Claim of a payload the client stored, which the workers must be able to read."""
    depth: int = 0
    """Agent-tool calls the run is nested in (0: no agent called it)."""


@dataclass
class ModelCall:
    """One model request, run as an activity."""

    recipe: dict[str, Any]
    """The run's agent spec, as JSON (the worker builds the model from it)."""
    role: str
    """Which of the spec's models answers (``model`` or ``scorer``)."""
    messages: list[dict[str, Any]]
    """The messages new since ``history`` (all of them when it is None)."""
    tools: list[dict[str, Any]]
    """The tools offered, as specs."""
    settings: dict[str, Any] | None = None
    """Request settings."""
    history: dict[str, str] | None = None
    """Claim of the conversation before ``messages``, kept in the payload store."""


@dataclass
class ModelAnswer:
    """The result of a model request."""

    response: dict[str, Any]
    """The model's response."""
    history: dict[str, str]
    """Claim of the conversation the request sent, for the next request to extend."""
    output_checked: bool = False
    """The worker checked the reply, an answer, against the run's output schema."""
    output_errors: str | None = None
    """Why that answer does not validate (None: it does, or it was not checked)."""


@dataclass
class ToolRun:
    """One tool call, run as an activity."""

    recipe: dict[str, Any]
    """The run's agent spec, as JSON (the worker builds the tool from it)."""
    run_id: str
    call: dict[str, Any]
