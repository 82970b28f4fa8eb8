"""Message content in the GenAI semantic conventions' JSON form (recorded only on opt-in).

The conventions carry a conversation as ``gen_ai.input.messages`` and a reply as
``gen_ai.output.messages``: lists of ``{"role", "parts": [...]}`` objects, each part a
``text``, a ``tool_call`` or a ``tool_call_response``. Span attributes cannot hold
nested objects everywhere, so each list is one JSON string.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from convergent.messages import AssistantMessage, Message, ToolCall, ToolResultMessage

__all__ = ["CAPTURE_CONTENT_ENV", "content_from_env", "dumps", "input_messages", "output_messages"]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable other GenAI instrumentations read for the same opt-in."""


def content_from_env() -> bool:
    """Whether the environment opts in to recording message content."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("true", "1", "yes")


def dumps(value: object) -> str:
    """Compact JSON; values JSON cannot hold are written as their text."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _call_part(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, ToolResultMessage):
        part = {"type": "tool_call_response", "id": message.tool_call_id}
        return {"role": "tool", "parts": [{**part, "response": message.content}]}
    if isinstance(message, AssistantMessage):
        parts: list[dict[str, Any]] = []
        if message.content:
            parts.append({"type": "text", "content": message.content})
        parts += [_call_part(call) for call in message.tool_calls]
        return {"role": "assistant", "parts": parts}
    return {"role": message.role, "parts": [{"type": "text", "content": message.content}]}


def input_messages(messages: Sequence[Message]) -> str:
    """``gen_ai.input.messages``: the conversation sent with a request."""
    return dumps([_message(message) for message in messages])


def output_messages(content: str, calls: Sequence[ToolCall], finish_reason: str) -> str:
    """``gen_ai.output.messages``: one assistant reply."""
    parts: list[dict[str, Any]] = [{"type": "text", "content": content}] if content else []
    parts += [_call_part(call) for call in calls]
    return dumps([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}])
