"""A provider that echoes the API key back in its error: the key is stored nowhere."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from convergent import Agent, AnthropicModel, OpenAIChatModel, StopReason
from convergent._redact import MASK, known_secrets, redact, secrets_of_url
from convergent.durability.sqlite import RunStore
from convergent.events import JsonlTraceWriter

KEY = "sk-test-0123456789abcdefSECRET"


@pytest.fixture
def echoing_server() -> Iterator[str]:
    """Answers every request with 401 and an error message that repeats the key sent."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
            self.rfile.read(int(self.headers["Content-Length"]))
            sent = self.headers.get("Authorization", "").removeprefix("Bearer ") or (
                self.headers.get("x-api-key", "")
            )
            body = json.dumps(
                {
                    "type": "error",
                    "error": {
                        "type": "authentication_error",
                        "message": f"Incorrect API key provided: {sent}",
                    },
                }
            ).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_an_echoed_key_reaches_no_detail_trace_or_database(
    echoing_server: str, tmp_path: Path, provider: str
) -> None:
    model = (
        OpenAIChatModel("gpt-x", base_url=f"{echoing_server}/v1", api_key=KEY, max_retries=0)
        if provider == "openai"
        else AnthropicModel("claude-x", base_url=echoing_server, api_key=KEY, max_retries=0)
    )
    trace = tmp_path / "trace.jsonl"
    writer = JsonlTraceWriter(trace)
    with RunStore(tmp_path / "runs.db") as store:
        result = await Agent(model, store=store).run("hi", run_id="r", on_event=writer)
    writer.close()
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "Incorrect API key provided" in result.stop_detail
    assert KEY not in result.stop_detail and MASK in result.stop_detail
    assert KEY not in trace.read_text()
    assert KEY.encode() not in stored_bytes(tmp_path)


def stored_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in folder.glob("runs.db*"))


def test_secrets_from_the_environment_and_urls_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-environment-secret")
    secrets = known_secrets(*secrets_of_url("https://user:url-password-1@host/v1"))
    text = "failed for ak-environment-secret at https://user:url-password-1@host/v1"
    assert redact(text, secrets) == f"failed for {MASK} at https://user:{MASK}@host/v1"
    assert redact("short keys like abc are left alone", ["abc"]) == (
        "short keys like abc are left alone"
    )
