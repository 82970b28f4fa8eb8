"""Durable runs with MCP servers: the server of each call is stored, resume restarts them."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest
from mcp_helpers import descendants, stdio_testing, time_server

from convergent import AgentSpec, Limits, StopReason, UserError, build_agent, resume
from convergent.durability.sqlite import RunStore
from convergent.mcp import mcp_config
from convergent.testing import call, write_script

if importlib.util.find_spec("mcp") is None:  # found, not imported: collecting stays light
    pytest.skip("needs the mcp extra", allow_module_level=True)


def sources(db: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, source FROM finished_calls ORDER BY cycle, position")
        return [(str(name), source) for name, source in rows]


@pytest.mark.slow
async def test_a_stored_run_records_servers_and_resumes_with_them_restarted(tmp_path: Path) -> None:
    before = descendants()
    model = write_script(
        tmp_path / "script.json",
        [call("pid"), call("calculator", expression="1+1")],
        "a process id and 2, so far",  # the answer after the max_cycles stop
        [call("pid"), call("get_current_time", timezone="UTC")],
        "done",
    )
    spec = AgentSpec(
        model=model,
        tools=("calculator",),
        workspace=str(tmp_path),
        mcp_servers=mcp_config([stdio_testing(), time_server()]),
        limits=Limits(max_cycles=1),
    )
    db = tmp_path / "runs.db"
    with RunStore(db) as store:
        agent = build_agent(spec)
        first = await agent.run("x", run_id="durable", store=store)
        assert first.stop_reason is StopReason.MAX_CYCLES
        assert descendants() - before == set()
        second = await resume("durable", store=store, limits=Limits(max_cycles=5))
    assert second.stop_reason is StopReason.COMPLETED
    pid_before, _, pid_after, now = second.tool_calls
    assert pid_before.ok and pid_after.ok and now.ok
    assert pid_before.result != pid_after.result  # a new server process for the new run
    assert sources(db) == [
        ("pid", "mcp:testing"),
        ("calculator", None),
        ("pid", "mcp:testing"),
        ("get_current_time", "mcp:time"),
    ]
    assert descendants() - before == set()


def test_a_spec_with_a_bad_server_entry_is_refused(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", "done")
    spec = AgentSpec(model=model, workspace=str(tmp_path), mcp_servers={"a": {"args": []}})
    with pytest.raises(UserError, match=r"^agent spec: mcpServers.a needs a command"):
        build_agent(spec)
