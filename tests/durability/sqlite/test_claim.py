"""Claiming a stored run: one holder at a time, and a holder that is gone never blocks.

The races themselves (many processes and tasks claiming at once) are in
``test_resume_race.py``; here each rule of a claim is checked on its own.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

import convergent
from convergent import UserError, build_agent
from convergent.durability.sqlite import RunStore, _claims
from convergent.exceptions import ScriptExhaustedError
from convergent.stop import StopReason
from convergent.testing import call, write_script
from resume_race import (
    environment,
    executions,
    process_gone,
    resume_limits,
    stopped_run,
    wait_for,
)

HOLDER = ("status", "pid", "pid_start", "claim")


@pytest.fixture
def race(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A run stopped ``needs_user`` whose next cycle calls ``record``; released at the end."""
    monkeypatch.setenv("RACE_DIR", str(tmp_path))
    db = tmp_path / "runs.db"
    yield db, stopped_run(db, tmp_path, "needs_user")
    (tmp_path / "release").touch()


def holder(store: RunStore, run_id: str) -> tuple[object, ...]:
    return store.query(f"SELECT {', '.join(HOLDER)} FROM runs WHERE run_id = ?", [run_id])[0]


def stored_rows(store: RunStore, run_id: str) -> list[object]:
    """Everything stored for the run except its holder."""
    return [
        store.query(f"SELECT * FROM {table} WHERE run_id = ?", [run_id])
        for table in ("messages", "finished_calls", "events", "steering", "questions")
    ] + [store.query("SELECT stop_reason, cycles, output FROM runs WHERE run_id = ?", [run_id])]


def ticks_since_boot(pid: int) -> int:
    """A process's start as rows store it on Linux: clock ticks since boot (``/proc``)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])


def hundredths_since_epoch(pid: int) -> int:
    """A process's start as rows store it elsewhere: psutil's, in hundredths of a second."""
    return round(psutil.Process(pid).create_time() * 100)


@pytest.fixture(params=["ticks since boot", "wall clock"])
def start_time(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Callable[[int], int]:
    """How this system's rows name a holder's start (the wall clock: as off Linux)."""
    if request.param == "wall clock":
        monkeypatch.setattr(_claims, "_TICKS_SINCE_BOOT", False)
        monkeypatch.setattr(_claims, "_OWN_START", {})
        return hundredths_since_epoch
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    return ticks_since_boot


def test_a_second_claim_is_refused_until_the_first_is_released(
    race: tuple[Path, str],
) -> None:
    db, run_id = race
    with RunStore(db) as store, RunStore(db) as other:
        before = holder(store, run_id)
        claim = store.claim(run_id)
        assert store.get_run(run_id).running
        for claimant in (store, other):
            with pytest.raises(UserError) as refused:
                claimant.claim(run_id)
            assert str(refused.value) == f"run {run_id!r} is running (pid {os.getpid()})"
        claim.release()
        assert holder(store, run_id) == before
        assert store.get_run(run_id).status == "needs_user"
        other.claim(run_id).release()


async def test_a_refused_resume_records_no_answer_and_queues_no_message(
    race: tuple[Path, str],
) -> None:
    db, run_id = race
    with RunStore(db) as store:
        before = stored_rows(store, run_id)
        claim = store.claim(run_id)
        with pytest.raises(UserError, match=r"is running \(pid \d+\)"):
            await convergent.resume(run_id, store=db, answer="left", message="hurry up")
        assert stored_rows(store, run_id) == before
        assert executions(db.parent) == []
        claim.release()


async def test_the_journal_claims_a_run_resumed_without_a_claim(race: tuple[Path, str]) -> None:
    db, run_id = race
    with RunStore(db) as store:
        before = stored_rows(store, run_id)
        spec = convergent.AgentSpec.model_validate(store.get_run(run_id).spec)
        agent = build_agent(spec)
        questions = store.pending_questions(run_id)
        held = store.claim(run_id)
        with pytest.raises(UserError, match=rf"^run {run_id!r} is running \(pid {os.getpid()}\)$"):
            await agent.run(
                state=store.load(run_id),
                answers={q.call_id: "left" for q in questions},
                store=store,
            )
        assert stored_rows(store, run_id) == before
        held.release()


async def test_a_resume_that_cannot_start_gives_the_run_back(race: tuple[Path, str]) -> None:
    db, run_id = race
    with RunStore(db) as store:
        before = holder(store, run_id), stored_rows(store, run_id)
        with pytest.raises(UserError, match="waits for an answer"):
            await convergent.resume(run_id, store=store)
        with pytest.raises(UserError, match="the message is empty"):
            await convergent.resume(run_id, store=store, answer="left", message=" ")
        assert (holder(store, run_id), stored_rows(store, run_id)) == before
        assert store.get_run(run_id).status == "needs_user"


async def test_a_run_a_failed_task_of_this_process_left_running_can_be_resumed(
    race: tuple[Path, str],
) -> None:
    db, run_id = race
    folder = db.parent
    short = write_script(folder / "short.json", call("calculator", expression="2+2"))
    (folder / "release").touch()
    with RunStore(db) as store:
        with pytest.raises(ScriptExhaustedError):
            await convergent.resume(run_id, store=store, answer="left", model=short)
        # the row still names this process, but no task of it holds the run any more
        assert holder(store, run_id)[:2] == ("running", os.getpid())
        assert store.get_run(run_id).status == "interrupted"
        done = write_script(folder / "done.json", "finished")
        result = await convergent.resume(run_id, store=store, model=done)
    assert result.stop_reason is StopReason.COMPLETED and result.output == "finished"


def name_holder(store: RunStore, run_id: str, pid: int, started: int) -> None:
    with store.transaction() as conn:
        conn.execute(
            "UPDATE runs SET status = 'running', pid = ?, pid_start = ?, claim = 'theirs' "
            "WHERE run_id = ?",
            (pid, started, run_id),
        )


def test_a_holder_whose_process_id_was_reused_or_that_was_killed_is_gone(
    race: tuple[Path, str], start_time: Callable[[int], int]
) -> None:
    db, run_id = race
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        with RunStore(db) as store:
            # the row names an earlier process that had the same id
            name_holder(store, run_id, other.pid, start_time(other.pid) - 1)
            assert not store.get_run(run_id).running
            store.claim(run_id).release()
            # the row names this very process
            name_holder(store, run_id, other.pid, start_time(other.pid))
            assert store.get_run(run_id).running
            with pytest.raises(UserError, match=rf"^run 'race' is running \(pid {other.pid}\)$"):
                store.claim(run_id)
            # killed, and not reaped yet by its parent (this process)
            other.kill()
            wait_for(lambda: process_gone(other.pid), "the holder to die")
            assert not store.get_run(run_id).running
            store.claim(run_id).release()
    finally:
        other.kill()
        other.wait()


def test_a_claim_is_taken_over_only_with_its_token(race: tuple[Path, str]) -> None:
    db, run_id = race
    with RunStore(db) as console, RunStore(db) as resumer:
        claim = console.claim(run_id)
        with pytest.raises(UserError, match="is running"):
            resumer.claim(run_id, token="another")
        taken = resumer.claim(run_id, token=claim.token)
        assert holder(resumer, run_id)[3] == claim.token
        taken.release()
        claim.release()
        assert resumer.get_run(run_id).status == "needs_user"


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")
@pytest.mark.slow
def test_a_claim_left_by_a_killed_process_does_not_block_the_run(race: tuple[Path, str]) -> None:
    db, run_id = race
    folder = db.parent
    command = [sys.executable, "-m", "convergent", "resume", run_id, "--db", str(db)]
    child = subprocess.Popen(
        [*command, "--answer", "left", "--no-steer", "--json"],
        env=environment(folder),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: executions(folder) != [], "the resumed run's call")
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    assert executions(folder) == [f"{child.pid} resumed"]
    with RunStore(db) as store:
        assert holder(store, run_id)[:2] == ("running", child.pid)
        assert store.get_run(run_id).status == "interrupted"
        result = asyncio.run(
            convergent.resume(run_id, store=store, limits=resume_limits(store, run_id))
        )
    assert result.stop_reason is StopReason.COMPLETED
    # the call the killed process had started is reported interrupted, never run again
    assert len(executions(folder)) == 1
    assert result.tool_calls[-1].name == "record" and not result.tool_calls[-1].ok
