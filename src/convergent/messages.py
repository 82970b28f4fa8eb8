"""Messages, tool calls and model responses: the vocabulary every model backend speaks.

All types are frozen dataclasses so that a run's history can be shared without copying
and serialised to JSON (see `RunState.to_jsonable`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field

from convergent._frozen import blank, slot_setters

__all__ = [
    "CURRENCY",
    "NO_USAGE",
    "AssistantMessage",
    "CallOutcome",
    "Message",
    "ModelResponse",
    "SystemMessage",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "ReplyEnd",
    "Usage",
    "UserMessage",
    "reply_end",
]


CURRENCY = "USD"
"""The currency of every cost and price: the price table's, and that of ``--price``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token and cost accounting, as reported by the provider."""

    input_tokens: int = 0
    """Prompt tokens sent to the model."""
    output_tokens: int = 0
    """Tokens the model generated."""
    requests: int = 0
    """Number of model requests these figures cover."""
    cost: float = 0.0
    """Cost of these requests in `CURRENCY`, when the model has a price; otherwise 0."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
            cost=self.cost + other.cost,
        )


NO_USAGE = Usage()
"""No tokens, no requests, no cost (shared: `Usage` is immutable)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool invocation requested by the model."""

    id: str
    """Provider-assigned (or generated) id that pairs the call with its result."""
    name: str
    """Name of the tool to run."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Parsed JSON arguments."""
    parse_error: str | None = None
    """Set when the provider's argument text was not valid JSON; the call is then invalid."""


class CallOutcome(StrEnum):
    """How one tool call ended; stored and shown as its value (``ok``, ``failed``...)."""

    OK = "ok"
    """The tool returned a result."""
    INVALID = "invalid"
    """The model's mistake: unknown tool, unparsable or invalid arguments. Fed back."""
    FAILED = "failed"
    """The tool raised or timed out: a tool failure, subject to the tool-error policy."""
    NEEDS_USER = "needs_user"
    """The tool must ask the user and no channel can answer now."""
    INTERRUPTED = "interrupted"
    """The run died while the call was in flight and the tool is not safe to re-run."""
    NOT_EXECUTED = "not_executed"
    """The call would have repeated itself too often: the run stalled before running it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What a model is told about a tool: name, description and JSON schema of arguments."""

    name: str
    """Tool name, unique within an agent."""
    description: str
    """What the tool does, shown to the model."""
    parameters: dict[str, Any]
    """JSON schema (type ``object``) of the arguments."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    """Instructions that frame the whole run."""

    content: str
    """The instruction text."""
    role: Literal["system"] = "system"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """A message from the user: the task, or a redirect sent mid-run."""

    content: str
    """The user's text."""
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """What the model said in one cycle, with the tool calls it requested."""

    content: str = ""
    """Free text (for the structured protocol: the ``thought``)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls requested in this response; empty means the model is done."""
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMessage:
    """The observation for one tool call, sent back to the model."""

    tool_call_id: str
    """Id of the call this answers."""
    name: str
    """Name of the tool that was called."""
    content: str
    """Result text, or the error text when ``is_error``."""
    is_error: bool = False
    """Whether the call failed or was rejected."""
    role: Literal["tool"] = "tool"


_SET_CONTENT, _SET_CALLS, _SET_ASSISTANT = slot_setters(
    AssistantMessage, ("content", "tool_calls", "role")
)
_SET_CALL_ID, _SET_NAME, _SET_RESULT, _SET_ERROR, _SET_TOOL = slot_setters(
    ToolResultMessage, ("tool_call_id", "name", "content", "is_error", "role")
)


def assistant_message(content: str, tool_calls: tuple[ToolCall, ...]) -> AssistantMessage:
    """``AssistantMessage(content=..., tool_calls=...)``, made at the cost of a plain object."""
    message = blank(AssistantMessage)
    _SET_CONTENT(message, content)
    _SET_CALLS(message, tool_calls)
    _SET_ASSISTANT(message, "assistant")
    return message


def tool_result_message(
    tool_call_id: str, name: str, content: str, is_error: bool
) -> ToolResultMessage:
    """``ToolResultMessage(...)`` with every field given, made at the cost of a plain object."""
    message = blank(ToolResultMessage)
    _SET_CALL_ID(message, tool_call_id)
    _SET_NAME(message, name)
    _SET_RESULT(message, content)
    _SET_ERROR(message, is_error)
    _SET_TOOL(message, "tool")
    return message


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="role"),
]
"""Any message in a conversation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """One model reply, already translated from the provider's format."""

    content: str = ""
    """Free text of the reply."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Requested tool calls; the loop continues exactly while this is non-empty."""
    usage: Usage = NO_USAGE
    """Tokens (and cost) of this request."""
    finish_reason: str | None = None
    """The provider's own finish reason (``stop``, ``tool_calls``, ``length``...), verbatim."""
    model_name: str | None = None
    """Model that produced the reply, as the provider names it."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Extra fields the model emitted (``confidence``, ``action``...): recorded, never obeyed."""

    def to_message(self) -> AssistantMessage:
        """The assistant message this response adds to the conversation."""
        return assistant_message(self.content, self.tool_calls)

    def with_unique_call_ids(self) -> ModelResponse:
        """This response with its calls' ids unique in it (the loop tells calls apart by id).

        Ids come from the provider or the model, which may give two calls one id, or
        none: the first call keeps an id, a later one with the same id gets the next
        free ``ID-N`` (from 2), one without an id ``call-N`` (N: its position, from 1).
        A response whose ids are unique is returned as it is.
        """
        given = self.tool_calls
        if len(given) == 1 and given[0].id:
            return self
        ids = [call.id for call in given]
        if all(ids) and len(set(ids)) == len(ids):
            return self
        reserved, kept = set(ids), set[str]()
        calls = []
        for position, call in enumerate(self.tool_calls):
            if call.id and call.id not in kept:
                kept.add(call.id)
                calls.append(call)
                continue
            base, number = (call.id, 2) if call.id else ("call", position + 1)
            while f"{base}-{number}" in reserved:
                number += 1
            renamed = f"{base}-{number}"
            reserved.add(renamed)
            kept.add(renamed)
            calls.append(dataclasses.replace(call, id=renamed))
        return dataclasses.replace(self, tool_calls=tuple(calls))


ReplyEnd: TypeAlias = Literal["answer", "empty", "cut", "refused"]
"""How a reply without tool calls ended: an answer, or not one (empty, cut, refused)."""

_CUT = frozenset({"length", "max_tokens", "max_output_tokens", "model_context_window_exceeded"})
_REFUSED = frozenset({"content_filter", "refusal", "safety", "recitation", "blocklist"})


def reply_end(content: str, finish_reason: str | None) -> ReplyEnd:
    """How a reply without tool calls ended, from its structure (never its wording).

    A reply is an answer when it has text and the provider says the model ended its
    turn; cut at the output token limit (``length``, ``max_tokens``) or withheld
    (``content_filter``, ``refusal``) it is not, and neither is an empty one.
    """
    reason = (finish_reason or "").lower()
    if reason in _CUT:
        return "cut"
    if reason in _REFUSED:
        return "refused"
    return "answer" if content.strip() else "empty"
