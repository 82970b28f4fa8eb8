"""The one seam between the loop and any language model: `Model.request`.

`Model.request_stream` is the same request, answered piece by piece: text and
tool-call argument chunks as the model produces them, then the whole `ModelResponse`,
identical to what `Model.request` returns. The loop asks for a stream only when
someone listens to the run's deltas; a backend that cannot stream answers with its
whole reply as one chunk.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from convergent.messages import Message, ModelResponse, ToolSpec
from convergent.models._prices import TokenPrice

__all__ = [
    "OUTPUT_NAME",
    "Model",
    "ModelSettings",
    "Replayable",
    "StreamPart",
    "TextChunk",
    "ToolCallChunk",
    "whole_reply_chunks",
]


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of the reply's text, as the model produced it."""

    text: str
    """The new text (append it to what came before)."""


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """A piece of one tool call: its id and name when first known, then argument text."""

    index: int
    """Position of the call in the reply (0-based); chunks of one call share it."""
    call_id: str | None = None
    """The call's id, on the chunk that first carries it."""
    name: str | None = None
    """The tool's name, on the chunk that first carries it."""
    arguments: str = ""
    """A piece of the arguments' JSON text (append it to the call's earlier pieces)."""


StreamPart: TypeAlias = "TextChunk | ToolCallChunk | ModelResponse"
"""What `Model.request_stream` yields: chunks, then one `ModelResponse`, last."""


def whole_reply_chunks(response: ModelResponse) -> Iterator[TextChunk | ToolCallChunk]:
    """A reply that was not streamed as chunks: its text as one, and one per tool call."""
    if response.content:
        yield TextChunk(response.content)
    for index, call in enumerate(response.tool_calls):
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        yield ToolCallChunk(index, call.id, call.name, arguments)


OUTPUT_NAME = "final_answer"
"""Name of the answer's schema where a provider wants one (OpenAI's ``response_format``),
and of the tool through which a model without structured output gives its answer
(Anthropic)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Per-request options; backends ignore what they cannot honour."""

    temperature: float | None = None
    """Sampling temperature."""
    max_tokens: int | None = None
    """Upper bound on generated tokens for this request."""
    json_schema: dict[str, Any] | None = None
    """When set, ask for a reply whose content is JSON valid under this schema."""
    json_schema_name: str = "response"
    """Name given to ``json_schema`` where the provider wants one."""
    output_schema: dict[str, Any] | None = None
    """When set, the final answer (a reply without tool calls) must be JSON valid under
    this schema, while tool calls stay allowed: backends with native structured output
    constrain the answer (see `OUTPUT_NAME`). The loop sets it from the agent's output
    type, and checks every answer itself."""
    timeout: float | None = None
    """Seconds the whole request may take, its reply included, when that is less than
    the backend's own timeout (the loop sets what is left of ``max_seconds``). Past
    it, a backend ends the request and raises `convergent.exceptions.ModelError`."""
    plain_answer: bool = False
    """The request wants an answer in plain words and nothing else (the answer after a
    stop): backends that shape replies as JSON (the structured protocol, the embedded
    model) constrain this one to a single ``answer`` text field, with no tool calls."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific request fields, passed through unchanged."""


@runtime_checkable
class Replayable(Protocol):
    """A model that replays a script, whose place a durable run keeps to resume it.

    A durable run stores the `position` of each of its replayed models with every
    checkpoint, beside its state; resuming the run `seek`s a rebuilt model there, so
    that no response is played twice (`convergent.models.scripted.ScriptedModel` is
    one; a wrapper such as `convergent.models.structured.StructuredToolCalling` passes
    its inner model's place through).
    """

    def position(self) -> int | None:
        """Responses given so far (None: nothing to keep, e.g. a wrapped live model)."""
        ...

    def seek(self, position: int) -> None:
        """Continue the script after ``position`` responses."""
        ...


class Model(ABC):
    """An LLM backend: turns a conversation and tool specs into one `ModelResponse`.

    `request` is the whole seam; `request_stream` (which calls it by default) streams
    the same reply, for backends that can.

    Subclasses translate to and from their provider's wire format. They raise
    `convergent.exceptions.ModelError` when the backend fails after its own retries;
    the loop turns that into the ``model_error`` stop reason.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """A short name for traces, e.g. ``openai:gpt-4o-mini``."""

    @property
    def context_window(self) -> int | None:
        """Maximum context in tokens, when known; used for context compression."""
        return None

    @property
    def price(self) -> TokenPrice | None:
        """What the model's tokens cost, when known (None: unknown).

        A backend prices each response's usage with it. A run with a cost limit refuses
        a model whose price is unknown: its cost would never count.
        """
        return None

    @abstractmethod
    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Send one request and return the model's reply.

        Args:
            messages: The whole conversation so far, oldest first. The loop passes its
                live list to avoid a copy per cycle: read it during the call, do not keep it.
            tools: Tools the model may call in this reply.
            settings: Optional per-request options.
        """

    async def request_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[StreamPart, None]:
        """Send one request and yield its reply as it comes: chunks, then the response.

        The last item is the `ModelResponse` that `request` would return for the same
        reply; every item before it is a `TextChunk` or `ToolCallChunk`. The chunks
        are a preview: joined, they give the response's text and calls' arguments.
        A backend that fails raises `convergent.exceptions.ModelError`, also after some
        chunks (it retries only before the first one).

        This default, for backends that cannot stream, awaits `request` and yields the
        whole reply as one chunk (and one per tool call).
        """
        response = await self.request(messages, tools, settings)
        for chunk in whole_reply_chunks(response):
            yield chunk
        yield response

    async def aclose(self) -> None:  # noqa: B027  (optional hook, no-op by default)
        """Release connections or processes held by the backend."""

    async def __aenter__(self) -> Model:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
