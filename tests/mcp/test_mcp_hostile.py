"""Faulty and hostile MCP servers: schemas, answers and processes that must not hurt the run."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import alive, listed, raw_server, stdio_testing

from convergent import Agent, ModelResponse, ScriptedModel, StopReason, ToolCall
from convergent.mcp import MCPServer
from convergent.testing import answer, call, scripted, step

if importlib.util.find_spec("mcp") is None:  # found, not imported: collecting stays light
    pytest.skip("needs the mcp extra", allow_module_level=True)


async def run_calls(server: MCPServer, calls: Sequence[ToolCall]) -> list[Any]:
    agent = Agent(scripted(step(*calls), "done"), mcp_servers=[server])
    result = await agent.run("x")
    assert result.stop_reason is StopReason.COMPLETED
    return list(result.tool_calls)


def end_all(pids: Sequence[int]) -> None:
    """Kill what a failing test left behind, so it leaves nothing running."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


# --- the schema a server lists ----------------------------------------------------------


async def test_references_resolve_only_within_the_schema(tmp_path: Path) -> None:
    requests: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    integer = tmp_path / "integer.json"
    integer.write_text('{"type": "integer"}')
    web = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=web.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{web.server_address[1]}/integer.json"
        plan = {
            "tools": [
                listed("remote", {"n": {"$ref": url}}),
                listed("file", {"n": {"$ref": integer.as_uri()}}),
                listed(
                    "local",
                    {"n": {"$ref": "#/$defs/number"}},
                    **{"$defs": {"number": {"type": "integer"}}},
                ),
            ]
        }
        remote, on_disk, local = await run_calls(
            raw_server(tmp_path, plan),
            [call("remote", n="text"), call("file", n="text"), call("local", n="text")],
        )
    finally:
        web.shutdown()
        web.server_close()
        thread.join(timeout=10)
    assert requests == []
    # an unresolvable schema is left to the server, which answers
    assert remote.ok and json.loads(remote.result) == {"n": "text"}
    assert on_disk.ok and json.loads(on_disk.result) == {"n": "text"}
    assert local.outcome == "invalid" and "n: 'text' is not of type 'integer'" in local.result


# --- what a server answers -------------------------------------------------------------


async def test_an_answer_nested_too_deeply_fails_its_call_at_once(tmp_path: Path) -> None:
    plan = {"tools": [listed("deep", {})], "results": {"deep": {"nested": 600}}}
    (deep,) = await run_calls(raw_server(tmp_path, plan, timeout=30.0), [call("deep")])
    assert deep.outcome == "failed"
    assert deep.result == (
        "deep failed: MCP server 'raw' sent an unusable answer: the answer is nested too deeply"
    )


async def test_answers_over_the_size_limit_are_a_clear_tool_error(tmp_path: Path) -> None:
    plan = {
        "tools": [listed("big", {}), listed("huge", {})],
        "results": {"big": {"text": 5_000_000}, "huge": {"text": 20_000_000}},
    }
    big, huge = await run_calls(raw_server(tmp_path, plan), [call("big"), call("huge")])
    assert big.ok and big.result == "x" * 5_000_000
    assert huge.outcome == "failed"
    assert huge.result == (
        "huge failed: MCP server 'raw' sent an unusable answer: the answer is larger than 16 MiB"
    )


# --- the processes a server starts -------------------------------------------------------


@pytest.mark.slow
async def test_processes_a_tool_started_end_with_the_run() -> None:
    pids: list[int] = []
    try:
        in_group, left_group = await run_calls(
            stdio_testing(), [call("spawn"), call("spawn", leave_group=True)]
        )
        pids = [int(in_group.result), int(left_group.result)]
        assert not alive(pids[0])
        assert not alive(pids[1])
    finally:
        end_all(pids)


@pytest.mark.slow
async def test_processes_of_a_crashed_server_end_when_it_crashes() -> None:
    started: list[int] = []

    def model(messages: list[Any], tools: object) -> ModelResponse:
        results = [message.content for message in messages if message.role == "tool"]
        if not results:
            return step(call("spawn"))
        if len(results) == 1:
            started.append(int(results[0]))
            return step(call("crash"))
        if len(results) == 2:
            return step(call("w_gone", pid=started[0], within=20))
        return answer("done")

    servers = [stdio_testing(), stdio_testing("w", prefix="w")]
    agent = Agent(ScriptedModel(model), mcp_servers=servers)
    try:
        result = await agent.run("x")
    finally:
        end_all(started)
    spawn, crash, gone = result.tool_calls
    assert crash.outcome == "failed" and "closed the connection" in crash.result
    assert gone.result == "true"  # ended while the run went on, not only at its end
