from __future__ import annotations

import pytest
from genai_prices import Usage as TableUsage
from genai_prices import calc_price

from convergent import Agent, AnthropicModel, Limits, StopReason, UserError, calculator

from ._replay import Replay


def model_for(replay: Replay, base_url: str = "http://provider.test") -> AnthropicModel:
    import anthropic  # loaded by the process that runs these tests only

    client = anthropic.AsyncAnthropic(
        api_key="test", base_url=base_url, http_client=replay.client2(), max_retries=0
    )
    return AnthropicModel("claude-sonnet-5-5", client=client)


async def test_a_tool_use_exchange_drives_the_loop() -> None:
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


async def test_the_answer_after_a_stop_names_the_tools_used_and_forbids_calls() -> None:
    from convergent import Limits

    replay = Replay("anthropic_tool_use", "anthropic_answer")
    agent = Agent(model_for(replay), [calculator], limits=Limits(max_cycles=1))
    result = await agent.run("17*23?")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "The result is 391." and result.output_after_stop
    final = replay.requests[1]
    # the API refuses tool_use blocks in a request without tools: they are named, unusable
    assert final["tools"] == [
        {
            "name": "calculator",
            "description": "Not available now.",
            "input_schema": {"type": "object"},
        }
    ]
    assert final["tool_choice"] == {"type": "none"}
    assert final["messages"][-1]["content"][-1]["type"] == "text"
    assert "cannot call tools" in final["messages"][-1]["content"][-1]["text"]


async def test_a_request_without_tools_and_no_tool_history_sends_no_tools() -> None:
    replay = Replay("anthropic_answer")
    result = await Agent(model_for(replay)).run("hello")
    assert result.stop_reason is StopReason.COMPLETED
    assert "tools" not in replay.requests[0] and "tool_choice" not in replay.requests[0]


async def test_cache_reads_and_writes_are_priced_at_the_tables_cache_prices() -> None:
    replay = Replay("anthropic_cached_answer")
    model = model_for(replay, base_url="https://api.anthropic.com")
    result = await Agent(model).run("again?")
    # the input tokens are all three parts of the prompt
    assert result.usage.input_tokens == 21 + 188 + 2048 and result.usage.output_tokens == 6
    # claude-sonnet-5-5: $2 input, $2.50 cache write, $0.10 cache read, $10 output
    expected = (21 * 2.0 + 188 * 2.5 + 2048 * 0.10 + 6 * 10.0) / 1e6
    assert result.usage.cost == pytest.approx(expected)
    table = calc_price(
        TableUsage(
            input_tokens=2257, cache_write_tokens=188, cache_read_tokens=2048, output_tokens=6
        ),
        "claude-sonnet-5-5",
        provider_id="anthropic",
    )
    assert result.usage.cost == pytest.approx(float(table.total_price))


async def test_a_claude_model_elsewhere_needs_a_price_for_a_cost_limit() -> None:
    model = model_for(Replay("anthropic_answer"))  # on http://provider.test
    assert model.price is None
    with pytest.raises(UserError, match="max_cost needs a price for anthropic:claude-sonnet"):
        await Agent(model, limits=Limits(max_cost=1.0)).run("x")
