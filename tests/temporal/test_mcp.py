"""MCP servers in Temporal runs: started on the workers, their tools called as activities."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from convergent import AgentSpec, StopReason, UserError
from convergent.mcp import MCPServer, mcp_config
from convergent.spec import AgentToolSpec
from convergent.state import RunState
from convergent.temporal import DevServer, TemporalRunner, make_worker
from convergent.testing import call, write_script

from .conftest import WorkerProcess, recipe, replayer

pytest.importorskip("mcp")
pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal, pytest.mark.slow]

SERVER = Path(__file__).parents[1] / "mcp" / "server.py"
"""The MCP server of the MCP tests (the SDK's, with ``echo`` and ``pid`` tools)."""


def the_testing_server() -> dict[str, Any]:
    return mcp_config([MCPServer.stdio("testing", sys.executable, [str(SERVER)])])


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_run_calls_mcp_tools_on_a_worker_that_starts_the_server_once(
    tmp_path: Path, runner: TemporalRunner
) -> None:
    responses = [call("echo", text="hi"), call("pid"), call("calculator", expression="2+2")]
    spec = recipe(tmp_path, [*responses, call("pid"), "done"], mcp_servers=the_testing_server())
    async with make_worker(runner.client, runner.task_queue):
        run = await runner.start(spec, "use the server", run_id="mcp-on-worker")
        result = await run.result()
        assert result.stop_reason is StopReason.COMPLETED
        assert [(r.name, r.ok) for r in result.tool_calls] == [
            ("echo", True),
            ("pid", True),
            ("calculator", True),
            ("pid", True),
        ]
        assert result.tool_calls[0].result == "hi"
        first, second = int(result.tool_calls[1].result), int(result.tool_calls[3].result)
        # one server for the worker, serving every call, still up between runs
        assert first == second
        assert alive(first)
        # the workflow saw the server's tools through the worker's description of the agent
        history = await run.handle.fetch_history()
        outcome = await replayer(runner).replay_workflow(history, raise_on_replay_failure=False)
        assert outcome.replay_failure is None
    # the worker stopped its server when it shut down
    assert not alive(first)


async def test_a_server_that_cannot_start_fails_the_run_in_one_line(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    ghost = mcp_config([MCPServer.stdio("ghost", "no-such-mcp-server")])
    run = await runner.start(recipe(tmp_path, ["x"], mcp_servers=ghost), "t", run_id="mcp-ghost")
    with pytest.raises(UserError, match="MCP server 'ghost' failed to start") as failure:
        await run.result()
    assert "\n" not in str(failure.value)


def test_run_with_mcp_on_temporal_from_the_command_line(
    tmp_path: Path, temporal_server: DevServer
) -> None:
    queue = f"mcp-{uuid.uuid4().hex[:8]}"
    db = tmp_path / ".convergent" / "runs.db"
    worker = WorkerProcess(temporal_server.address, queue, db, cwd=tmp_path)
    try:
        model = write_script(
            tmp_path / "script.json", call("echo", text="from the worker"), call("pid"), "done"
        )
        command = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"
        proc = subprocess.run(
            [
                *(str(Path(sys.executable).with_name("convergent")), "run", "t"),
                *("--model", model, "--mcp", command, "--json"),
                *("--temporal", temporal_server.address, "--task-queue", queue),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["stop_reason"] == "completed"
        echo, pid = data["tool_calls"]
        assert (echo["name"], echo["ok"], echo["result"]) == ("echo", True, "from the worker")
        assert (pid["name"], pid["ok"]) == ("pid", True)
        # the server runs on the worker, not in the command that submitted the run
        server = int(pid["result"])
        worker_children = psutil.Process(worker.process.pid).children(recursive=True)
        assert server in {child.pid for child in worker_children}
    finally:
        worker.stop()
    # stopping the worker stopped its server
    assert not alive(server)


async def test_a_child_agent_calls_its_mcp_tools_on_the_worker(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    child = AgentToolSpec(
        name="echoer",
        description="Echoes through its MCP server.",
        agent=AgentSpec(
            model=write_script(tmp_path / "child.json", call("echo", text="deep"), "echoed: deep"),
            tools=(),
            mcp_servers=the_testing_server(),
        ),
    )
    ask = call("echoer", call_id="c1", task="echo deep")
    parent = recipe(tmp_path, [ask, "done"], agents=(child,))
    result = await (await runner.start(parent, "delegate", run_id="mcp-child")).result()
    (record,) = result.tool_calls
    assert record.ok and record.result == "echoed: deep"
    done = await runner.client.get_workflow_handle("mcp-child.1.c1").result()
    assert [r.result for r in RunState.from_jsonable(done["state"]).tool_calls] == ["deep"]
