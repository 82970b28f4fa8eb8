from __future__ import annotations

import httpx
import pytest
from genai_prices import Usage as TableUsage
from genai_prices import calc_price

from convergent import (
    Agent,
    Limits,
    ModelHTTPError,
    ModelSettings,
    OpenAIChatModel,
    StopReason,
    UserError,
    calculator,
    file_tools,
)
from convergent.messages import ToolResultMessage, UserMessage

from ._replay import Replay


def model_for(replay: Replay, **kwargs: object) -> OpenAIChatModel:
    import openai  # loaded by the process that runs these tests only

    client = openai.AsyncOpenAI(
        api_key="test",
        base_url="http://provider.test/v1",
        http_client=replay.client(),
        max_retries=0,
    )
    return OpenAIChatModel("gpt-4o-mini", client=client, **kwargs)  # type: ignore[arg-type]


async def test_a_tool_call_exchange_drives_the_loop(tmp_path: object) -> None:
    replay = Replay("openai_tool_call", "openai_answer")
    model = model_for(replay, price=(0.15, 0.60))
    result = await Agent(model, [calculator, *file_tools(".")]).run("17*23?")

    assert result.stop_reason is StopReason.COMPLETED
    assert [r.name for r in result.tool_calls] == ["calculator", "list_dir"]
    assert result.output == "17 * 23 = 391."
    assert result.usage.input_tokens == 352 and result.usage.output_tokens == 50
    assert result.usage.cost == pytest.approx((352 * 0.15 + 50 * 0.60) / 1e6)
    assert replay.paths == ["/v1/chat/completions"] * 2

    first, second = replay.requests
    assert first["model"] == "gpt-4o-mini"
    assert {t["function"]["name"] for t in first["tools"]} == {
        "calculator",
        "read_file",
        "list_dir",
    }
    sent = second["messages"]
    assert sent[-3]["role"] == "assistant"
    assert [c["id"] for c in sent[-3]["tool_calls"]] == ["call_abc", "call_def"]
    assert sent[-2] == {"role": "tool", "tool_call_id": "call_abc", "content": "391"}
    assert sent[-1]["tool_call_id"] == "call_def"


async def test_truncated_arguments_become_a_parse_error_sent_back_as_empty_object() -> None:
    replay = Replay("openai_truncated_call", "openai_answer")
    result = await Agent(model_for(replay), [calculator]).run("12*?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[0].outcome == "invalid"
    echoed = replay.requests[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert echoed == "{}"
    error = [m for m in result.messages if isinstance(m, ToolResultMessage)][0]
    assert "not valid JSON" in error.content


async def test_json_schema_and_settings_are_sent() -> None:
    replay = Replay("openai_answer")
    settings = ModelSettings(
        temperature=0.0,
        max_tokens=50,
        json_schema={"type": "object"},
        json_schema_name="s",
        extra={"seed": 7},
    )
    await model_for(replay).request([UserMessage(content="hi")], [], settings)
    body = replay.requests[0]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 50 and body["seed"] == 7
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "s", "schema": {"type": "object"}},
    }
    assert "tools" not in body


async def test_http_errors_become_model_errors_and_stop_the_run() -> None:
    replay = Replay("openai_answer", status=503)
    result = await Agent(model_for(replay)).run("x")
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "503" in result.stop_detail


async def test_connection_failure_is_a_model_error() -> None:
    import openai

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = openai.AsyncOpenAI(
        api_key="k",
        base_url="http://provider.test/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(refuse)),
        max_retries=0,
    )
    result = await Agent(OpenAIChatModel("m", client=client)).run("x")
    assert result.stop_reason is StopReason.MODEL_ERROR


def test_missing_key_without_base_url_is_a_user_error() -> None:
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")


def test_local_server_needs_no_key() -> None:
    model = OpenAIChatModel("any", base_url="http://127.0.0.1:9/v1")
    assert model.name == "openai:any"


def test_model_http_error_keeps_status() -> None:
    assert ModelHTTPError(429, "slow down").status_code == 429


def on_openais_api(replay: Replay, name: str = "gpt-4o-mini") -> OpenAIChatModel:
    """A model whose client points at OpenAI's own API (answered by the replay, offline)."""
    import openai

    client = openai.AsyncOpenAI(
        api_key="test",
        base_url="https://api.openai.com/v1",
        http_client=replay.client(),
        max_retries=0,
    )
    return OpenAIChatModel(name, client=client)


async def test_cached_prompt_tokens_are_priced_at_the_tables_cache_price() -> None:
    replay = Replay("openai_cached_answer")
    result = await Agent(on_openais_api(replay)).run("again?")
    assert result.usage.input_tokens == 2006 and result.usage.output_tokens == 5
    # gpt-4o-mini: 86 uncached tokens at $0.15, 1,920 cached at $0.075, 5 out at $0.60
    assert result.usage.cost == pytest.approx((86 * 0.15 + 1920 * 0.075 + 5 * 0.60) / 1e6)
    table = calc_price(
        TableUsage(input_tokens=2006, cache_read_tokens=1920, output_tokens=5),
        "gpt-4o-mini",
        provider_id="openai",
    )
    assert result.usage.cost == pytest.approx(float(table.total_price))


async def test_a_known_model_is_priced_without_being_told() -> None:
    replay = Replay("openai_tool_call", "openai_answer")
    result = await Agent(on_openais_api(replay), [calculator, *file_tools(".")]).run("17*23?")
    assert result.usage.cost == pytest.approx((352 * 0.15 + 50 * 0.60) / 1e6)


async def test_an_unpriced_model_is_refused_under_a_cost_limit() -> None:
    unknown = on_openais_api(Replay("openai_answer"), "no-such-model")
    elsewhere = model_for(Replay("openai_answer"))  # gpt-4o-mini on a server of its own
    for model in (unknown, elsewhere):
        assert model.price is None
        with pytest.raises(UserError, match=rf"max_cost needs a price for {model.name}"):
            await Agent(model, limits=Limits(max_cost=1.0)).run("x")
    given = model_for(Replay("openai_answer"), price=(0.15, 0.60))
    result = await Agent(given, limits=Limits(max_cost=1.0)).run("x")
    assert result.usage.cost == pytest.approx((210 * 0.15 + 9 * 0.60) / 1e6)
