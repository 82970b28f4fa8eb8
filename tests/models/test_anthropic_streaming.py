"""AnthropicModel streams against a loopback server speaking the Messages API's events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from convergent import (
    Agent,
    AnthropicModel,
    Event,
    ModelResponded,
    StopReason,
    TextDelta,
    calculator,
)
from convergent.events import ToolCallDelta
from convergent.messages import UserMessage
from convergent.models import TextChunk, ToolCallChunk
from convergent.testing.chat_server import SSE, ChatServer, anthropic_stream

from ._replay import EXCHANGES


def exchange(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXCHANGES / f"{name}.json").read_text())
    return data


def reply(n: int, body: dict[str, Any]) -> bytes | SSE:
    """The exchange the last user text names, streamed when the request asks."""
    name = body["messages"][-1]["content"][-1]["text"]
    message = exchange(name)
    return anthropic_stream(message) if body.get("stream") else json.dumps(message).encode()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(reply) as stub:
        yield stub


def model_at(stub: ChatServer) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-5-5", api_key="test", base_url=stub.url, max_retries=0)


@pytest.mark.parametrize("name", ["anthropic_answer", "anthropic_tool_use"])
async def test_a_streamed_message_is_the_message_unstreamed(server: ChatServer, name: str) -> None:
    model = model_at(server)
    ask = [UserMessage(content=name)]
    whole = await model.request(ask, [calculator.spec])
    *chunks, last = [part async for part in model.request_stream(ask, [calculator.spec])]

    assert last == whole
    assert server.requests[-1]["stream"] is True and "stream" not in server.requests[0]
    text = [chunk.text for chunk in chunks if isinstance(chunk, TextChunk)]
    assert len(text) > 1 and "".join(text) == whole.content
    calls = [chunk for chunk in chunks if isinstance(chunk, ToolCallChunk)]
    for index, call in enumerate(whole.tool_calls):
        mine = [chunk for chunk in calls if chunk.index == index]
        assert (mine[0].call_id, mine[0].name) == (call.id, call.name)
        assert json.loads("".join(chunk.arguments for chunk in mine)) == call.arguments


async def test_the_output_tokens_come_from_message_delta(server: ChatServer) -> None:
    ask = [UserMessage(content="anthropic_tool_use")]
    *_, last = [part async for part in model_at(server).request_stream(ask, [calculator.spec])]
    # message_start says 1 output token; the closing message_delta says 57
    assert (last.usage.input_tokens, last.usage.output_tokens) == (390, 57)


async def test_a_listened_run_gets_the_deltas_of_each_reply(server: ChatServer) -> None:
    def script(n: int, body: dict[str, Any]) -> bytes | SSE:
        name = "anthropic_tool_use" if n == 1 else "anthropic_answer"
        return anthropic_stream(exchange(name))

    with ChatServer(script) as stub:
        seen: list[Event] = []
        result = await Agent(model_at(stub), [calculator]).run("17*23?", on_event=seen.append)
    assert result.stop_reason is StopReason.COMPLETED and result.output == "The result is 391."
    assert result.usage.input_tokens == 860
    for responded in [e for e in seen if isinstance(e, ModelResponded)]:
        text = [e.text for e in seen if isinstance(e, TextDelta) and e.cycle == responded.cycle]
        assert "".join(text) == responded.content
    (start, *rest) = [e for e in seen if isinstance(e, ToolCallDelta)]
    assert (start.call_id, start.name, start.arguments) == ("toolu_01A", "calculator", "")
    assert json.loads("".join(e.arguments for e in rest)) == {"expression": "17*23"}


async def test_an_error_event_mid_stream_stops_the_run_model_error() -> None:
    events = anthropic_stream(exchange("anthropic_answer")).events[:3]
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    failing = SSE([*events, ("error", json.dumps(error))], done=False)
    with ChatServer(lambda n, body: failing) as stub:
        seen: list[Event] = []
        result = await Agent(model_at(stub)).run("x", on_event=seen.append)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "Overloaded" in result.stop_detail and "HTTP" not in result.stop_detail
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["The "]
    assert len(stub.requests) == 1


async def test_a_stream_without_its_end_stops_the_run_model_error() -> None:
    cut = SSE(anthropic_stream(exchange("anthropic_answer")).events[:4], done=False)
    with ChatServer(lambda n, body: cut) as stub:
        result = await Agent(model_at(stub)).run("x", on_event=lambda e: None)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "ended before the reply was finished" in result.stop_detail


def with_block_index(stream: SSE, position: int, index: object) -> SSE:
    """``stream`` with the events of the block at ``position`` renumbered ``index``."""
    events = []
    for name, data in stream.events:
        event = json.loads(data)
        if event.get("index") == position:
            event["index"] = index
        events.append((name, json.dumps(event)))
    return SSE(events, done=False)


@pytest.mark.parametrize("index", ["b", 0.5, None, -1])
async def test_a_block_index_that_is_not_a_whole_number_stops_the_run_model_error(
    index: object,
) -> None:
    odd = with_block_index(anthropic_stream(exchange("anthropic_tool_use")), 1, index)
    with ChatServer(lambda n, body: odd) as stub:
        result = await Agent(model_at(stub), [calculator]).run("x", on_event=lambda e: None)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert result.stop_detail == (
        f"anthropic:claude-sonnet-5-5: a stream event is malformed (the index {index!r} is "
        "not a whole number from 0)"
    )


async def test_a_trickling_stream_ends_at_the_models_timeout() -> None:
    slow = anthropic_stream(exchange("anthropic_answer"))
    with ChatServer(lambda n, body: SSE(slow.events, done=False, pace=1.0)) as stub:
        model = AnthropicModel(
            "claude-sonnet-5-5", api_key="test", base_url=stub.url, max_retries=0, timeout=1.0
        )
        result = await asyncio.wait_for(Agent(model).run("x", on_event=lambda e: None), 60)
        assert await asyncio.to_thread(stub.dropped.wait, 30)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert result.stop_detail == (
        "anthropic:claude-sonnet-5-5: no complete reply within 1s; the request was ended"
    )
