from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from convergent import (
    Agent,
    Message,
    ModelResponse,
    ModelSettings,
    ScriptedModel,
    StopReason,
    StructuredToolCalling,
    ToolSpec,
    UserMessage,
    calculator,
)
from convergent.models.base import Model


class Recorder(Model):
    """Returns fixed JSON strings and keeps what it was sent."""

    def __init__(self, replies: list[dict[str, Any] | str]) -> None:
        self.replies = [r if isinstance(r, str) else json.dumps(r) for r in replies]
        self.seen: list[tuple[list[Message], ModelSettings | None]] = []

    @property
    def name(self) -> str:
        return "recorder"

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        assert tools == ()
        self.seen.append((list(messages), settings))
        return ModelResponse(content=self.replies.pop(0))


async def test_structured_protocol_gives_the_same_tool_calls_and_convergence() -> None:
    inner = Recorder(
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
    schema = inner.seen[0][1].json_schema  # type: ignore[union-attr]
    assert schema is not None
    assert schema["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"] == [
        "calculator"
    ]
    second_prompt = inner.seen[1][0]
    assert isinstance(second_prompt[-1], UserMessage)
    assert second_prompt[-1].content == "Tool results:\ncalculator result: 42"


async def test_confidence_and_finish_in_json_are_metadata_only() -> None:
    inner = Recorder(
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


async def test_malformed_structured_replies_do_not_crash_the_run() -> None:
    inner = Recorder(
        [
            {"thought": "x", "tool_calls": [{"name": "calculator", "arguments": "1+1"}]},
            "not json at all",
        ]
    )
    result = await Agent(StructuredToolCalling(inner), [calculator]).run("1+1")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[0].outcome == "invalid"
    assert result.output == "not json at all"


async def test_scripted_model_can_speak_the_structured_protocol() -> None:
    replies = iter(['{"thought": "t", "tool_calls": []}'])
    model = StructuredToolCalling(ScriptedModel(lambda m, t: ModelResponse(content=next(replies))))
    result = await Agent(model).run("x")
    assert result.output == "t"
