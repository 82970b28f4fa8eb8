"""Provider replies that are not usable JSON: a model mistake or a `model_error`, never a crash."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convergent import Agent, AnthropicModel, OpenAIChatModel, StopReason, tool
from convergent.models.openai import parse_arguments
from convergent.testing.chat_server import ChatServer, completion

DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


class Replies(ChatServer):
    """Answers each request with the next queued body."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        super().__init__(lambda n, body: self.bodies.pop(0) if self.bodies else b"{}")


@pytest.fixture
def replies() -> Iterator[Replies]:
    with Replies() as server:
        yield server


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


@pytest.mark.parametrize("arguments", [DEEP_ARRAY, DEEP_OBJECT])
def test_deeply_nested_arguments_are_a_mistake_sent_back(arguments: str) -> None:
    assert parse_arguments(arguments)[1] == "the arguments are nested too deeply"


@pytest.mark.parametrize("arguments", [DEEP_ARRAY, DEEP_OBJECT])
async def test_openai_deep_tool_arguments_go_back_to_the_model(
    replies: Replies, arguments: str
) -> None:
    replies.bodies = [completion(arguments=arguments), completion("done")]
    model = OpenAIChatModel("stub", base_url=f"{replies.url}/v1", max_retries=0)
    result = await Agent(model, [echo]).run("go")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "done"
    sent_back = replies.requests[1]["messages"]
    assert isinstance(sent_back, list)
    assert "nested too deeply" in sent_back[-1]["content"]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"this is not json", "not valid JSON"),
        (DEEP_ARRAY.encode(), "nested too deeply"),
        (b"[1, 2, 3]", "the reply is not a"),
    ],
)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_an_unusable_reply_body_is_a_model_error(
    replies: Replies, body: bytes, problem: str, provider: str
) -> None:
    replies.bodies = [body]
    model = (
        OpenAIChatModel("stub", base_url=f"{replies.url}/v1", max_retries=0)
        if provider == "openai"
        else AnthropicModel("stub", api_key="k", base_url=replies.url, max_retries=0)
    )
    result = await Agent(model, [echo]).run("go")
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert result.stop_detail is not None
    assert problem in result.stop_detail
    assert "\n" not in result.stop_detail
