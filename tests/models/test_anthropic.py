from __future__ import annotations

import anthropic
import pytest

from convergent import Agent, AnthropicModel, StopReason, UserError, calculator

from ._replay import Replay


def model_for(replay: Replay) -> AnthropicModel:
    client = anthropic.AsyncAnthropic(
        api_key="test", base_url="http://provider.test", http_client=replay.client2(), max_retries=0
    )
    return AnthropicModel("claude-sonnet-5-5", client=client)


async def test_a_recorded_tool_use_exchange_drives_the_loop() -> None:
    replay = Replay("anthropic_tool_use", "anthropic_answer")
    result = await Agent(model_for(replay), [calculator], system_prompt="Be exact.").run("17*23?")

    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "The result is 391."
    assert [(r.name, r.result) for r in result.tool_calls] == [("calculator", "391")]
    assert result.usage.input_tokens == 860

    first, second = replay.requests
    assert first["system"] == "Be exact."
    assert first["tools"][0]["input_schema"]["properties"]["expression"]["type"] == "string"
    assistant, tool_turn = second["messages"][-2:]
    assert assistant["content"][1] == {
        "type": "tool_use",
        "id": "toolu_01A",
        "name": "calculator",
        "input": {"expression": "17*23"},
    }
    assert tool_turn == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "391", "is_error": False}
        ],
    }


async def test_http_error_is_model_error() -> None:
    replay = Replay("anthropic_answer", status=529)
    result = await Agent(model_for(replay)).run("x")
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "529" in result.stop_detail


def test_missing_key_is_a_user_error() -> None:
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-5-5")
