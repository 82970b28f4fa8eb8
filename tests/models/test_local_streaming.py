"""The embedded model streams: llama.cpp's chunks, the structured thought, the same reply."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convergent import Agent, Event, Limits, ModelResponded, TextDelta, calculator
from convergent.events import ToolCallDelta
from convergent.messages import UserMessage
from convergent.models import _llama_server
from convergent.models.base import TextChunk, ToolCallChunk
from convergent.models.local import LocalModel

pytest.importorskip("xllamacpp")
pytestmark = [pytest.mark.local_model, pytest.mark.slow]

TASK = "What is 17 * 23? Use the calculator tool."


@pytest.fixture(scope="module")
def shared_server() -> Iterator[_llama_server.LlamaServer]:
    """One server of the default configuration for the module's models."""
    server = _llama_server.acquire(LocalModel()._config())
    yield server
    _llama_server.release(server)


@pytest.mark.parametrize("tools", [(), (calculator.spec,)], ids=["plain", "structured"])
async def test_a_streamed_reply_is_the_reply_unstreamed(
    shared_server: _llama_server.LlamaServer, tools: tuple[object, ...]
) -> None:
    ask = [UserMessage(content=TASK)]
    async with LocalModel() as whole_model, LocalModel() as streaming_model:
        whole = await whole_model.request(ask, tools)  # type: ignore[arg-type]
        parts = [part async for part in streaming_model.request_stream(ask, tools)]  # type: ignore[arg-type]
    *chunks, last = parts
    assert last == whole
    assert last.usage.input_tokens > 0 and last.usage.output_tokens > 0
    text = [chunk.text for chunk in chunks if isinstance(chunk, TextChunk)]
    assert len(text) > 1 and "".join(text) == whole.content
    if whole.tool_calls:
        # the embedded model writes its calls before its thought: they are announced first
        assert chunks[0] == ToolCallChunk(0)


async def test_a_listened_run_on_the_embedded_model_gets_its_text_as_deltas(
    shared_server: _llama_server.LlamaServer,
) -> None:
    seen: list[Event] = []
    async with LocalModel() as model:
        agent = Agent(model, [calculator], limits=Limits(max_cycles=3))
        result = await agent.run(TASK, on_event=seen.append)
    responded = [e for e in seen if isinstance(e, ModelResponded)]
    assert len(responded) == result.cycles and all(e.first_delta is not None for e in responded)
    for event in responded:
        text = [e.text for e in seen if isinstance(e, TextDelta) and e.cycle == event.cycle]
        assert "".join(text) == event.content
        named = [
            e for e in seen if isinstance(e, ToolCallDelta) and e.cycle == event.cycle and e.name
        ]
        assert [e.name for e in named] == [call.name for call in event.tool_calls]
