"""A fake Anthropic Messages API on loopback, and a trap for any other outbound traffic.

`FakeAnthropic` answers ``POST /v1/messages`` (streamed as server-sent events, or as
one JSON body), ``POST /v1/messages/count_tokens`` and ``GET /v1/models`` from a script:
a list of `Reply` values consumed in order, or a function of the `MessagesRequest`.
It serves them as routes of `convergent.testing.chat_server.ChatServer`, which streams
each reply as `anthropic_stream` does.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from convergent.testing.chat_server import SSE, ChatServer, Request, Response, anthropic_stream

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


_PIECE = 16
"""Characters per streamed delta: longer texts and tool inputs arrive in pieces to join."""


def _block_json(block: Text | ToolUse) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}


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


def _json(data: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(data).encode(), status=status)


def _error(status: int, kind: str, message: str) -> Response:
    return _json({"type": "error", "error": {"type": kind, "message": message}}, status)


class FakeAnthropic:
    """The Messages API on ``127.0.0.1`` (random port), answering from a script.

    Use as a context manager; `url` is the ``ANTHROPIC_BASE_URL`` to give a client.
    """

    def __init__(self, script: Script) -> None:
        self.requests: list[MessagesRequest] = []
        """Every ``/v1/messages`` request, in arrival order."""
        self.other_requests: list[str] = []
        """``METHOD path`` of every other request served (count_tokens, models)."""
        self._problems: list[str] = []
        self._script = script
        self._served = 0
        self._lock = threading.Lock()
        self._server = ChatServer(
            routes={
                "POST /v1/messages": self._messages,
                "POST /v1/messages/count_tokens": self._count_tokens,
                "GET /v1/models": self._models,
            }
        )
        self.url = self._server.url
        """Where the fake listens (``ANTHROPIC_BASE_URL``)."""

    @property
    def problems(self) -> list[str]:
        """Requests the script could not answer, then paths the fake does not serve."""
        unserved = [f"{line}: not served by the fake" for line in self._server.unrouted]
        return [*self._problems, *unserved]

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

    def _messages(self, request: Request) -> Response | SSE:
        body = self._body(request)
        if body is None:
            return _error(400, "invalid_request_error", "body is not a JSON object")
        reply = self.next_reply(MessagesRequest(request.path, request.headers, body))
        if isinstance(reply, str):
            self._problems.append(reply)
            # 400 is not retried, so the client ends instead of looping
            return _error(400, "invalid_request_error", reply)
        message = _message(
            f"msg_fake_{len(self.requests):04d}", str(body.get("model", "fake")), reply
        )
        return anthropic_stream(message, piece=_PIECE) if body.get("stream") else _json(message)

    def _count_tokens(self, request: Request) -> Response:
        if self._body(request) is None:
            return _error(400, "invalid_request_error", "body is not a JSON object")
        self.other_requests.append(f"POST {request.path}")
        return _json({"input_tokens": 100})

    def _models(self, request: Request) -> Response:
        self.other_requests.append(f"GET {request.path}")
        model = {
            "type": "model",
            "id": "claude-fake-1",
            "display_name": "Fake",
            "created_at": "2026-01-01T00:00:00Z",
        }
        return _json({"data": [model], "has_more": False, "first_id": None, "last_id": None})

    def _body(self, request: Request) -> dict[str, Any] | None:
        """The request's JSON object, or None (kept in `problems`) when it sent none."""
        try:
            body = request.json() if request.body else {}
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._problems.append(f"POST {request.path}: body is not a JSON object")
            return None
        return body

    def __enter__(self) -> Self:
        self._server.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.__exit__(None, None, None)


class OutboundTrap:
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

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        """The proxy's URL, for ``HTTPS_PROXY`` and ``HTTP_PROXY``."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
