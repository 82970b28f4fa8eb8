"""Many claimants resuming one stored run through `convergent.resume`: one runs it.

Each claim is one write transaction: whoever comes second finds the run running and is
refused with ``run ID is running (pid N)``, before its answer, message or tool reaches
anything. The claimants are processes, or tasks of one process (one pid, so a claim is
told apart by its token).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import pytest

import convergent
from convergent import Limits, UserError
from convergent.durability.sqlite import RunStore
from resume_race import (
    RESUME_CYCLES,
    assert_resumed_once,
    executions,
    race_processes,
    release_when_settled,
    stopped_run,
)

CLAIMANTS = 8


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["needs_user", "tool_error", "stalled"])
def test_one_of_many_processes_resumes_the_run(tmp_path: Path, scenario: str) -> None:
    db = tmp_path / "runs.db"
    run_id = stopped_run(db, tmp_path, scenario)
    with RunStore(db) as store:
        cycles = store.get_run(run_id).cycles + RESUME_CYCLES
    answers = [f"answer {i}" if scenario == "needs_user" else "-" for i in range(CLAIMANTS)]
    outcomes = race_processes(
        tmp_path, [["api", run_id, str(db), answer, str(cycles)] for answer in answers]
    )
    (winner,) = [index for index, (code, _, _) in enumerate(outcomes) if code == 0]
    assert json.loads(outcomes[winner][1]) == {"stop_reason": "completed"}
    assert_resumed_once(
        db, run_id, answers[winner] if scenario == "needs_user" else None, CLAIMANTS
    )


async def race_tasks(db: Path, folder: Path, run_id: str, shared: bool) -> list[object]:
    """`convergent.resume` from `CLAIMANTS` tasks at once (each its own store, or one)."""
    with RunStore(db) as store:
        claims = [
            asyncio.create_task(
                convergent.resume(
                    run_id,
                    store=store if shared else db,
                    answer=f"answer {index}",
                    limits=Limits(max_cycles=RESUME_CYCLES),
                )
            )
            for index in range(CLAIMANTS)
        ]
        # a thread of its own: blocked calls of `record` may fill the loop's executor
        referee = threading.Thread(
            target=release_when_settled,
            args=(folder, CLAIMANTS, lambda: sum(c.done() for c in claims)),
        )
        referee.start()
        try:
            return await asyncio.gather(*claims, return_exceptions=True)
        finally:
            (folder / "release").touch()
            await asyncio.to_thread(referee.join)


def check_tasks_race(tmp_path: Path, run_id: str, shared: bool) -> None:
    db = tmp_path / "runs.db"
    try:
        outcomes = asyncio.run(race_tasks(db, tmp_path, run_id, shared))
    finally:
        (tmp_path / "release").touch()
    winners = [i for i, outcome in enumerate(outcomes) if not isinstance(outcome, BaseException)]
    assert len(winners) == 1, outcomes
    refusals = [str(o) for o in outcomes if isinstance(o, UserError)]
    assert refusals == [f"run {run_id!r} is running (pid {os.getpid()})"] * (CLAIMANTS - 1)
    assert len(executions(tmp_path)) == 1
    assert_resumed_once(db, run_id, f"answer {winners[0]}", CLAIMANTS)


@pytest.mark.parametrize("shared", [False, True], ids=["own-stores", "one-store"])
def test_one_of_many_tasks_of_one_process_resumes_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    monkeypatch.setenv("RACE_DIR", str(tmp_path))
    check_tasks_race(tmp_path, stopped_run(tmp_path / "runs.db", tmp_path, "needs_user"), shared)


@pytest.mark.slow
def test_tasks_whose_resumptions_start_servers_resume_the_run_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # starting an MCP server awaits a process: the tasks interleave before their runs start
    pytest.importorskip("mcp_server_time")
    monkeypatch.setenv("RACE_DIR", str(tmp_path))
    run_id = stopped_run(tmp_path / "runs.db", tmp_path, "needs_user", servers=True)
    check_tasks_race(tmp_path, run_id, shared=False)
