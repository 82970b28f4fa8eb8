"""The loopback chat server answers over real HTTP, whole or streamed."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

from convergent.testing.chat_server import (
    SSE,
    ChatServer,
    Request,
    Response,
    anthropic_message,
    anthropic_stream,
    completion,
)


def post(url: str, body: dict[str, Any], timeout: float = 30) -> tuple[str, bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.headers["Content-Type"], response.read()


def events(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]


def test_a_completion_is_sent_whole_and_each_request_is_kept() -> None:
    with ChatServer(lambda n, body: completion(f"reply {n}")) as server:
        kind, first = post(f"{server.url}/v1/chat/completions", {"messages": ["a"]})
        _, second = post(f"{server.url}/v1/chat/completions", {"messages": ["b"]})
    assert kind == "application/json"
    assert json.loads(first)["choices"][0]["message"]["content"] == "reply 1"
    assert json.loads(second)["choices"][0]["message"]["content"] == "reply 2"
    assert server.requests == [{"messages": ["a"]}, {"messages": ["b"]}]


def test_a_completion_is_streamed_in_chunks_when_the_request_asks() -> None:
    body = completion(arguments='{"text": "hello"}', tool="echo")
    with ChatServer(lambda n, request: body) as server:
        kind, raw = post(server.url, {"stream": True, "stream_options": {"include_usage": True}})
    assert kind == "text/event-stream"
    data = events(raw)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(item) for item in data[:-1]]
    pieces = [
        call["function"]["arguments"]
        for chunk in chunks
        for choice in chunk["choices"]
        for call in choice["delta"].get("tool_calls", ())
    ]
    assert "".join(pieces) == '{"text": "hello"}'
    assert chunks[-1]["usage"] == json.loads(body)["usage"]


def test_an_anthropic_message_streams_as_named_events() -> None:
    message = anthropic_message("hi there", input_tokens=5, output_tokens=2)
    with ChatServer(lambda n, body: anthropic_stream(message)) as server:
        _, raw = post(server.url, {})
    names = [line[7:] for line in raw.decode().splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    deltas = [json.loads(item).get("delta", {}).get("text", "") for item in events(raw)]
    assert "".join(deltas) == "hi there"


def test_a_request_without_a_reply_waits_until_released() -> None:
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            post(server.url, {}, timeout=60)
        except Exception as exc:  # the server closes the connection without answering
            failed.append(exc)

    with ChatServer(lambda n, body: None) as server:
        asking = threading.Thread(target=ask)
        asking.start()
        assert server.arrived.wait(30)
        assert asking.is_alive()
        server.release.set()
        asking.join(30)
    assert not asking.is_alive()
    assert len(failed) == 1


def test_a_stream_can_carry_an_error_status_and_headers() -> None:
    error = SSE([("error", '{"type": "overloaded"}')], done=False, status=529)
    error.headers["Retry-After"] = "0"
    with ChatServer(lambda n, body: error) as server:
        try:
            post(server.url, {})
        except urllib.error.HTTPError as exc:
            assert exc.code == 529
            assert exc.headers["Retry-After"] == "0"
            assert events(exc.read()) == ['{"type": "overloaded"}']
        else:
            raise AssertionError("a 529 stream must fail the request")


def test_routes_answer_by_method_and_path_and_the_rest_is_a_noted_404() -> None:
    seen: list[Request] = []

    def models(request: Request) -> Response:
        seen.append(request)
        return Response(b'{"data": []}', headers={"X-Served-By": "route"})

    def count(request: Request) -> Response:
        seen.append(request)
        return Response(json.dumps({"tokens": len(request.json()["text"])}).encode(), status=201)

    routes = {"GET /v1/models": models, "POST /v1/count": count}
    with ChatServer(lambda n, body: completion(f"reply {n}"), routes=routes) as server:
        with urllib.request.urlopen(f"{server.url}/v1/models?limit=5", timeout=30) as listed:
            assert listed.headers["X-Served-By"] == "route"
            assert json.loads(listed.read()) == {"data": []}
        request = urllib.request.Request(
            f"{server.url}/v1/count", data=b'{"text": "four"}', headers={"X-Key": "k"}
        )
        with urllib.request.urlopen(request, timeout=30) as counted:
            assert counted.status == 201
            assert json.loads(counted.read()) == {"tokens": 4}
        _, other = post(f"{server.url}/v1/chat/completions", {"messages": []})
        try:
            urllib.request.urlopen(f"{server.url}/v1/files", timeout=30)
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
        else:
            raise AssertionError("a path without a route must be a 404")
    assert [(r.method, r.path) for r in seen] == [
        ("GET", "/v1/models?limit=5"),
        ("POST", "/v1/count"),
    ]
    assert seen[1].headers["X-Key"] == "k"
    assert json.loads(other)["choices"][0]["message"]["content"] == "reply 1"
    assert server.requests == [{"messages": []}]
    assert server.unrouted == ["GET /v1/files"]


def test_without_a_reply_only_the_routes_are_served() -> None:
    routes = {"POST /v1/messages": lambda request: Response(b"{}")}
    with ChatServer(routes=routes) as server:
        assert post(f"{server.url}/v1/messages", {})[1] == b"{}"
        try:
            post(f"{server.url}/v1/chat/completions", {})
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
            assert json.loads(exc.read())["error"]["type"] == "not_found_error"
        else:
            raise AssertionError("a POST without a route or a reply must be a 404")
    assert server.unrouted == ["POST /v1/chat/completions"]
    assert server.requests == []


def test_a_request_body_nested_too_deeply_is_a_value_error() -> None:
    deep = Request("POST", "/", {}, b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        deep.json()
