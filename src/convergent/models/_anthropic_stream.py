"""A streamed Anthropic message, put back together event by event.

`MessageAssembly` turns each raw stream event (``message_start``,
``content_block_start``, ``content_block_delta``, ``message_delta``...) into the text
and tool-call chunks the loop streams, and keeps what they add up to: the blocks, the
stop reason and the usage (input tokens from ``message_start``, output tokens from
the running totals of ``message_delta``). At the end it gives a message shaped like
the SDK's ``Message`` (the attributes `AnthropicModel.parse_message` reads), so a
streamed reply is translated by the same code as one that was not.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from convergent.exceptions import ModelError
from convergent.models._openai_stream import stream_index
from convergent.models.base import TextChunk, ToolCallChunk
from convergent.models.openai import parse_arguments

__all__ = ["MessageAssembly"]


@dataclass(slots=True)
class _Block:
    """One content block of the reply, as its deltas arrived."""

    type: str
    """``text`` or ``tool_use`` (other blocks are not kept)."""
    id: str = ""
    """A tool call's id."""
    name: str = ""
    """A tool call's tool name."""
    pieces: list[str] = field(default_factory=list)
    """The text, or the tool input's JSON text, in pieces."""
    call: int = -1
    """A tool call's position among the reply's calls."""


class MessageAssembly:
    """Collects the events of one streamed Messages reply."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.calls = 0
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.started = False

    def add(self, event: Any, model_name: str) -> list[TextChunk | ToolCallChunk]:
        """Keep one event; return the text and tool-call pieces it carries.

        Raises:
            ModelError: If the event is not shaped like the stream event it names.
        """
        try:
            return list(self._pieces(event))
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            raise ModelError(f"{model_name}: a stream event is malformed ({exc})") from None

    def _pieces(self, event: Any) -> Iterator[TextChunk | ToolCallChunk]:
        kind = event.type
        if kind == "message_start":
            message = event.message
            self.started = True
            self.model = message.model
            self.input_tokens = message.usage.input_tokens or 0
            self.output_tokens = message.usage.output_tokens or 0
        elif kind == "content_block_start":
            block, index = event.content_block, stream_index(event.index)
            if block.type == "text":
                kept = self.blocks[index] = _Block("text")
                if block.text:
                    kept.pieces.append(block.text)
                    yield TextChunk(block.text)
            elif block.type == "tool_use":
                kept = self.blocks[index] = _Block(
                    "tool_use", block.id, block.name, call=self.calls
                )
                self.calls += 1
                yield ToolCallChunk(kept.call, block.id, block.name)
        elif kind == "content_block_delta":
            yield from self._delta(event)
        elif kind == "message_delta":
            if event.delta.stop_reason is not None:
                self.stop_reason = event.delta.stop_reason
            usage = event.usage
            # the counts are running totals: each replaces the one before
            if usage.output_tokens is not None:
                self.output_tokens = usage.output_tokens
            if getattr(usage, "input_tokens", None) is not None:
                self.input_tokens = usage.input_tokens

    def _delta(self, event: Any) -> Iterator[TextChunk | ToolCallChunk]:
        block = self.blocks.get(stream_index(event.index))
        delta = event.delta
        if block is None:
            return
        if delta.type == "text_delta" and block.type == "text":
            block.pieces.append(delta.text)
            yield TextChunk(delta.text)
        elif delta.type == "input_json_delta" and block.type == "tool_use":
            block.pieces.append(delta.partial_json)
            yield ToolCallChunk(block.call, arguments=delta.partial_json)

    def message(self, model_name: str) -> tuple[Any, dict[str, str]]:
        """What the events add up to, shaped like a ``Message``, and the bad tool inputs.

        The second value names each call whose input is not a JSON object (by call id,
        with the reason).

        Raises:
            ModelError: If the stream ended before the reply said it was finished.
        """
        if not self.started or self.stop_reason is None:
            raise ModelError(f"{model_name}: the stream ended before the reply was finished")
        content: list[Any] = []
        errors: dict[str, str] = {}
        for _, block in sorted(self.blocks.items()):
            text = "".join(block.pieces)
            if block.type == "text":
                content.append(SimpleNamespace(type="text", text=text))
                continue
            arguments, error = parse_arguments(text)
            if error is not None:
                errors[block.id] = error
            content.append(
                SimpleNamespace(type="tool_use", id=block.id, name=block.name, input=arguments)
            )
        usage = SimpleNamespace(input_tokens=self.input_tokens, output_tokens=self.output_tokens)
        reply = SimpleNamespace(
            content=content, usage=usage, stop_reason=self.stop_reason, model=self.model
        )
        return reply, errors
