"""A model request streamed to the run's listeners (machinery of the loop).

`streamed_request` is what a cycle awaits instead of `Model.request` when someone
receives the run's deltas: it turns each chunk of `Model.request_stream` into a
`TextDelta` or `ToolCallDelta` event as it arrives, notes how long the first one took,
and returns the final `ModelResponse`, the same one `Model.request` would return.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing

from convergent.events import TextDelta, ToolCallDelta
from convergent.exceptions import ModelError
from convergent.loop.trace import EventSink
from convergent.messages import Message, ModelResponse, ToolSpec
from convergent.models.base import Model, ModelSettings, TextChunk

__all__ = ["streamed_request"]


async def streamed_request(
    model: Model,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    settings: ModelSettings | None,
    sink: EventSink,
    cycle: int,
) -> ModelResponse:
    """Request ``model`` as a stream, deliver its deltas to ``sink``, return the reply.

    Raises:
        ModelError: If the backend fails, before or after its first chunk, or its
            stream ends without a reply.
    """
    clock = sink.clock
    run_id = sink.state.run_id
    started = clock.monotonic()
    first: float | None = None
    response: ModelResponse | None = None
    parts = model.request_stream(messages, tools, settings)
    async with aclosing(parts):
        async for part in parts:
            if first is None:
                first = clock.monotonic() - started
            if isinstance(part, ModelResponse):
                response = part
                break
            if isinstance(part, TextChunk):
                sink.delta(TextDelta(run_id=run_id, cycle=cycle, text=part.text))
            else:
                sink.delta(
                    ToolCallDelta(
                        run_id=run_id,
                        cycle=cycle,
                        index=part.index,
                        call_id=part.call_id,
                        name=part.name,
                        arguments=part.arguments,
                    )
                )
    if response is None:
        raise ModelError(f"{model.name}: the stream ended without a reply")
    sink.first_delta = first
    return response
