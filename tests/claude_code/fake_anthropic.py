"""A fake Anthropic Messages API on loopback, and a trap for any other outbound traffic.

`FakeAnthropic` answers ``POST /v1/messages`` (streamed as server-sent events, or as
one JSON body), ``POST /v1/messages/count_tokens`` and ``GET /v1/models`` from a script:
a list of `Reply` values consumed in order, or a function of the `MessagesRequest`.
It records every request, so a test can assert what a client sent (for example that a
hook's block reason reached the model). A request past the end of the script, a
function that raises, or a path it does not serve is answered with an error and kept
in `FakeAnthropic.problems`, which a test asserts empty.

`OutboundTrap` is an HTTP proxy that forwards nothing: point ``HTTPS_PROXY`` and
``HTTP_PROXY`` at it (with ``NO_PROXY`` naming loopback) and every request a client
tries to send anywhere but the fake lands in `OutboundTrap.attempts` instead of the
internet.
"""

from __future__ import annotations

import itertools
import json
import socketserver
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = [
    "FakeAnthropic",
    "MessagesRequest",
    "OutboundTrap",
    "Reply",
    "Script",
    "Text",
    "ToolUse",
    "text",
    "tool_use",
]


@dataclass(frozen=True, slots=True)
class Text:
    """A text content block of a reply."""

    text: str
    """The text the model "says"."""


_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A ``tool_use`` content block of a reply."""

    name: str
    """The tool to call, e.g. ``Bash`` or ``Agent``."""
    input: dict[str, Any]
    """The tool's arguments (streamed as ``input_json_delta`` pieces)."""
    id: str = field(default_factory=lambda: f"toolu_fake_{next(_ids):04d}")
    """The call's id, echoed back in the ``tool_result``."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One model response."""

    content: Sequence[Text | ToolUse]
    """Its content blocks, in order."""
    stop_reason: str | None = None
    """``end_turn`` or ``tool_use``; by default ``tool_use`` when a block calls a tool."""
    input_tokens: int = 20
    """Reported usage."""
    output_tokens: int = 5
    """Reported usage."""

    @property
    def effective_stop_reason(self) -> str:
        """The stop reason sent to the client."""
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.content) else "end_turn"


def text(words: str) -> Reply:
    """A reply that only says ``words`` (no tool calls: the agent's turn ends)."""
    return Reply([Text(words)])


def tool_use(name: str, arguments: dict[str, Any], *, say: str | None = None) -> Reply:
    """A reply that calls one tool, optionally after a sentence of text."""
    blocks: list[Text | ToolUse] = [Text(say)] if say else []
    return Reply([*blocks, ToolUse(name, arguments)])


@dataclass(frozen=True, slots=True)
class MessagesRequest:
    """One request to ``/v1/messages`` as the client sent it."""

    path: str
    """The request path, query included (``/v1/messages?beta=true``)."""
    headers: dict[str, str]
    """Request headers (names as sent)."""
    body: dict[str, Any]
    """The JSON body: ``model``, ``system``, ``messages``, ``tools``, ``stream``..."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation sent."""
        return list(self.body.get("messages") or [])

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered to the model."""
        return [str(tool.get("name")) for tool in self.body.get("tools") or []]

    @property
    def system_text(self) -> str:
        """The system prompt's text, blocks joined."""
        system = self.body.get("system") or ""
        if isinstance(system, str):
            return system
        return "\n".join(str(block.get("text", "")) for block in system)

    def texts(self, role: str | None = "user") -> list[str]:
        """Every text of ``role``'s messages in order (all roles for None).

        Tool results' text is included, and so are the ``system`` messages Claude Code
        puts among the messages (hook feedback arrives in one).
        """
        return [
            piece
            for message in self.messages
            if role is None or message.get("role") == role
            for piece in _texts(message.get("content"))
        ]

    def mentions(self, words: str) -> bool:
        """Whether any message (any role) contains ``words``."""
        return any(words in piece for piece in self.texts(None))

    @property
    def last_user_texts(self) -> list[str]:
        """The texts of the final user message (what the model answers next)."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return _texts(users[-1].get("content")) if users else []


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    found: list[str] = []
    for block in content or []:
        if block.get("type") == "text":
            found.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            found.extend(_texts(block.get("content")))
    return found


Script = Sequence[Reply] | Callable[[MessagesRequest], Reply]
"""Replies in order, or a function choosing the reply for each request."""


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _block_events(index: int, block: Text | ToolUse) -> Iterator[bytes]:
    if isinstance(block, Text):
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": block.text}]
    else:
        start = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
        whole = json.dumps(block.input)
        middle = len(whole) // 2  # two pieces, so the client has to join partial JSON
        deltas = [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in (whole[:middle], whole[middle:])
        ]
    yield _sse(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for delta in deltas:
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})


def _block_json(block: Text | ToolUse) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeAnthropic) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
        if self.path.split("?")[0] != "/v1/models":
            self._unknown()
            return
        self.server.fake.other_requests.append(f"GET {self.path}")
        model = {
            "type": "model",
            "id": "claude-fake-1",
            "display_name": "Fake",
            "created_at": "2026-01-01T00:00:00Z",
        }
        self._json(200, {"data": [model], "has_more": False, "first_id": None, "last_id": None})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        route = self.path.split("?")[0]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.server.fake.problems.append(f"POST {self.path}: body is not a JSON object")
            self._error(400, "invalid_request_error", "body is not a JSON object")
        elif route == "/v1/messages/count_tokens":
            self.server.fake.other_requests.append(f"POST {self.path}")
            self._json(200, {"input_tokens": 100})
        elif route == "/v1/messages":
            self._messages(MessagesRequest(self.path, dict(self.headers), body))
        else:
            self._unknown()

    def _messages(self, request: MessagesRequest) -> None:
        fake = self.server.fake
        reply = fake.next_reply(request)
        if isinstance(reply, str):
            fake.problems.append(reply)
            # 400 is not retried, so the client ends instead of looping
            self._error(400, "invalid_request_error", reply)
            return
        message = _message(
            f"msg_fake_{len(fake.requests):04d}", str(request.body.get("model", "fake")), reply
        )
        if request.body.get("stream"):
            self._stream(message, reply)
        else:
            self._json(200, message)

    def _stream(self, message: dict[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        start = {**message, "content": [], "stop_reason": None}
        start["usage"] = {**message["usage"], "output_tokens": 1}
        self.wfile.write(_sse("message_start", {"type": "message_start", "message": start}))
        for index, block in enumerate(reply.content):
            for event in _block_events(index, block):
                self.wfile.write(event)
                self.wfile.flush()
        delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
        usage = {"output_tokens": reply.output_tokens}
        self.wfile.write(
            _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        )
        self.wfile.write(_sse("message_stop", {"type": "message_stop"}))
        self.wfile.flush()
        self.close_connection = True

    def _json(self, status: int, data: dict[str, Any]) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._json(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _unknown(self) -> None:
        self.server.fake.problems.append(f"{self.command} {self.path}: not served by the fake")
        self._error(404, "not_found_error", f"{self.path} is not served here")

    def log_message(self, format: str, *args: object) -> None:
        pass


def _message(message_id: str, model: str, reply: Reply) -> dict[str, Any]:
    """The whole response as a non-streaming ``message`` object."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_block_json(block) for block in reply.content],
        "stop_reason": reply.effective_stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


class _Serving:
    """A server on a background thread while the ``with`` block runs; `url` reaches it."""

    def __init__(self, server: socketserver.TCPServer) -> None:
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)


class FakeAnthropic(_Serving):
    """The Messages API on ``127.0.0.1`` (random port), answering from a script.

    Use as a context manager; `url` is the ``ANTHROPIC_BASE_URL`` to give a client.
    """

    def __init__(self, script: Script) -> None:
        self.requests: list[MessagesRequest] = []
        """Every ``/v1/messages`` request, in arrival order."""
        self.other_requests: list[str] = []
        """``METHOD path`` of every other request served (count_tokens, models)."""
        self.problems: list[str] = []
        """Requests the script could not answer, or paths the fake does not serve."""
        self._script = script
        self._served = 0
        self._lock = threading.Lock()
        super().__init__(_Server(self))

    def unconsumed(self) -> int:
        """Scripted replies never requested (0 for a function script)."""
        if callable(self._script):
            return 0
        return len(self._script) - self._served

    def next_reply(self, request: MessagesRequest) -> Reply | str:
        """Record ``request``; return its scripted reply, or the problem that prevents one."""
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            if callable(self._script):
                try:
                    return self._script(request)
                except Exception as exc:  # the test sees it in `problems`
                    return f"request {number}: the script raised {type(exc).__name__}: {exc}"
            if self._served >= len(self._script):
                return f"request {number}: past the end of the script ({self._served} replies)"
            self._served += 1
            return self._script[self._served - 1]


class OutboundTrap(_Serving):
    """A proxy on loopback that records every request and forwards none (403)."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        """The request line of everything that arrived (``CONNECT host:443 HTTP/1.1``)."""
        trap = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(8192).decode("latin-1").strip()
                trap.attempts.append(line or "(connection without a request line)")
                self.wfile.write(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        super().__init__(server)
