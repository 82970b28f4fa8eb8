"""What the LangChain middleware and the LangGraph routing function share.

LangChain's messages as convergent's calls, usage and outcomes, and the tool-call
wrapper that turns a tool's exception into an error result the model reads (marked, so
that a failure is told from a call the tool node rejected, and a fatal one is known).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from convergent.effects import Effect, annotated_effect
from convergent.loop.executor import failure_result
from convergent.messages import NO_USAGE, CallOutcome, ToolCall, Usage

__all__ = [
    "annotated_tool_effect",
    "awrap_tool_call",
    "finish_reason_of",
    "last_text",
    "outcome_of",
    "tool_effects",
    "tool_name",
    "to_tool_calls",
    "usage_of",
    "wrap_tool_call",
]

_MARK = "convergent_failure"
"""The key, in an error result's ``response_metadata``, that marks a tool's failure
(its value: whether the tool declared it fatal). It is never sent to the model."""

ToolResult = ToolMessage | Command[Any]


def tool_name(tool: Any) -> str:
    """A tool's name: a `BaseTool`'s, or a provider's tool given as a dict."""
    if isinstance(tool, Mapping):
        return str(tool.get("name") or (tool.get("function") or {}).get("name") or "")
    return str(getattr(tool, "name", ""))


def tool_effects(tools: Iterable[Any]) -> dict[str, Effect]:
    """The effect of each tool, by name, from the MCP annotations in its ``metadata``.

    For a routing function's ``tools``: given the tool node's tools, it knows their
    effects before their first call, and a call of another name is the model's mistake.

    Example:
        ```python
        tools = await client.get_tools()  # langchain-mcp-adapters
        route = ToolsCondition(Limits(max_cycles=20), tools=tool_effects(tools))
        ```
    """
    return {tool_name(tool): annotated_tool_effect(tool) for tool in tools}


def annotated_tool_effect(tool: Any) -> Effect:
    """A LangChain tool's effect from the MCP annotations in its ``metadata``.

    ``langchain-mcp-adapters`` copies an MCP server's annotations of a tool
    (``readOnlyHint``, ``idempotentHint``, ``destructiveHint``) into the ``metadata`` of
    the LangChain tool it makes, and a user may set the same keys on a tool of their own.
    A tool without them, or given as a provider's dict, is undeclared.
    """
    metadata = None if isinstance(tool, Mapping) else getattr(tool, "metadata", None)
    return annotated_effect(metadata if isinstance(metadata, Mapping) else None)


def wrap_tool_call(
    request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
) -> ToolResult:
    """Run the call; a tool's exception becomes an error result for the model.

    LangGraph's own control flow (interrupts, parent commands) passes through.
    """
    try:
        return handler(request)
    except GraphBubbleUp:
        raise
    except Exception as exc:  # the model sees the failure, as in convergent's loop
        return _failed(request, exc)


async def awrap_tool_call(
    request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]
) -> ToolResult:
    """`wrap_tool_call` for the async path."""
    try:
        return await handler(request)
    except GraphBubbleUp:
        raise
    except Exception as exc:  # the model sees the failure, as in convergent's loop
        return _failed(request, exc)


def _failed(request: ToolCallRequest, exc: Exception) -> ToolMessage:
    call = request.tool_call
    text, fatal = failure_result(call["name"], exc)
    return ToolMessage(
        text,
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="error",
        response_metadata={_MARK: fatal},
    )


def outcome_of(message: ToolMessage) -> tuple[CallOutcome, bool]:
    """How the call behind a result ended, and whether fatally.

    A failure marked by `wrap_tool_call` is the tool's; any other error result is one
    the tool node made itself when it rejected the call (the model's mistake).
    """
    if message.status != "error":
        return CallOutcome.OK, False
    fatal = message.response_metadata.get(_MARK)
    if fatal is None:
        return CallOutcome.INVALID, False
    return CallOutcome.FAILED, bool(fatal)


def finish_reason_of(message: AIMessage) -> str | None:
    """Why the provider ended a model message, as the chat model reports it.

    OpenAI's ``finish_reason`` or Anthropic's ``stop_reason``; None when it reports none.
    """
    metadata = message.response_metadata
    reason = metadata.get("finish_reason") or metadata.get("stop_reason")
    return str(reason) if reason else None


def usage_of(message: AIMessage) -> Usage:
    """A model message's ``usage_metadata`` as convergent's `Usage` (one request)."""
    metadata = message.usage_metadata
    if not metadata:
        return Usage(requests=1)
    return Usage(
        input_tokens=metadata.get("input_tokens", 0),
        output_tokens=metadata.get("output_tokens", 0),
        requests=1,
    )


def usage_of_any(message: AIMessage | None) -> Usage:
    """`usage_of`, or no usage for no message."""
    return usage_of(message) if message is not None else NO_USAGE


def to_tool_call(call: Mapping[str, Any]) -> ToolCall:
    """One of a model message's tool calls as convergent's `ToolCall`."""
    return ToolCall(id=call.get("id") or "", name=call["name"], arguments=dict(call["args"]))


def to_tool_calls(message: AIMessage) -> list[ToolCall]:
    """A model message's tool calls as convergent's `ToolCall`s."""
    return [to_tool_call(call) for call in message.tool_calls]


def last_text(messages: Sequence[BaseMessage]) -> str:
    """The model's last text in the conversation."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.text.strip():
            return message.text
    return ""
