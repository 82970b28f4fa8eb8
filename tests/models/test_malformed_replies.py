"""Provider replies that are not usable JSON: a model mistake or a `model_error`, never a crash."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from convergent import Agent, AnthropicModel, OpenAIChatModel, StopReason, tool
from convergent.models.openai import parse_arguments

DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


class Replies:
    """A loopback HTTP server answering each POST with the next queued body."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.requests: list[dict[str, object]] = []
        replies = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
                replies.requests.append(
                    json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                )
                body = replies.bodies.pop(0) if replies.bodies else b'{"error": "no reply"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def replies() -> Iterator[Replies]:
    server = Replies()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def _completion(arguments: str | None = None, content: str | None = None) -> bytes:
    message: dict[str, object] = {"role": "assistant", "content": content}
    if arguments is not None:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "echo", "arguments": arguments},
            }
        ]
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "stub",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if arguments is not None else "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    ).encode()


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
    replies.bodies = [_completion(arguments=arguments), _completion(content="done")]
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
