from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from convergent import Agent, Limits, ModelResponse, ScriptedModel, StopReason, calculator
from convergent.messages import UserMessage
from convergent.models import StructuredToolCalling
from convergent.models.structured import plain_answer_schema


def recorder(replies: list[dict[str, Any] | str]) -> ScriptedModel:
    """A model that answers with fixed JSON strings (dicts are encoded) and records requests."""
    return ScriptedModel([r if isinstance(r, str) else json.dumps(r) for r in replies])


def sent_no_tools(inner: ScriptedModel) -> bool:
    """The structured protocol never passes tool specs to the wrapped model."""
    return all(request.tools == () for request in inner.requests)


async def test_structured_protocol_gives_the_same_tool_calls_and_convergence() -> None:
    inner = recorder(
        [
            {
                "thought": "compute",
                "tool_calls": [{"name": "calculator", "arguments": {"expression": "2*21"}}],
                "confidence": 0.2,
            },
            {"thought": "It is 42.", "tool_calls": [], "confidence": 0.99, "action": "finish"},
        ]
    )
    result = await Agent(StructuredToolCalling(inner), [calculator]).run("2*21")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "It is 42."
    assert [r.result for r in result.tool_calls] == ["42"]
    assert sent_no_tools(inner)
    settings = inner.requests[0].settings
    schema = settings.json_schema if settings is not None else None
    assert schema is not None
    assert schema["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"] == [
        "calculator"
    ]
    second_prompt = inner.requests[1].messages
    assert isinstance(second_prompt[-1], UserMessage)
    assert second_prompt[-1].content == "Tool results:\ncalculator result: 42"


async def test_confidence_and_finish_in_json_are_metadata_only() -> None:
    inner = recorder(
        [
            {
                "thought": "done!",
                "action": "finish",
                "confidence": 0.95,
                "tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}],
            },
            {"thought": "2", "tool_calls": []},
        ]
    )
    result = await Agent(StructuredToolCalling(inner), [calculator]).run("1+1")
    assert result.cycles == 2
    assert result.tool_calls[0].ok
    assert sent_no_tools(inner)


async def test_malformed_structured_replies_do_not_crash_the_run() -> None:
    inner = recorder(
        [
            {"thought": "x", "tool_calls": [{"name": "calculator", "arguments": "1+1"}]},
            "not json at all",
        ]
    )
    result = await Agent(StructuredToolCalling(inner), [calculator]).run("1+1")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[0].outcome == "invalid"
    assert result.output == "not json at all"
    assert sent_no_tools(inner)


async def test_scripted_model_can_speak_the_structured_protocol() -> None:
    replies = iter(['{"thought": "t", "tool_calls": []}'])
    model = StructuredToolCalling(ScriptedModel(lambda m, t: ModelResponse(content=next(replies))))
    result = await Agent(model).run("x")
    assert result.output == "t"


async def test_a_deeply_nested_structured_reply_is_a_plain_answer() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    result = await Agent(StructuredToolCalling(recorder([deep])), [calculator]).run("1+1")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == deep


async def test_the_answer_after_a_stop_is_asked_for_as_plain_words_only() -> None:
    inner = recorder(
        [
            {
                "thought": "count",
                "tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}],
            },
            {"answer": "2, not double-checked"},
        ]
    )
    result = await Agent(
        StructuredToolCalling(inner), [calculator], limits=Limits(max_cycles=1)
    ).run("1+1")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "2, not double-checked" and result.output_after_stop
    final = inner.requests[-1]
    assert final.settings is not None and final.settings.json_schema == plain_answer_schema()
    assert final.settings.json_schema["required"] == ["answer"]
    assert "No tools can be called now" in final.messages[0].content
    assert final.messages[-2].content == "Tool results:\ncalculator result: 2"


async def test_the_protocol_json_given_as_the_answer_after_a_stop_is_not_the_output() -> None:
    # a backend that ignores the schema answers in the protocol's shape, copying its prompt
    copied = {"thought": "The run has stopped, you cannot call tools", "tool_calls": []}
    inner = recorder(
        [
            {
                "thought": "I will count",
                "tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}],
            },
            copied,
        ]
    )
    result = await Agent(
        StructuredToolCalling(inner), [calculator], limits=Limits(max_cycles=1)
    ).run("1+1")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "I will count" and not result.output_after_stop
    assert result.stop_detail == (
        "reached max_cycles=1; the answer asked for after the stop was not used: "
        "it was the tool-call protocol's JSON"
    )


async def test_a_typed_answer_is_asked_for_in_the_schema_and_becomes_the_answer() -> None:
    call = {"name": "calculator", "arguments": {"expression": "17*23"}}
    inner = recorder(
        [
            {"thought": "", "tool_calls": [call]},
            {"thought": "done", "tool_calls": [], "answer": {"total": 391}},
        ]
    )

    class Total(BaseModel):
        total: int

    result = await Agent(StructuredToolCalling(inner), [calculator], output_type=Total).run(
        "17*23?"
    )

    assert result.stop_reason is StopReason.COMPLETED and result.cycles == 2
    assert result.output_data == Total(total=391)
    first = inner.requests[0]
    assert first.settings is not None and first.settings.json_schema is not None
    calling, answering = first.settings.json_schema["anyOf"]
    assert calling["properties"]["tool_calls"]["minItems"] == 1
    assert answering["properties"]["answer"] == Total.model_json_schema()
    assert json.dumps(Total.model_json_schema()) in first.messages[1].content
