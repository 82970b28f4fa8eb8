"""A streamed chat completion, put back together chunk by chunk.

`CompletionAssembly` turns each ``ChatCompletionChunk`` into the text and tool-call
chunks the loop streams, and keeps what they add up to. At the end it gives a
completion shaped like the SDK's ``ChatCompletion`` (the attributes
`OpenAIChatModel.parse_completion` reads), so a streamed reply is translated by the
same code as one that was not.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from convergent.exceptions import ModelError
from convergent.models.base import TextChunk, ToolCallChunk

__all__ = ["CompletionAssembly", "stream_index"]


def stream_index(value: object) -> int:
    """A position a stream names (a tool call's, a content block's): a whole number from 0.

    Raises:
        ValueError: If ``value`` is anything else (a string, a fraction, a boolean...).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"the index {value!r} is not a whole number from 0")
    return value


@dataclass(slots=True)
class _Call:
    """One tool call of the reply, as its chunks arrived."""

    id: str | None = None
    """The call's id (from the first chunk that carries one)."""
    name: str = ""
    """The tool's name (from the first chunk that carries one)."""
    arguments: list[str] = field(default_factory=list)
    """Pieces of the arguments' JSON text, in order."""


class CompletionAssembly:
    """Collects the chunks of one streamed chat completion (only its first choice)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.model: str | None = None
        self.choices = 0

    def add(self, chunk: Any, model_name: str) -> list[TextChunk | ToolCallChunk]:
        """Keep one chunk; return the text and tool-call pieces it carries.

        Raises:
            ModelError: If the chunk is not shaped like a ``ChatCompletionChunk``.
        """
        try:
            return list(self._pieces(chunk))
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            raise ModelError(f"{model_name}: a streamed chunk is malformed ({exc})") from None

    def _pieces(self, chunk: Any) -> Iterator[TextChunk | ToolCallChunk]:
        if getattr(chunk, "model", None):
            self.model = chunk.model
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or ():
            if choice.index != 0:
                continue
            self.choices += 1
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                self.text.append(delta.content)
                yield TextChunk(delta.content)
            for raw in delta.tool_calls or ():
                yield self._call_piece(raw)

    def _call_piece(self, raw: Any) -> ToolCallChunk:
        index = stream_index(raw.index)
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = _Call()
        function = raw.function
        name = (function.name if function is not None else None) or None
        arguments = (function.arguments if function is not None else None) or ""
        new_id = raw.id if raw.id and call.id is None else None
        new_name = name if name and not call.name else None
        if new_id is not None:
            call.id = new_id
        if new_name is not None:
            call.name = new_name
        if arguments:
            call.arguments.append(arguments)
        return ToolCallChunk(index, new_id, new_name, arguments)

    def completion(self, model_name: str) -> Any:
        """What the chunks add up to, shaped like a ``ChatCompletion``.

        Raises:
            ModelError: If the stream ended before the reply said it was finished.
        """
        if not self.choices:
            raise ModelError(f"{model_name}: the streamed reply has no choices")
        if self.finish_reason is None:
            raise ModelError(f"{model_name}: the stream ended before the reply was finished")
        calls = [
            SimpleNamespace(
                id=call.id,
                function=SimpleNamespace(name=call.name, arguments="".join(call.arguments)),
            )
            for _, call in sorted(self.calls.items())
        ]
        message = SimpleNamespace(content="".join(self.text) or None, tool_calls=calls or None)
        choice = SimpleNamespace(message=message, finish_reason=self.finish_reason)
        return SimpleNamespace(choices=[choice], usage=self.usage, model=self.model)
