"""The structured protocol streams its ``thought`` as the reply's text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from convergent import (
    Agent,
    Event,
    ModelResponded,
    ModelResponse,
    OpenAIChatModel,
    ScriptedModel,
    TextDelta,
    calculator,
)
from convergent.events import ToolCallDelta
from convergent.messages import UserMessage
from convergent.models import StreamPart, StructuredToolCalling, TextChunk, ToolCallChunk
from convergent.models._thought_stream import ThoughtStream
from convergent.testing.chat_server import ChatServer, completion

THOUGHT = 'I need 17 * 23: "about 341"\n\u00e9\U0001f600\\ done'
CALL = {"name": "calculator", "arguments": {"expression": "17 * 23"}}


def fed(text: str, size: int, stream: ThoughtStream | None = None) -> str:
    stream = stream or ThoughtStream()
    return "".join(stream.feed(text[at : at + size]) for at in range(0, len(text), size))


@pytest.mark.parametrize("ascii_only", [True, False])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 1000])
def test_the_thought_is_read_out_of_json_in_any_pieces(ascii_only: bool, size: int) -> None:
    for reply in (
        {"thought": THOUGHT, "tool_calls": [CALL]},
        {
            "tool_calls": [{"name": "x", "arguments": {"thought": "not this one"}}],
            "thought": THOUGHT,
        },
        {"confidence": 0.9, "thought": THOUGHT, "tool_calls": []},
    ):
        assert fed(json.dumps(reply, ensure_ascii=ascii_only), size) == THOUGHT


def test_the_first_call_is_noticed_before_the_thought() -> None:
    stream = ThoughtStream()
    text = json.dumps({"tool_calls": [CALL], "thought": "t"})
    before_thought = text[: text.index('"thought"')]
    assert fed(before_thought, 4, stream) == "" and stream.calls
    empty = ThoughtStream()
    fed(json.dumps({"tool_calls": [], "thought": "t"}), 4, empty)
    assert not empty.calls


def test_text_that_is_not_json_gives_no_thought() -> None:
    stream = ThoughtStream()
    assert fed("The answer is 391.", 3, stream) == "" and not stream.calls


async def parts_of(model: StructuredToolCalling) -> list[StreamPart]:
    ask = [UserMessage(content="17*23?")]
    return [part async for part in model.request_stream(ask, [calculator.spec])]


async def test_a_streamed_thought_arrives_in_pieces_and_matches_the_reply() -> None:
    reply = json.dumps({"thought": THOUGHT, "tool_calls": [CALL]})
    with ChatServer(lambda n, body: completion(reply)) as stub:
        inner = OpenAIChatModel("stub", base_url=f"{stub.url}/v1", max_retries=0)
        model = StructuredToolCalling(inner)
        whole = await model.request([UserMessage(content="17*23?")], [calculator.spec])
        *chunks, last = await parts_of(StructuredToolCalling(inner))
    assert isinstance(last, ModelResponse) and last == whole
    text = [chunk.text for chunk in chunks if isinstance(chunk, TextChunk)]
    assert len(text) > 5 and "".join(text) == THOUGHT == last.content
    # the call is announced as soon as its list opens, and given once the reply is whole
    announced, call = [chunk for chunk in chunks if isinstance(chunk, ToolCallChunk)]
    assert announced == ToolCallChunk(0)
    assert (call.index, call.call_id, call.name) == (0, "call_1_0", "calculator")
    assert json.loads(call.arguments) == CALL["arguments"]
    assert chunks[-1] == call


async def test_calls_written_first_are_announced_before_the_thought() -> None:
    reply = json.dumps({"tool_calls": [CALL], "thought": "I need the calculator."})
    with ChatServer(lambda n, body: completion(reply)) as stub:
        inner = OpenAIChatModel("stub", base_url=f"{stub.url}/v1", max_retries=0)
        chunks = (await parts_of(StructuredToolCalling(inner)))[:-1]
    first_text = next(i for i, c in enumerate(chunks) if isinstance(c, TextChunk))
    assert chunks[0] == ToolCallChunk(0) and first_text > 0


async def test_a_reply_that_is_not_json_streams_as_its_whole_text_at_the_end() -> None:
    model = StructuredToolCalling(ScriptedModel(["The answer is 391."]))
    *chunks, last = await parts_of(model)
    assert chunks == [TextChunk("The answer is 391.")]
    assert isinstance(last, ModelResponse) and last.content == "The answer is 391."


async def test_a_run_over_a_model_that_cannot_stream_gets_the_thought_in_one_delta() -> None:
    inner = ScriptedModel(
        [
            json.dumps({"thought": "compute", "tool_calls": [CALL]}),
            '{"thought": "391", "tool_calls": []}',
        ]
    )
    seen: list[Event] = []
    result = await Agent(StructuredToolCalling(inner), [calculator]).run("x", on_event=seen.append)
    assert result.output == "391"
    texts = [(e.cycle, e.text) for e in seen if isinstance(e, TextDelta)]
    assert texts == [(1, "compute"), (2, "391")]
    calls = [e for e in seen if isinstance(e, ToolCallDelta)]
    assert [(e.cycle, e.index, e.name, e.arguments) for e in calls] == [
        (1, 0, None, ""),  # announced as the list of calls opens
        (1, 0, "calculator", json.dumps({"expression": "17 * 23"})),
    ]
    responded: list[Any] = [e for e in seen if isinstance(e, ModelResponded)]
    assert [e.content for e in responded] == ["compute", "391"]
