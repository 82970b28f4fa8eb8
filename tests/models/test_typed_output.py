"""Native structured output for typed answers: each provider's request carries the schema."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from tests.chat_stub import ChatStub, completion

from convergent import Agent, ModelSettings, OpenAIChatModel, StopReason, calculator
from convergent.messages import UserMessage
from convergent.models.base import OUTPUT_NAME
from convergent.models.local import _LocalStructured, step_schema

from ._replay import Replay
from .test_anthropic import model_for as anthropic_for
from .test_openai import model_for as openai_for


class Total(BaseModel):
    total: int


SCHEMA = Total.model_json_schema()


async def test_openai_asks_for_the_answers_schema_as_its_response_format() -> None:
    replay = Replay("openai_tool_call", "openai_typed_answer")
    result = await Agent(openai_for(replay), [calculator], output_type=Total).run("17*23?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output_data == Total(total=391)
    for body in replay.requests:
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": OUTPUT_NAME, "schema": SCHEMA},
        }
        assert [tool["function"]["name"] for tool in body["tools"]][0] == "calculator"


async def test_an_explicit_json_schema_wins_over_the_output_schema() -> None:
    replay = Replay("openai_answer")
    settings = ModelSettings(json_schema={"type": "object"}, output_schema=SCHEMA)
    await openai_for(replay).request([UserMessage(content="hi")], [], settings)
    assert replay.requests[0]["response_format"]["json_schema"]["name"] == "response"


async def test_anthropic_gives_the_answer_through_a_forced_tool() -> None:
    replay = Replay("anthropic_tool_use", "anthropic_final_answer")
    result = await Agent(anthropic_for(replay), [calculator], output_type=Total).run("17*23?")
    assert result.stop_reason is StopReason.COMPLETED and result.cycles == 2
    assert result.output == '{"total": 391}'
    assert result.output_data == Total(total=391)
    assert [record.name for record in result.tool_calls] == ["calculator"]
    for body in replay.requests:
        assert body["tool_choice"] == {"type": "any"}
        assert [tool["name"] for tool in body["tools"]] == ["calculator", OUTPUT_NAME]
        assert body["tools"][1]["input_schema"] == SCHEMA


async def test_anthropic_wraps_a_schema_that_is_not_an_object() -> None:
    replay = Replay("anthropic_final_answer_list")
    result = await Agent(anthropic_for(replay), output_type=list[int]).run("two primes?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output_data == [3, 5]
    body = replay.requests[0]
    assert body["tool_choice"] == {"type": "tool", "name": OUTPUT_NAME}
    assert body["tools"][0]["input_schema"] == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"type": "integer"}}},
        "required": ["value"],
    }


async def test_anthropic_answer_after_a_stop_is_plain_text() -> None:
    model = anthropic_for(Replay("anthropic_answer"))
    request = model.build_request([UserMessage(content="x")], [], ModelSettings())
    assert "tools" not in request and "tool_choice" not in request


def structured_stub(replies: list[str]) -> Any:
    def reply(number: int, body: dict[str, Any]) -> bytes:
        return completion(replies[number - 1])

    return ChatStub(reply)


async def test_llama_cpp_structured_steps_give_a_typed_answer_under_its_schema() -> None:
    answers = [
        json.dumps(
            {
                "tool_calls": [{"name": "calculator", "arguments": {"expression": "17*23"}}],
                "thought": "compute",
            }
        ),  # fmt: skip
        json.dumps({"tool_calls": [], "answer": {"total": 391}}),
    ]
    with structured_stub(answers) as stub:
        inner = OpenAIChatModel("local", base_url=f"{stub.url}/v1", api_key="x", max_retries=0)
        model = _LocalStructured(inner, examples=False)
        result = await Agent(model, [calculator], output_type=Total).run("17*23?")
        await inner.aclose()
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output_data == Total(total=391)
    assert [record.result for record in result.tool_calls] == ["391"]
    wanted = step_schema([calculator.spec], answer=SCHEMA)
    for body in stub.requests:
        assert body["response_format"]["json_schema"]["schema"] == wanted
    calling, answering = wanted["anyOf"]
    assert answering["properties"]["answer"] == SCHEMA
    assert calling["properties"]["tool_calls"]["minItems"] == 1


async def test_llama_cpp_without_tools_constrains_the_whole_reply() -> None:
    with structured_stub(['{"total": 4}']) as stub:
        inner = OpenAIChatModel("local", base_url=f"{stub.url}/v1", api_key="x", max_retries=0)
        result = await Agent(_LocalStructured(inner, examples=False), output_type=Total).run("2+2")
        await inner.aclose()
    assert result.output_data == Total(total=4)
    assert stub.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": OUTPUT_NAME, "schema": SCHEMA},
    }
