"""OpenAIChatModel streams against a loopback server speaking OpenAI's SSE chunks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from convergent import (
    Agent,
    Event,
    Limits,
    ModelResponded,
    ModelResponse,
    OpenAIChatModel,
    StopReason,
    TextDelta,
    calculator,
    file_tools,
)
from convergent.events import ToolCallDelta
from convergent.messages import UserMessage
from convergent.models import StreamPart, TextChunk, ToolCallChunk
from convergent.testing.chat_server import SSE, ChatServer, openai_stream

from ._replay import EXCHANGES

QUESTION = [UserMessage(content="17*23?")]


def exchange(name: str) -> bytes:
    return (EXCHANGES / f"{name}.json").read_bytes()


def model_at(stub: ChatServer, **options: Any) -> OpenAIChatModel:
    options.setdefault("max_retries", 0)
    return OpenAIChatModel("gpt-4o-mini", base_url=f"{stub.url}/v1", **options)


@pytest.fixture
def replays() -> Iterator[ChatServer]:
    """Answers every request with the exchange its last user message names."""
    with ChatServer(lambda n, body: exchange(body["messages"][-1]["content"])) as stub:
        yield stub


async def streamed(model: OpenAIChatModel, name: str) -> list[StreamPart]:
    ask = [UserMessage(content=name)]
    return [part async for part in model.request_stream(ask, [calculator.spec])]


@pytest.mark.parametrize("name", ["openai_answer", "openai_tool_call", "openai_truncated_call"])
async def test_a_streamed_reply_is_the_reply_unstreamed(replays: ChatServer, name: str) -> None:
    model = model_at(replays, price=(0.15, 0.60))
    whole = await model.request([UserMessage(content=name)], [calculator.spec])
    parts = await streamed(model, name)

    *chunks, last = parts
    assert last == whole
    assert all(isinstance(chunk, TextChunk | ToolCallChunk) for chunk in chunks)
    text = [chunk.text for chunk in chunks if isinstance(chunk, TextChunk)]
    assert "".join(text) == whole.content
    assert whole.usage.input_tokens > 0 and whole.usage.cost > 0  # from the usage chunk
    sent = replays.requests[-1]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert "stream" not in replays.requests[0]


async def test_text_arrives_in_pieces(replays: ChatServer) -> None:
    parts = await streamed(model_at(replays), "openai_answer")
    text = [part.text for part in parts if isinstance(part, TextChunk)]
    assert text == ["17 *", " 23 ", "= 39", "1."]


async def test_tool_call_arguments_arrive_in_pieces_by_call(replays: ChatServer) -> None:
    parts = await streamed(model_at(replays), "openai_tool_call")
    calls = [part for part in parts if isinstance(part, ToolCallChunk)]
    assert [(c.index, c.call_id, c.name) for c in calls if c.call_id] == [
        (0, "call_abc", "calculator"),
        (1, "call_def", "list_dir"),
    ]
    for index, raw in enumerate(
        json.loads(exchange("openai_tool_call"))["choices"][0]["message"]["tool_calls"]
    ):
        pieces = [c.arguments for c in calls if c.index == index]
        assert len(pieces) > 2
        assert "".join(pieces) == raw["function"]["arguments"]


async def test_the_usage_comes_from_the_streams_last_chunk() -> None:
    body = exchange("openai_answer")
    with ChatServer(lambda n, request: openai_stream(body, include_usage=n == 1)) as stub:
        model = model_at(stub)
        *_, counted = [part async for part in model.request_stream(QUESTION, ())]
        *_, uncounted = [part async for part in model.request_stream(QUESTION, ())]
    assert isinstance(counted, ModelResponse) and isinstance(uncounted, ModelResponse)
    assert (counted.usage.input_tokens, counted.usage.output_tokens) == (210, 9)
    assert uncounted.usage.total_tokens == 0 and uncounted.usage.requests == 1


async def test_a_listened_run_streams_and_ends_as_an_unstreamed_one(tmp_path: Path) -> None:
    def script(n: int, body: dict[str, Any]) -> bytes:
        return exchange("openai_tool_call" if n in (1, 3) else "openai_answer")

    with ChatServer(script) as stub:
        agent = Agent(model_at(stub), [calculator, *file_tools(tmp_path)])
        quiet = await agent.run("17*23?")
        seen: list[Event] = []
        heard = await agent.run("17*23?", on_event=seen.append)
    assert "stream" not in stub.requests[0] and stub.requests[2]["stream"] is True
    assert heard.messages == quiet.messages and heard.usage == quiet.usage
    assert [(r.name, r.arguments, r.result) for r in heard.tool_calls] == [
        (r.name, r.arguments, r.result) for r in quiet.tool_calls
    ]
    for cycle in (1, 2):
        deltas = [e for e in seen if e.cycle == cycle and isinstance(e, TextDelta)]
        (responded,) = [e for e in seen if e.cycle == cycle and isinstance(e, ModelResponded)]
        assert "".join(d.text for d in deltas) == responded.content
        assert responded.first_delta is not None and responded.first_delta <= responded.duration
        for index, call in enumerate(responded.tool_calls):
            pieces = [
                e.arguments
                for e in seen
                if isinstance(e, ToolCallDelta) and e.cycle == cycle and e.index == index
            ]
            assert json.loads("".join(pieces)) == call.arguments
    assert [type(e).__name__ for e in seen if e.cycle == 2][-2:] == ["ModelResponded", "RunStopped"]


async def test_an_error_in_the_stream_stops_the_run_model_error() -> None:
    first = openai_stream(exchange("openai_answer")).events[:2]
    failing = SSE([*first, (None, json.dumps({"error": {"message": "the server is overloaded"}}))])
    with ChatServer(lambda n, body: failing) as stub:
        seen: list[Event] = []
        result = await Agent(model_at(stub, max_retries=2)).run("x", on_event=seen.append)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "overloaded" in result.stop_detail
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["17 *"]
    assert len(stub.requests) == 1  # no retry once the reply began


async def test_a_stream_cut_short_stops_the_run_model_error() -> None:
    cut = SSE(openai_stream(exchange("openai_answer")).events[:3], done=False)
    with ChatServer(lambda n, body: cut) as stub:
        result = await Agent(model_at(stub, max_retries=2)).run("x", on_event=lambda e: None)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "ended before the reply was finished" in result.stop_detail
    assert len(stub.requests) == 1


async def test_a_failure_before_the_stream_is_retried() -> None:
    busy = SSE([], done=False, status=503, headers={"retry-after-ms": "1"})

    def script(n: int, body: dict[str, Any]) -> bytes | SSE:
        return busy if n == 1 else exchange("openai_answer")

    with ChatServer(script) as stub:
        result = await Agent(model_at(stub, max_retries=1)).run("x", on_event=lambda e: None)
    assert result.stop_reason is StopReason.COMPLETED and result.output == "17 * 23 = 391."
    assert len(stub.requests) == 2


def with_call_index(stream: SSE, position: int, index: object) -> SSE:
    """``stream`` with the tool-call chunks of the call at ``position`` renumbered ``index``."""
    events = []
    for name, data in stream.events:
        chunk = json.loads(data)
        for choice in chunk.get("choices") or ():
            for call in (choice.get("delta") or {}).get("tool_calls") or ():
                if call["index"] == position:
                    call["index"] = index
        events.append((name, json.dumps(chunk)))
    return SSE(events)


@pytest.mark.parametrize("index", ["x", 0.5, None, -1])
async def test_a_tool_call_index_that_is_not_a_whole_number_stops_the_run_model_error(
    index: object,
) -> None:
    odd = with_call_index(openai_stream(exchange("openai_tool_call")), 1, index)
    with ChatServer(lambda n, body: odd) as stub:
        agent = Agent(model_at(stub), [calculator])
        result = await agent.run("x", on_event=lambda e: None)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert result.stop_detail == (
        f"openai:gpt-4o-mini: a streamed chunk is malformed (the index {index!r} is not a "
        "whole number from 0)"
    )


def trickling(n: int, body: dict[str, Any]) -> bytes | SSE:
    """The first reply one byte a second (about five minutes of it), the next at once."""
    answer = exchange("openai_answer")
    return SSE(openai_stream(answer).events, pace=1.0) if n == 1 else answer


async def test_a_trickling_stream_ends_at_the_runs_time_limit() -> None:
    with ChatServer(trickling) as stub:
        agent = Agent(model_at(stub), limits=Limits(max_seconds=1.5))
        result = await asyncio.wait_for(agent.run("x", on_event=lambda e: None), 60)
        assert await asyncio.to_thread(stub.dropped.wait, 30)  # the connection was closed
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert "of max_seconds=1.5" in result.stop_detail
    assert result.output == "17 * 23 = 391." and result.output_after_stop


async def test_a_trickling_stream_ends_at_the_models_timeout() -> None:
    with ChatServer(trickling) as stub:
        model = model_at(stub, timeout=1.0)
        result = await asyncio.wait_for(Agent(model).run("x", on_event=lambda e: None), 60)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert result.stop_detail == (
        "openai:gpt-4o-mini: no complete reply within 1s; the request was ended"
    )


async def test_a_cancelled_stream_closes_its_connection_at_once() -> None:
    with ChatServer(trickling) as stub:
        reading = asyncio.ensure_future(streamed(model_at(stub), "x"))
        assert await asyncio.to_thread(stub.arrived.wait, 30)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(reading, 30)
        assert await asyncio.to_thread(stub.dropped.wait, 30)
