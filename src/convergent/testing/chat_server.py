"""A chat server on loopback for tests: real HTTP, scripted replies, streamed or whole.

It speaks OpenAI's chat completions, and streams them as server-sent events when a
request asks for ``stream``: a scripted completion is cut into chunks the way OpenAI
sends them (`openai_stream`). `anthropic_stream` does the same for an Anthropic
message (`anthropic_message` makes one of text), and a reply may be any `SSE` (an
error event, a stream cut short...).
Routes answer other methods and paths (a model list, a token count, a whole API).

Example:
    >>> from convergent.models import OpenAIChatModel
    >>> with ChatServer(lambda n, body: completion("hello")) as server:
    ...     model = OpenAIChatModel("any", base_url=server.url + "/v1", api_key="none")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from convergent._json import load_json


@dataclass
class SSE:
    """A streamed answer: server-sent events, sent and flushed one at a time."""

    events: list[tuple[str | None, str]]
    """``(event name or None, data)`` in order."""
    done: bool = True
    """End with OpenAI's ``data: [DONE]``."""
    hold: threading.Event | None = None
    """Wait for this before sending the event at ``hold_at``."""
    hold_at: int = 0
    """Which event waits for ``hold``."""
    status: int = 200
    """The HTTP status sent before the events."""
    headers: dict[str, str] = field(default_factory=dict)
    """More response headers."""
    pace: float = 0.0
    """Seconds between bytes: when set, the events trickle out one byte at a time
    (until the client goes away or the server is stopped)."""


@dataclass
class Response:
    """A whole JSON answer, with a status and headers of your choice."""

    body: bytes
    """The JSON body."""
    status: int = 200
    """The HTTP status."""
    headers: dict[str, str] = field(default_factory=dict)
    """More response headers."""


Answer = bytes | SSE | Response | None
"""A JSON body (status 200), a stream, a `Response`, or None (no answer until released)."""

Reply = Callable[[int, dict[str, Any]], Answer]
"""``(request number from 1, request body) -> answer``."""


@dataclass(frozen=True)
class Request:
    """One request as it arrived, for a route."""

    method: str
    """``GET``, ``POST``..."""
    path: str
    """The path, query included (``/v1/messages?beta=true``)."""
    headers: dict[str, str]
    """The request headers, names as sent."""
    body: bytes
    """The raw body (empty when none was sent)."""

    def json(self) -> Any:
        """The body parsed as JSON; raises `ValueError` when it is not JSON or too deep."""
        return load_json(self.body)


Route = Callable[[Request], Answer]
"""Answers the requests of one method and path."""


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def openai_stream(
    completion_body: bytes, *, include_usage: bool = True, piece: int = 4, done: bool = True
) -> SSE:
    """A chat completion as OpenAI streams it.

    Its text and each call's arguments come in ``piece``-character chunks, then the
    finish reason, then the usage if ``include_usage``.

    Args:
        completion_body: The whole completion, as `completion` writes it.
        include_usage: End with a chunk that holds the usage.
        piece: Characters per chunk.
        done: End with ``data: [DONE]``.
    """
    body = json.loads(completion_body)
    head = {k: body[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str | None, str]:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
        return None, json.dumps({**head, "choices": choices, "usage": None})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": text}) for text in _pieces(message.get("content") or "", piece)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        start = {"index": index, "id": call["id"], "type": "function"}
        start["function"] = {"name": function["name"], "arguments": ""}
        events.append(chunk({"tool_calls": [start]}))
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]})
            for text in _pieces(function["arguments"], piece)
        ]
    events.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        events.append((None, json.dumps({**head, "choices": [], "usage": body["usage"]})))
    return SSE(events, done=done)


def _event(name: str, **data: Any) -> tuple[str, str]:
    return name, json.dumps({"type": name, **data})


def anthropic_message(
    text: str, *, input_tokens: int = 3, output_tokens: int = 1, model: str = "claude-sonnet-5-5"
) -> dict[str, Any]:
    """An Anthropic Messages API reply of plain text, whole (`anthropic_stream` streams it).

    Args:
        text: The reply's text.
        input_tokens: The request's tokens, as the reply reports them.
        output_tokens: The reply's tokens.
        model: The model the reply names.
    """
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def anthropic_stream(message: dict[str, Any], *, piece: int = 4) -> SSE:
    """An Anthropic message as the Messages API streams it.

    ``message_start`` with the input tokens, each block started, filled in
    ``piece``-character deltas and stopped, then ``message_delta`` with the stop reason
    and the output tokens.

    Args:
        message: The whole message, as the Messages API returns it.
        piece: Characters per delta.
    """
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}
    events: list[tuple[str | None, str]] = [_event("message_start", message=start)]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            kind, key, text = "text_delta", "text", block["text"]
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            kind, key, text = "input_json_delta", "partial_json", json.dumps(block["input"])
        events.append(_event("content_block_start", index=index, content_block=opened))
        events += [
            _event("content_block_delta", index=index, delta={"type": kind, key: part})
            for part in _pieces(text, piece)
        ]
        events.append(_event("content_block_stop", index=index))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": message["usage"]["output_tokens"]}
    events.append(_event("message_delta", delta=delta, usage=usage))
    events.append(_event("message_stop"))
    return SSE(events, done=False)


def completion(
    content: str | None = None, *, arguments: str | None = None, tool: str = "echo"
) -> bytes:
    """An OpenAI chat completion body: text, or one call of ``tool`` with raw ``arguments``.

    Args:
        content: The reply's text.
        arguments: The call's arguments as the model wrote them (JSON, or not).
        tool: The name of the tool called.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if arguments is not None:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": tool, "arguments": arguments},
            }
        ]
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": "tool_calls" if arguments is not None else "stop",
    }
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "stub"}
    return json.dumps({**body, "choices": [choice], "usage": usage}).encode()


class _Handler(BaseHTTPRequestHandler):
    """Answers one connection's requests for `stub`."""

    stub: ChatServer

    def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request(self.command, self.path, dict(self.headers), body)
        self.stub.arrived.set()
        self._send(self.stub._answer(request))

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # noqa: N815

    def _send(self, answer: Answer) -> None:
        if answer is None:
            self.stub.release.wait(60)
        elif isinstance(answer, SSE):
            self._stream(answer)
        else:
            whole = answer if isinstance(answer, Response) else Response(answer)
            self.send_response(whole.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(whole.body)))
            for header, value in whole.headers.items():
                self.send_header(header, value)
            self.end_headers()
            self.wfile.write(whole.body)

    def _stream(self, answer: SSE) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        for header, value in answer.headers.items():
            self.send_header(header, value)
        self.end_headers()
        events = list(answer.events)
        if answer.done:
            events.append((None, "[DONE]"))
        try:
            for position, (name, data) in enumerate(events):
                if answer.hold is not None and position == answer.hold_at:
                    answer.hold.wait(60)
                head = f"event: {name}\n" if name else ""
                self._write(f"{head}data: {data}\n\n".encode(), answer.pace)
        except (BrokenPipeError, ConnectionResetError):
            self.stub.dropped.set()

    def _write(self, data: bytes, pace: float) -> None:
        if not pace:
            self.wfile.write(data)
            self.wfile.flush()
            return
        for byte in data:
            if self.stub.release.wait(pace):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


class ChatServer:
    """Answers each POST with ``reply(n, body)``, or by route; ``with`` starts and stops it.

    A JSON reply to a request that asks for ``stream`` is sent as `openai_stream`.
    `routes` serve other endpoints, or the whole API: a request whose method and path
    name a route (``"GET /v1/models"``, query left out) is answered by it; any other
    POST by ``reply``; anything else with a 404, noted in `unrouted`.

    Args:
        reply: Makes the answer to each request from its number and its JSON body.
        routes: Answers by ``"METHOD /path"``, each made from the whole `Request`.
    """

    def __init__(
        self, reply: Reply | None = None, *, routes: Mapping[str, Route] | None = None
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        """The JSON body of every request ``reply`` answered, in order of arrival."""
        self.unrouted: list[str] = []
        """``METHOD path`` of every request nothing here answers (each got a 404)."""
        self.arrived = threading.Event()
        """Set when the first request arrives."""
        self.release = threading.Event()
        """Set it to let requests whose reply is None end (also set on exit)."""
        self.dropped = threading.Event()
        """Set when a client went away before its streamed answer was sent."""
        self._reply = reply
        self._routes = dict(routes or {})
        self.server = ThreadingHTTPServer(
            ("127.0.0.1", 0), type("Handler", (_Handler,), {"stub": self})
        )
        """The HTTP server, on a free port of the loopback interface."""
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        """Where the server listens, without a path (OpenAI clients want ``url + "/v1"``)."""
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _answer(self, request: Request) -> Answer:
        route = self._routes.get(f"{request.method} {request.path.split('?')[0]}")
        if route is not None:
            return route(request)
        if request.method == "POST" and self._reply is not None:
            body = request.json()
            self.requests.append(body)
            answer = self._reply(len(self.requests), body)
            if isinstance(answer, bytes) and body.get("stream"):
                usage = (body.get("stream_options") or {}).get("include_usage", False)
                return openai_stream(answer, include_usage=usage)
            return answer
        self.unrouted.append(f"{request.method} {request.path}")
        error = {"type": "not_found_error", "message": f"{request.path} is not served here"}
        return Response(json.dumps({"type": "error", "error": error}).encode(), status=404)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
