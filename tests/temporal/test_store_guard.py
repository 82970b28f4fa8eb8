"""A payload store that is not the cluster's, or that lost or damaged rows, never wedges a
run: a worker on another store refuses to start, and a run whose payloads cannot be read
ends at once, naming the store."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from convergent import Limits
from convergent.exceptions import UserError
from convergent.testing import call

from .conftest import scripted_spec, wait_for

if TYPE_CHECKING:
    from convergent.temporal import DevServer, TemporalRun, TemporalRunner

pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal]

SAME_STORE = "every worker and client of a cluster must use the same store (--db)"


async def in_flight(tmp_path: Path, runner: TemporalRunner, run_id: str) -> TemporalRun:
    """A run with big results in the store, left in flight when its worker stops."""
    from convergent.temporal import make_worker

    responses = [call("bulk", n=n, kb=40) for n in range(3)]
    responses += [call("step", n=n) for n in range(20)] + ["done"]
    made = scripted_spec(tmp_path, responses, limits=Limits(max_cycles=30))
    async with make_worker(runner.client, runner.task_queue):
        run = await runner.start(made, "collect, then step", run_id=run_id)
        await wait_for(run, lambda progress: progress["cycles"] >= 5)
    return run


async def other_runner(server: DevServer, runner: TemporalRunner, db: Path) -> TemporalRunner:
    from convergent.temporal import PayloadStore, TemporalRunner

    return await TemporalRunner.connect(
        server.address, task_queue=runner.task_queue, payloads=PayloadStore(db)
    )


@pytest.mark.slow
async def test_a_worker_on_another_store_refuses_to_start_while_runs_are_in_flight(
    tmp_path: Path,
    runner: TemporalRunner,
    temporal_server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from convergent.temporal import make_worker

    monkeypatch.setenv("CONVERGENT_TEST_STEP_SECONDS", "0.3")
    run = await in_flight(tmp_path, runner, "in-flight")
    elsewhere = await other_runner(temporal_server, runner, tmp_path / "elsewhere.db")
    with pytest.raises(UserError) as raised:
        async with make_worker(elsewhere.client, runner.task_queue):
            pytest.fail("the worker started")
    assert str(raised.value) == (
        f"the payload store {tmp_path / 'elsewhere.db'} holds none of the payloads of the "
        f"runs in flight on task queue {runner.task_queue!r} ('in-flight'): {SAME_STORE}"
    )
    # from the command line: one line, exit 2, started from another folder (its own
    # relative default store)
    elsewhere_folder = tmp_path / "elsewhere"
    elsewhere_folder.mkdir()
    command = [str(Path(sys.executable).with_name("convergent")), "worker"]
    target = ["--temporal", temporal_server.address, "--task-queue", runner.task_queue]
    proc = await asyncio.to_thread(
        subprocess.run,
        [*command, *target],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=elsewhere_folder,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    store = elsewhere_folder / ".convergent" / "runs.db"
    assert proc.stderr == (
        f"error: the payload store {store} holds none of the payloads of the runs in flight "
        f"on task queue {runner.task_queue!r} ('in-flight'): {SAME_STORE}\n"
    )
    # the run was not touched: a worker on the cluster's store finishes it
    async with make_worker(runner.client, runner.task_queue):
        result = await asyncio.wait_for(run.result(), 120)
    assert result.output == "done"


def spoil(db: Path, keep: str, how: str) -> int:
    """Delete or damage every payload row but ``keep`` (the probe); how many."""
    with sqlite3.connect(db) as conn:
        if how == "deleted":
            cursor = conn.execute("DELETE FROM temporal_payloads WHERE digest != ?", (keep,))
        else:
            damaged = zlib.compress(b"not what was stored")
            cursor = conn.execute(
                "UPDATE temporal_payloads SET data = ? WHERE digest != ?", (damaged, keep)
            )
        return cursor.rowcount


@pytest.mark.slow
@pytest.mark.parametrize("spared", ["probe", "nothing"])
@pytest.mark.parametrize("how", ["deleted", "damaged"])
async def test_a_run_whose_payloads_cannot_be_read_ends_naming_the_store(
    tmp_path: Path,
    runner: TemporalRunner,
    payload_db: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    spared: str,
) -> None:
    """Every row but the run's probe, or every row: the store is still the cluster's (its
    id says so even when the probes are gone), so its workers start, and the run ends
    naming it. It used to fail its workflow task for ever, the run staying ``running``;
    with the probes gone, every worker refused to start ("must use the same store")."""
    from convergent.temporal import make_worker

    monkeypatch.setenv("CONVERGENT_TEST_STEP_SECONDS", "0.3")
    run = await in_flight(tmp_path, runner, f"spoilt-{how}-{spared}")
    probe = (await (await run.handle.describe()).memo())["probe"]["digest"]
    assert spoil(payload_db, probe if spared == "probe" else "", how) > 0
    async with make_worker(runner.client, runner.task_queue):
        with pytest.raises(UserError) as raised:
            await asyncio.wait_for(run.result(), 60)
    message = str(raised.value)
    assert message.startswith(f"the payload store {payload_db} ")
    if how == "deleted":
        assert message.endswith(f": {SAME_STORE}") and " does not hold payload " in message
    else:
        assert "damaged (its bytes no longer match their digest)" in message
    assert not await runner.is_running(run.run_id)


def test_a_damaged_copy_is_said_to_be_damaged_and_storing_the_payload_again_repairs_it(
    tmp_path: Path,
) -> None:
    from temporalio.api.common.v1 import Payload
    from temporalio.exceptions import ApplicationError

    from convergent.temporal import PayloadStore
    from convergent.temporal._store import PAYLOAD_DAMAGED, PAYLOAD_MISSING

    store = PayloadStore(tmp_path / "runs.db")
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"a result"')
    [digest] = store.put([payload])
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE temporal_payloads SET data = ?, stored_at = 0", (b"\x00",))
    with pytest.raises(ApplicationError) as raised:
        store.get(digest)
    assert raised.value.type == PAYLOAD_DAMAGED and raised.value.non_retryable
    assert store.put([payload]) == [digest]
    assert store.get(digest) == payload
    with sqlite3.connect(store.path) as conn:
        (stored_at,) = conn.execute("SELECT stored_at FROM temporal_payloads").fetchone()
    assert stored_at > 0  # stored again: retention keeps it from now
    with pytest.raises(ApplicationError) as missing:
        store.get("0" * 64)
    assert missing.value.type == PAYLOAD_MISSING
    store.close()


@pytest.mark.slow
async def test_a_full_payload_store_ends_the_run_naming_it(
    tmp_path: Path, runner: TemporalRunner, worker: None, payload_db: Path
) -> None:
    from convergent.temporal import PayloadStore

    made = scripted_spec(tmp_path, [call("bulk", n=n, kb=40) for n in range(5)] + ["collected"])
    run = await runner.start(made, "collect", run_id="full-disk")
    await wait_for(run, lambda progress: progress["cycles"] >= 1)
    # the store's file may not grow: as on a full disk, SQLite answers SQLITE_FULL
    assert isinstance(runner.payloads, PayloadStore)
    with runner.payloads.open().transaction() as conn:
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(UserError) as raised:
        # it used to wait for ever, or end tool_error blaming the tool
        await asyncio.wait_for(run.result(), 60)
    assert str(raised.value) == (
        f"cannot store payloads in {payload_db}: database or disk is full; the run cannot "
        "go on without its payloads"
    )


@pytest.mark.slow
async def test_steer_stop_stops_a_run_no_worker_can_take_the_stop_of(
    tmp_path: Path,
    runner: TemporalRunner,
    temporal_server: DevServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its workers are on another store and refuse to start: the stop is not left waiting
    (it used to say "sent stop" and change nothing)."""
    monkeypatch.setenv("CONVERGENT_TEST_STEP_SECONDS", "0.3")
    run = await in_flight(tmp_path, runner, "no-worker")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = [str(Path(sys.executable).with_name("convergent")), "steer", "no-worker", "--stop"]
    target = ["--temporal", temporal_server.address, "--task-queue", runner.task_queue]
    proc = await asyncio.to_thread(
        subprocess.run,
        [*command, *target, "--db", str(tmp_path / "runs.db")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=elsewhere,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == (
        "stopped no-worker: no worker could take the stop, so its workflow was terminated\n"
    )
    assert not await runner.is_running(run.run_id)
    with pytest.raises(UserError) as raised:
        await run.result()
    assert str(raised.value).startswith(
        "run 'no-worker' was terminated: stopped, and no worker took the stop (none runs "
        f"task queue {runner.task_queue!r}"
    )


@pytest.mark.slow
async def test_steer_stop_waits_for_a_run_a_worker_runs_to_stop(
    tmp_path: Path, runner: TemporalRunner, worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVERGENT_TEST_STEP_SECONDS", "0.3")
    made = scripted_spec(tmp_path, [*[call("step", n=n) for n in range(20)], "done"])
    run = await runner.start(made, "step on", run_id="stoppable")
    await wait_for(run, lambda progress: progress["cycles"] >= 2)
    assert await run.stop() == "stopped"
    result = await run.result()
    assert result.stop_reason.value == "stopped"
