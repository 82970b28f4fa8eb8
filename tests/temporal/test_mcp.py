"""MCP servers in Temporal runs: started on the workers, their tools called as activities."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest

from convergent import AgentSpec, StopReason, UserError
from convergent.mcp import MCPServer, mcp_config
from convergent.spec import AgentToolSpec
from convergent.state import RunState
from convergent.testing import call, write_script

from .conftest import WorkerProcess, replayer, scripted_spec, wait_for

if TYPE_CHECKING:
    from convergent.temporal import DevServer, TemporalRun, TemporalRunner

if importlib.util.find_spec("mcp") is None:  # found, not imported: collecting stays light
    pytest.skip("needs the mcp extra", allow_module_level=True)
pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal, pytest.mark.slow]

SERVER = Path(__file__).parents[1] / "mcp" / "server.py"
"""The MCP server of the MCP tests (the SDK's, with ``echo`` and ``pid`` tools)."""


def the_testing_server() -> dict[str, Any]:
    return mcp_config([MCPServer.stdio("testing", sys.executable, [str(SERVER)])])


MARK = "CONVERGENT_MCP_SERVER"
"""What marks the processes of a server a worker started (its value begins with its pid)."""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_run_calls_mcp_tools_on_a_worker_that_starts_the_server_once(
    tmp_path: Path, runner: TemporalRunner
) -> None:
    from convergent.temporal import make_worker

    responses = [call("echo", text="hi"), call("pid"), call("calculator", expression="2+2")]
    spec = scripted_spec(
        tmp_path, [*responses, call("pid"), "done"], mcp_servers=the_testing_server()
    )
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
    run = await runner.start(
        scripted_spec(tmp_path, ["x"], mcp_servers=ghost), "t", run_id="mcp-ghost"
    )
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
    parent = scripted_spec(tmp_path, [ask, "done"], agents=(child,))
    result = await (await runner.start(parent, "delegate", run_id="mcp-child")).result()
    (record,) = result.tool_calls
    assert record.ok and record.result == "echoed: deep"
    done = await runner.client.get_workflow_handle("mcp-child.1.c1").result()
    assert [r.result for r in RunState.from_jsonable(done["state"]).tool_calls] == ["deep"]


def servers_of(worker: WorkerProcess, script: Path) -> list[psutil.Process]:
    """The live processes of ``script`` (a server) below the worker process."""
    found = []
    for child in psutil.Process(worker.process.pid).children(recursive=True):
        try:
            if str(script) in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


async def kill_the_server_when_asked(
    run: TemporalRun, question: str, worker: WorkerProcess, script: Path
) -> int:
    """When the run asks ``question``, SIGKILL its server as a crash would; the server's pid.

    It returns once the server no longer runs.
    """
    await wait_for(run, lambda p: p["question"] == question)
    (server,) = servers_of(worker, script)
    os.kill(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while alive(server.pid):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    return server.pid


def left_behind(worker: WorkerProcess) -> list[psutil.Process]:
    """The processes that remain of the worker: its children, and any carrying its mark."""
    found = {}
    if worker.process.poll() is None:
        found = {child.pid: child for child in psutil.Process(worker.process.pid).children(True)}
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARK, "").startswith(f"{worker.process.pid}-"):
                found[process.pid] = process
        except psutil.Error:  # gone meanwhile, or another user's
            continue
    return list(found.values())


async def test_a_server_killed_mid_run_is_started_afresh_by_the_next_call(
    tmp_path: Path, runner: TemporalRunner, temporal_server: DevServer, payload_db: Path
) -> None:
    responses = [
        call("pid"),
        call("spawn", leave_group=True),
        call("ask_user", question="Go on?"),
        call("pid"),
        call("echo", text="still here"),
        call("crash"),
        call("pid"),
        "done",
    ]
    spec = scripted_spec(tmp_path, responses, mcp_servers=the_testing_server())
    worker = WorkerProcess(temporal_server.address, runner.task_queue, payload_db, cwd=tmp_path)
    try:
        run = await runner.start(spec, "use the server", run_id=f"mcp-killed-{uuid.uuid4().hex}")
        first = await kill_the_server_when_asked(run, "Go on?", worker, SERVER)
        await run.answer("yes")
        result = await run.result()
        assert result.stop_reason is StopReason.COMPLETED
        pid, spawn, asked, again, echo, crash, last = result.tool_calls
        assert [r.ok for r in (pid, spawn, asked, again, echo, last)] == [True] * 6
        # the call after the kill started a fresh server, which served the next call too
        assert int(pid.result) == first
        assert int(again.result) != first
        assert echo.result == "still here"
        # a crash during a call fails that call, naming the server; the next starts it again
        assert crash.result == (
            "crash failed: MCP server 'testing' closed the connection during the call "
            "(its last output: about to crash)"
        )
        assert int(last.result) not in (first, int(again.result))
        # nothing is left of the servers that died: not the processes, not what they started
        (serving,) = servers_of(worker, SERVER)
        assert serving.pid == int(last.result)
        assert not alive(int(spawn.result))
        assert [p.pid for p in left_behind(worker)] == [serving.pid]
    finally:
        worker.stop()
    assert left_behind(worker) == []


async def test_a_server_that_cannot_start_again_fails_that_call_and_the_next_tries_again(
    tmp_path: Path, runner: TemporalRunner, temporal_server: DevServer, payload_db: Path
) -> None:
    script = tmp_path / "server.py"
    script.write_bytes(SERVER.read_bytes())
    servers = mcp_config([MCPServer.stdio("testing", sys.executable, [str(script)])])
    responses = [
        call("pid"),
        call("ask_user", question="Broken?"),
        call("echo", text="lost"),
        call("ask_user", question="Mended?"),
        call("echo", text="back"),
        "done",
    ]
    spec = scripted_spec(tmp_path, responses, mcp_servers=servers)
    worker = WorkerProcess(temporal_server.address, runner.task_queue, payload_db, cwd=tmp_path)
    try:
        run = await runner.start(spec, "use the server", run_id=f"mcp-broken-{uuid.uuid4().hex}")
        await kill_the_server_when_asked(run, "Broken?", worker, script)
        script.rename(tmp_path / "moved.py")
        await run.answer("yes")
        await wait_for(run, lambda p: p["question"] == "Mended?")
        (tmp_path / "moved.py").rename(script)
        await run.answer("yes")
        result = await run.result()
        assert result.stop_reason is StopReason.COMPLETED
        _, _, lost, _, back = result.tool_calls
        assert lost.outcome == "failed"
        assert lost.result.startswith(
            "echo failed: MCP server 'testing' failed to start: it exited or closed the "
            "connection before answering (its last output: "
        )
        assert "can't open file" in lost.result and "\n" not in lost.result
        assert (back.outcome, back.result) == ("ok", "back")
        (serving,) = servers_of(worker, script)
        assert [p.pid for p in left_behind(worker)] == [serving.pid]
    finally:
        worker.stop()
    assert left_behind(worker) == []
