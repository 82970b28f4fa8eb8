"""An OpenAI-compatible chat server on loopback for tests: real HTTP, scripted replies."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Reply = Callable[[int, dict[str, Any]], bytes | None]
"""``(request number from 1, request body) -> response body``; None never answers."""


def completion(content: str | None = None, *, arguments: str | None = None) -> bytes:
    """A chat completion body: text, or one ``echo`` tool call with raw ``arguments``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if arguments is not None:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "echo", "arguments": arguments},
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


class ChatStub:
    """Answers each POST with ``reply(n, body)``; ``with`` starts and stops it."""

    def __init__(self, reply: Reply) -> None:
        self.requests: list[dict[str, Any]] = []
        self.arrived = threading.Event()
        self.release = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                stub.arrived.set()
                answer = reply(len(stub.requests), body)
                if answer is None:
                    stub.release.wait(60)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ChatStub:
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
