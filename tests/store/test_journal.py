"""What the SQLite journal writes per cycle, and how storage faults surface."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from convergent import (
    Agent,
    Limits,
    ModelResponse,
    ScriptedModel,
    StopReason,
    StorageError,
    ToolCall,
    UserError,
    Verification,
    calculator,
)
from convergent.gate import AskUser, ExecutiveGate, GateDecided, QueueChannel
from convergent.store import RunStore


def calc(n: int) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=f"c{n}", name="calculator", arguments={"expression": f"{n}+1"}),)
    )


@pytest.fixture
def statements(store: RunStore) -> Iterator[list[str]]:
    """Every SQL statement the store's connection runs."""
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)  # noqa: SLF001
    yield seen
    store._conn.set_trace_callback(None)  # noqa: SLF001


async def test_a_cycle_with_one_call_writes_two_transactions(
    store: RunStore, statements: list[str]
) -> None:
    cycles = 20
    model = ScriptedModel([calc(n) for n in range(cycles - 1)] + ["done"])
    await Agent(model, [calculator], store=store).run("t", run_id="r")
    begins = [s for s in statements if s.startswith("BEGIN")]
    # started + (calls journaled, call finished) per tool cycle + stopped
    assert len(begins) == 1 + 2 * (cycles - 1) + 1


async def test_each_write_appends_only_new_messages(store: RunStore, statements: list[str]) -> None:
    cycles = 30
    model = ScriptedModel([calc(n) for n in range(cycles - 1)] + ["done"])
    result = await Agent(model, [calculator], store=store).run("t", run_id="r")
    inserted = [s for s in statements if s.startswith("INSERT OR REPLACE INTO messages")]
    assert len(inserted) == len(result.messages)
    assert store.load("r").messages == list(result.messages)


async def test_rare_events_are_stored_with_the_run(store: RunStore) -> None:
    scorer = ScriptedModel(['{"clarity": 0.95, "certainty": 0.95, "reason": "clear"}'])
    gate = ExecutiveGate(scorer, AskUser(QueueChannel()), threshold=0.5)
    verdicts = iter([Verification(False, "show your work"), Verification(True)])
    model = ScriptedModel([calc(1), "2", "2, because 1+1=2"])
    agent = Agent(model, [calculator], gate=gate, verifier=lambda _: next(verdicts), store=store)
    await agent.run("t", run_id="r")
    kinds = [event["type"] for _, event in store.events("r")]
    assert kinds == [GateDecided.type, "verified", "verified"]
    gate_event = store.events("r")[0][1]
    assert gate_event["decision"] == "executed" and gate_event["score"] == pytest.approx(0.95)


async def test_per_cycle_usage_and_time_are_on_the_checkpoints(store: RunStore) -> None:
    model = ScriptedModel(
        [
            {
                "tool_calls": [{"name": "calculator", "arguments": {"expression": "1"}}],
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
            {"content": "done", "usage": {"input_tokens": 20, "output_tokens": 7}},
        ]
    )
    await Agent(model, [calculator], store=store).run("t", run_id="r")
    points = store.checkpoints("r")
    assert [cycle for cycle, _, _ in points] == [0, 1, 2]
    assert [usage.total_tokens for _, usage, _ in points] == [0, 15, 42]
    assert all(b[2] >= a[2] for a, b in zip(points, points[1:], strict=False))


async def test_a_full_disk_stops_the_run_with_a_storage_error(store: RunStore) -> None:
    (pages,) = store._conn.execute("PRAGMA page_count").fetchone()  # noqa: SLF001
    store._conn.execute(f"PRAGMA max_page_count = {pages + 1}")  # noqa: SLF001
    model = ScriptedModel([calc(n) for n in range(200)])
    agent = Agent(model, [calculator], store=store, limits=Limits(max_cycles=200))
    with pytest.raises(StorageError, match="database or disk is full"):
        await agent.run("a task " + "x" * 5000, run_id="r")


def _fill(path: Path) -> None:
    with RunStore(path) as store:
        asyncio.run(
            Agent(ScriptedModel([calc(n) for n in range(40)] + ["done"]), [calculator]).run(
                "t", run_id="r", store=store
            )
        )


def test_a_truncated_database_is_reported_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _fill(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(StorageError, match="is damaged"):
        RunStore(path).list_runs()


def test_a_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _fill(path)
    with RunStore(path, readonly=True) as store:
        assert [run.run_id for run in store.list_runs()] == ["r"]
        assert store.load("r").stop_reason is StopReason.COMPLETED
        with pytest.raises(StorageError, match="readonly"):
            store.send_steering("r", "message", "x")


def test_a_version_1_database_opened_read_only_asks_for_an_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (run_id TEXT)")
        conn.execute("PRAGMA user_version = 1")
    with pytest.raises(UserError, match="write access to upgrade"):
        RunStore(path, readonly=True)


def test_a_locked_database_is_a_one_line_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _fill(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with (
            RunStore(path, timeout=0.1) as store,
            pytest.raises(StorageError, match="locked by another process"),
        ):
            store.send_steering("r", "message", "x")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
