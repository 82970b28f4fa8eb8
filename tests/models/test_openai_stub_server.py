"""OpenAIChatModel against a real HTTP server on loopback, across event loops."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from convergent import Agent, OpenAIChatModel, StopReason

from ._replay import EXCHANGES


@pytest.fixture
def stub_url() -> Iterator[str]:
    answer = (EXCHANGES / "openai_answer.json").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert body["messages"][-1]["role"] == "user"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_one_model_serves_consecutive_event_loops(stub_url: str) -> None:
    agent = Agent(OpenAIChatModel("stub", base_url=stub_url, max_retries=0))
    first = agent.run_sync("one")
    second = agent.run_sync("two")
    assert first.stop_reason is StopReason.COMPLETED
    assert second.output == "17 * 23 = 391."
