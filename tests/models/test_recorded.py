"""The OpenAI and Anthropic backends read what the providers' live APIs sent.

Each file in `recorded/` is a reply, a stream or a whole exchange that openai-python or
anthropic-sdk-python recorded from the live API for its own tests (`recorded/README.md`
says which); a loopback `ChatServer` sends it back as the provider sent it, event by
event for a stream, and the tests check what convergent makes of it and what it sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from convergent import Agent, AnthropicModel, OpenAIChatModel, StopReason, ToolError, tool
from convergent.messages import ModelResponse, UserMessage
from convergent.models import TextChunk, ToolCallChunk
from convergent.testing.chat_server import SSE, Answer, ChatServer

RECORDED = Path(__file__).parent / "recorded"


def recorded_stream(path: Path) -> SSE:
    """A recorded server-sent event stream, to be sent again event by event."""
    events: list[tuple[str | None, str]] = []
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        name = None
        data: list[str] = []
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data.append(line.removeprefix("data: "))
        if data:
            events.append((name, "\n".join(data)))
    return SSE(events, done=False)  # OpenAI's recorded streams end with their own [DONE]


def recorded_reply(provider: str, name: str, body: dict[str, Any]) -> Answer:
    """The recording ``name`` of ``provider``: its stream when the request asks for one."""
    if body.get("stream"):
        return recorded_stream(RECORDED / provider / f"{name}.sse")
    return (RECORDED / provider / f"{name}.json").read_bytes()


@pytest.fixture
def openai_server() -> Iterator[ChatServer]:
    """Answers each request with the OpenAI recording its last user message names."""

    def reply(n: int, body: dict[str, Any]) -> Answer:
        return recorded_reply("openai", body["messages"][-1]["content"], body)

    with ChatServer(reply) as server:
        yield server


def openai_at(server: ChatServer) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-2024-08-06", base_url=f"{server.url}/v1", max_retries=0)


@tool
def GetWeatherArgs(city: str, country: str, units: Literal["c", "f"] = "c") -> str:  # noqa: N802
    """The weather in a city (the tool name the recording called)."""
    return f"12 degrees {units} in {city}, {country}"


@tool
def get_stock_price(ticker: str, exchange: str) -> str:
    """The latest price of a ticker."""
    return f"{ticker} on {exchange}: 227.52"


CALLS = [
    ("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
    ("get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
]
"""The two calls gpt-4o made in both recordings."""


@pytest.mark.parametrize(
    ("name", "content", "finish", "usage"),
    [
        ("text_answer", "I'm unable to provide real-time weather updates.", "stop", (14, 37)),
        ("two_tool_calls", "", "tool_calls", (149, 60)),
        ("cut_at_max_tokens", '{"', "length", (79, 1)),
    ],
)
async def test_recorded_openai_replies_read_as_sent(
    openai_server: ChatServer, name: str, content: str, finish: str, usage: tuple[int, int]
) -> None:
    reply = await openai_at(openai_server).request([UserMessage(content=name)], [])
    assert reply.content.startswith(content) and reply.finish_reason == finish
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == usage
    assert reply.model_name == "gpt-4o-2024-08-06"
    if name == "two_tool_calls":
        assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
            ("call_fdNz3vOBKYgOIpMdWotB9MjY", *CALLS[0]),
            ("call_h1DWI1POMJLb0KwIyQHWXD4p", *CALLS[1]),
        ]


@pytest.mark.parametrize(
    ("name", "finish", "usage", "ids"),
    [
        ("text_answer", "stop", (14, 30), []),
        (
            "two_tool_calls",
            "tool_calls",
            (149, 60),
            ["call_JMW1whyEaYG438VE1OIflxA2", "call_DNYTawLBoN8fj3KN6qU9N1Ou"],
        ),
        ("cut_at_max_tokens", "length", (79, 1), []),
    ],
)
async def test_recorded_openai_streams_add_up_to_their_reply(
    openai_server: ChatServer, name: str, finish: str, usage: tuple[int, int], ids: list[str]
) -> None:
    model = openai_at(openai_server)
    *parts, last = [p async for p in model.request_stream([UserMessage(content=name)], [])]
    assert isinstance(last, ModelResponse)
    text = "".join(p.text for p in parts if isinstance(p, TextChunk))
    assert text == last.content and last.finish_reason == finish
    assert (last.usage.input_tokens, last.usage.output_tokens) == usage
    assert [c.id for c in last.tool_calls] == ids
    if ids:
        assert [(c.name, c.arguments) for c in last.tool_calls] == [
            ("GetWeatherArgs", {**CALLS[0][1], "country": "GB"}),
            CALLS[1],
        ]
        pieces = [p for p in parts if isinstance(p, ToolCallChunk)]
        assert len(pieces) > len(ids), "the arguments arrived in pieces"
    if name == "text_answer":
        assert len(parts) > 10 and text.startswith("I'm unable to provide real-time weather")


async def test_a_recorded_openai_batch_drives_the_loop_and_goes_back_as_openai_sent_it() -> None:
    script = iter(["two_tool_calls", "text_answer"])

    def reply(n: int, body: dict[str, Any]) -> Answer:
        return recorded_reply("openai", next(script), body)

    with ChatServer(reply) as server:
        agent = Agent(openai_at(server), [GetWeatherArgs, get_stock_price])
        result = await agent.run("What's the weather like in Edinburgh? And the price of AAPL?")
    assert result.stop_reason is StopReason.COMPLETED
    assert [(r.name, r.arguments) for r in result.tool_calls] == CALLS
    assert result.usage.input_tokens == 149 + 14 and result.usage.output_tokens == 60 + 37
    assistant, weather, price = server.requests[1]["messages"][-3:]
    recorded = json.loads((RECORDED / "openai" / "two_tool_calls.json").read_text())
    sent = recorded["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in assistant["tool_calls"]] == [
        (c["id"], c["function"]["name"]) for c in sent
    ]
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        json.loads(c["function"]["arguments"]) for c in sent
    ]
    assert (weather["role"], weather["tool_call_id"]) == ("tool", sent[0]["id"])
    assert (price["tool_call_id"], price["content"]) == (sent[1]["id"], "AAPL on NASDAQ: 227.52")


# -- Anthropic ---------------------------------------------------------------------------


@tool
def get_weather(location: str, units: Literal["c", "f"]) -> str:
    """The weather in a city; fails as it did when the exchange was recorded."""
    raise ToolError("RuntimeError('Unexpected error, try again')")


async def test_a_recorded_anthropic_exchange_replays_through_the_loop() -> None:
    exchange = json.loads((RECORDED / "anthropic" / "tool_error_then_answer.json").read_text())
    replies = iter(step["response"]["body"] for step in exchange)

    def reply(n: int, body: dict[str, Any]) -> Answer:
        return json.dumps(next(replies)).encode()

    with ChatServer(reply) as server:
        model = AnthropicModel("claude-haiku-4-5", api_key="t", base_url=server.url, max_retries=0)
        result = await Agent(model, [get_weather]).run("What is the weather in SF?")

    final = exchange[1]["response"]["body"]["content"][0]["text"]
    assert (result.stop_reason, result.output) == (StopReason.COMPLETED, final)
    assert [(r.name, r.arguments, r.outcome) for r in result.tool_calls] == [
        ("get_weather", {"location": "San Francisco, CA", "units": "f"}, "failed")
    ]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (656 + 760, 74 + 63)
    # what convergent sent is what the SDK sent, block for block
    first, second = server.requests
    assert first["model"] == exchange[0]["request"]["body"]["model"]
    assert [t["name"] for t in first["tools"]] == ["get_weather"]
    assert set(first["tools"][0]["input_schema"]["properties"]) == {"location", "units"}
    ours, theirs = second["messages"][-2:], exchange[1]["request"]["body"]["messages"][-2:]
    used, recorded_use = ours[0]["content"][-1], theirs[0]["content"][-1]
    assert {k: used[k] for k in ("type", "id", "name", "input")} == {
        k: recorded_use[k] for k in ("type", "id", "name", "input")
    }
    result_block, recorded_result = ours[1]["content"][0], theirs[1]["content"][0]
    assert {k: result_block[k] for k in ("type", "tool_use_id", "is_error")} == {
        k: recorded_result[k] for k in ("type", "tool_use_id", "is_error")
    }
    assert "Unexpected error, try again" in result_block["content"]


@pytest.mark.parametrize(
    ("name", "text", "call", "finish", "usage"),
    [
        ("text", "Hello there!", None, "end_turn", (11, 6)),
        (
            "tool_use",
            "I'll check the current weather in Paris for you.",
            ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"}),
            "tool_use",
            (377, 65),
        ),
    ],
)
async def test_recorded_anthropic_streams_add_up_to_their_message(
    name: str,
    text: str,
    call: tuple[str, str, dict[str, Any]] | None,
    finish: str,
    usage: tuple[int, int],
) -> None:
    with ChatServer(lambda n, body: recorded_stream(RECORDED / "anthropic" / f"{name}.sse")) as s:
        model = AnthropicModel("claude-sonnet-5-5", api_key="t", base_url=s.url, max_retries=0)
        ask = [UserMessage(content="x")]
        *parts, last = [p async for p in model.request_stream(ask, [get_weather.spec])]
    assert isinstance(last, ModelResponse)
    assert "".join(p.text for p in parts if isinstance(p, TextChunk)) == text == last.content
    assert [(c.id, c.name, c.arguments) for c in last.tool_calls] == ([call] if call else [])
    assert last.finish_reason == finish
    assert (last.usage.input_tokens, last.usage.output_tokens) == usage
