"""Many claimants resuming one stored run at the same moment, and a tool that counts runs.

The race tests of the store, the command line and the console share this module:

- `record` is a tool that is not idempotent: each execution appends a line to the file
  ``ran`` in the folder named by ``RACE_DIR``, then holds until the file ``release``
  exists, so the process that won the claim is still running its resumed run while the
  others try to claim it;
- `stopped_run` stores a run (built from a spec, so any process can resume it) that
  stopped ``needs_user``, ``max_cycles``, ``tool_error`` or ``stalled``, whose next
  cycle calls `record`;
- `release_when_settled` lets the holder go once every other claimant has given up.

Run as a script, it is one claimant: it imports everything first, says it is ready
(file ``ready-INDEX``) and waits for a shared lock on the file ``go``, which the test
holds until every claimant is ready, so that all of them reach the claim together::

    python resume_race.py DIR INDEX cli ARGS...                      # convergent ARGS
    python resume_race.py DIR INDEX api RUN_ID DB ANSWER MAX_CYCLES  # convergent.resume
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

import convergent
from convergent import AgentSpec, Limits, StopPolicy, build_agent, tool
from convergent.durability.sqlite import RunStore
from convergent.exceptions import UserError
from convergent.mcp import MCPServer, mcp_config
from convergent.stop import StopReason
from convergent.testing import call, write_script

HERE = Path(__file__).resolve()
RECORD = "resume_race:record"
"""The import path of `record` in a spec (this folder is on the claimants' path)."""
WAIT = 120.0
"""Seconds any wait in a race may take before it gives up (never reached when it works)."""


@tool(timeout=None)
def record(note: str) -> str:
    """Count one execution, then hold until the race is settled.

    Args:
        note: Written with the count.
    """
    folder = Path(os.environ["RACE_DIR"])
    with (folder / "ran").open("a") as out:
        out.write(f"{os.getpid()} {note}\n")
    wait_for(lambda: (folder / "release").exists(), "the release")
    return f"recorded {note}"


SCENARIOS: dict[str, tuple[StopReason, list[Any], dict[str, Any]]] = {
    "needs_user": (
        StopReason.NEEDS_USER,
        [call("ask_user", question="which one?"), call("record", note="resumed"), "done"],
        {},
    ),
    "max_cycles": (
        StopReason.MAX_CYCLES,
        [call("calculator", expression="1+1"), call("record", note="resumed"), "done"],
        {"limits": Limits(max_cycles=1), "policy": StopPolicy(final_answer=False)},
    ),
    "tool_error": (
        StopReason.TOOL_ERROR,
        [call("fail", message="disk full"), call("record", note="resumed"), "done"],
        {"policy": StopPolicy(on_tool_error="stop", final_answer=False)},
    ),
    "stalled": (
        StopReason.STALLED,
        [
            call("calculator", expression="1+1"),
            call("calculator", expression="1+1"),
            call("record", note="resumed"),
            "done",
        ],
        {"policy": StopPolicy(max_repeated_calls=2, notes=0, final_answer=False)},
    ),
}
"""How a run stops, by name: the stop reason, its script, and spec settings (no final
answer and no nudge, so the script's next call is the resumed run's)."""

RESUME_CYCLES = 10
"""Cycles a resumption may add (the ``max_cycles`` run needs more than its spec's)."""


def stopped_run(db: Path, folder: Path, scenario: str, *, servers: bool = False) -> str:
    """Store a run that stopped as ``scenario`` says and calls `record` when resumed.

    With ``servers``, its agent has an MCP server, started again by each resumption.
    """
    reason, script, settings = SCENARIOS[scenario]
    if servers:
        time_server = MCPServer.stdio("time", sys.executable, ["-m", "mcp_server_time"])
        settings = {**settings, "mcp_servers": mcp_config([time_server])}
    run_id = "race"
    spec = AgentSpec(
        model=write_script(folder / "script.json", *script),
        tools=("ask_user", "calculator", "fail", RECORD),
        workspace=str(folder),
        **settings,
    )
    with RunStore(db) as store:
        result = asyncio.run(build_agent(spec).run("race", run_id=run_id, store=store))
    assert result.stop_reason is reason
    return run_id


def resume_limits(store: RunStore, run_id: str) -> Limits:
    """The run's limits with `RESUME_CYCLES` more cycles."""
    return Limits(max_cycles=store.get_run(run_id).cycles + RESUME_CYCLES)


def environment(folder: Path) -> dict[str, str]:
    """The environment of a claimant: this convergent and this module importable."""
    source = Path(convergent.__file__).resolve().parents[1]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(source), str(HERE.parent)]),
        "RACE_DIR": str(folder),
    }


def executions(folder: Path) -> list[str]:
    """The lines `record` wrote, one per execution."""
    ran = folder / "ran"
    return ran.read_text().splitlines() if ran.exists() else []


def assert_resumed_once(db: Path, run_id: str, answer: str | None, claimants: int) -> None:
    """Check that the run completed with one `record` call and only ``answer`` stored.

    Each claimant ``i`` gave the answer ``answer {i}``; no other one may be stored.
    """
    with RunStore(db) as store:
        run = store.get_run(run_id)
        assert run.stop_reason is StopReason.COMPLETED and not run.running
        assert store.query("SELECT result FROM finished_calls WHERE name = 'record'") == [
            ("recorded resumed",)
        ]
        stored = " ".join(
            text
            for table, column in (
                ("messages", "data"),
                ("events", "data"),
                ("finished_calls", "result"),
                ("steering", "text"),
                ("questions", "answer"),
            )
            for (text,) in store.query(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL")
        )
    given = [f"answer {i}" for i in range(claimants) if f"answer {i}" in stored]
    assert given == ([answer] if answer is not None else [])


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie has)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def start_together(folder: Path, claims: Sequence[Sequence[str]]) -> list[subprocess.Popen[str]]:
    """Start one claimant per argument list; let them go once all of them are ready.

    The claimants wait for a shared lock on the file ``go`` while this process holds it
    exclusively: unlocking it wakes them all at once.
    """
    gate = (folder / "go").open("wb")
    fcntl.flock(gate, fcntl.LOCK_EX)
    processes = [
        subprocess.Popen(
            [sys.executable, str(HERE), str(folder), str(index), *claim],
            env=environment(folder),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index, claim in enumerate(claims)
    ]
    ready = [folder / f"ready-{index}" for index in range(len(claims))]
    try:
        wait_for(lambda: all(path.exists() for path in ready), "the claimants")
    finally:
        gate.close()
    return processes


def race_processes(folder: Path, claims: Sequence[Sequence[str]]) -> list[tuple[int, str, str]]:
    """Run one claimant process per argument list, all at once, and check the race.

    Checks that exactly one claimant exited 0 after running `record` once, and that
    every other exited 2 with ``error: run 'race' is running (pid WINNER)``; returns
    each one's exit code, output and error output.
    """
    processes = start_together(folder, claims)
    try:
        release_when_settled(
            folder, len(claims), lambda: sum(p.poll() is not None for p in processes)
        )
        outcomes = [(p.wait(timeout=WAIT), *p.communicate()) for p in processes]
    finally:
        (folder / "release").touch()
        for process in processes:
            process.kill()
            process.communicate()
    winners = [p.pid for p, (code, _, _) in zip(processes, outcomes, strict=True) if code == 0]
    assert len(winners) == 1, outcomes
    refusals = [err.strip() for code, _, err in outcomes if code == 2]
    assert refusals == [f"error: run 'race' is running (pid {winners[0]})"] * (len(claims) - 1)
    assert executions(folder) == [f"{winners[0]} resumed"]
    return outcomes


def release_when_settled(folder: Path, total: int, ended: Callable[[], int]) -> None:
    """Release `record` once each of ``total`` claimants has ended or executed it.

    Two executions settle it too: the race is lost, and the test shows it at once.
    """
    wait_for(
        lambda: ended() + len(executions(folder)) >= total or len(executions(folder)) > 1,
        "the claimants to settle",
    )
    (folder / "release").touch()


def wait_for(done: Callable[[], bool], what: str) -> None:
    """Wait until ``done()`` holds (`WAIT` seconds at most)."""
    deadline = time.monotonic() + WAIT
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT:.0f} s for {what}")
        time.sleep(0.02)


def _claim_through_the_api(run_id: str, db: str, answer: str, cycles: str) -> int:
    limits = Limits(max_cycles=int(cycles)) if cycles != "-" else None
    try:
        result = asyncio.run(
            convergent.resume(
                run_id, store=db, answer=None if answer == "-" else answer, limits=limits
            )
        )
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"stop_reason": result.stop_reason.value}))
    return 0


def main(argv: Sequence[str]) -> int:
    """Be one claimant (see the module's docstring)."""
    folder, index, mode, *rest = argv
    import convergent.cli._app  # noqa: F401  (imported before the start, not in the race)
    from convergent.cli import main as command_line

    with (Path(folder) / "go").open("rb") as gate:
        (Path(folder) / f"ready-{index}").touch()
        fcntl.flock(gate, fcntl.LOCK_SH)
    if mode == "api":
        return _claim_through_the_api(*rest)
    command_line(list(rest))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
