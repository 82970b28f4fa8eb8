"""OpenAIChatModel against a real HTTP server on loopback, across event loops."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convergent import Agent, OpenAIChatModel, StopReason
from convergent.testing.chat_server import ChatServer

from ._replay import EXCHANGES


@pytest.fixture
def server() -> Iterator[ChatServer]:
    answer = (EXCHANGES / "openai_answer.json").read_bytes()
    with ChatServer(lambda n, body: answer) as running:
        yield running


def test_one_model_serves_consecutive_event_loops(server: ChatServer) -> None:
    agent = Agent(OpenAIChatModel("stub", base_url=f"{server.url}/v1", max_retries=0))
    first = agent.run_sync("one")
    second = agent.run_sync("two")
    assert first.stop_reason is StopReason.COMPLETED
    assert second.output == "17 * 23 = 391."
    assert [body["messages"][-1]["role"] for body in server.requests] == ["user", "user"]
