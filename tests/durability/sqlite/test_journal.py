"""What the SQLite journal writes per cycle, and how storage faults surface."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import convergent
from convergent import (
    Agent,
    Limits,
    ModelError,
    ModelResponse,
    ModelSettings,
    ScriptedModel,
    StopReason,
    StorageError,
    Usage,
    UserError,
    Verification,
    calculator,
    tool,
)
from convergent.durability import JournaledRun
from convergent.durability.sqlite import RunStore
from convergent.durability.sqlite._codec import ROW_MONITOR_STEP, row_monitor_json
from convergent.events import AnsweredAfterStop
from convergent.gate import AskUser, ExecutiveGate, GateDecided, QueueChannel
from convergent.models import TokenPrice
from convergent.state import STATE_SCHEMA_VERSION, BudgetState, MonitorState, RunState
from convergent.testing import answer, call, scripted, step


def calc(n: int) -> ModelResponse:
    return step(call("calculator", expression=f"{n}+1"))


@pytest.fixture
def statements(store: RunStore) -> Iterator[list[str]]:
    """Every SQL statement the store's connection runs."""
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)  # noqa: SLF001
    yield seen
    store._conn.set_trace_callback(None)  # noqa: SLF001


async def test_a_cycle_of_a_call_that_may_run_again_is_one_transaction(
    store: RunStore, statements: list[str]
) -> None:
    cycles = 20
    model = scripted(*(calc(n) for n in range(cycles - 1)), "done")
    assert calculator.idempotent
    await Agent(model, [calculator], store=store).run("t", run_id="r")
    begins = [s for s in statements if s.startswith("BEGIN")]
    # started + (calls journaled with the previous call's end) per tool cycle + stopped
    assert len(begins) == 1 + (cycles - 1) + 1
    assert len(store.load("r").tool_calls) == cycles - 1


@tool
def pay(amount: int) -> str:
    """Pay an amount (it must never be paid twice).

    Args:
        amount: The amount.
    """
    return f"paid {amount}"


async def test_a_call_that_may_not_run_twice_is_committed_before_and_after_it_runs(
    store: RunStore, statements: list[str]
) -> None:
    cycles = 20
    model = scripted(*(step(call("pay", amount=n)) for n in range(cycles - 1)), "done")
    await Agent(model, [pay], store=store).run("t", run_id="r")
    begins = [s for s in statements if s.startswith("BEGIN")]
    # started + (calls journaled, call finished) per tool cycle + stopped
    assert len(begins) == 1 + 2 * (cycles - 1) + 1


class Crash(BaseException):
    """The process dies (raised past every handler of the loop)."""


async def test_a_crash_runs_again_a_finished_call_that_may_run_again(tmp_path: Path) -> None:
    runs: list[str] = []

    @tool(idempotent=True)
    def look(n: int) -> str:
        """Look at item n (safe to repeat).

        Args:
            n: The item.
        """
        runs.append(f"look {n}")
        return f"item {n} is fine"

    @tool
    def die() -> str:
        """End the process."""
        raise Crash

    steps = [step(call("look", n=1)), step(call("die")), "done"]
    with RunStore(tmp_path / "runs.db") as store:
        with pytest.raises(Crash):
            await Agent(scripted(*steps), [look, die], store=store).run("t", run_id="r")
        # the look's end waited for the next transaction: the one of the die call
        assert [r.name for r in store.load("r").tool_calls] == ["look"]
        runs.clear()
        both = scripted(step(call("look", n=1), call("die")))
        agent = Agent(both, [look, die], parallel_tool_calls=False, store=store)
        with pytest.raises(Crash):
            await agent.run("t", run_id="s")
        # the process died before the look's end was committed
        assert store.load("s").tool_calls == []
        again = Agent(scripted("done"), [look, die])
        resumed = await convergent.resume("s", store=store, agent=again)
    assert runs == ["look 1", "look 1"]  # it ran again, as its tool allows
    assert resumed.stop_reason is StopReason.COMPLETED
    ended = {r.name: (r.ok, r.result) for r in resumed.tool_calls}
    assert ended["look"] == (True, "item 1 is fine") and ended["die"][0] is False


async def test_a_call_that_may_not_run_twice_keeps_its_result_through_a_crash(
    tmp_path: Path,
) -> None:
    paid: list[int] = []

    @tool
    def pay_once(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: The amount.
        """
        paid.append(amount)
        return f"paid {amount}"

    @tool
    def die() -> str:
        """End the process."""
        raise Crash

    model = scripted(step(call("pay_once", amount=5), call("die")), "done")
    with RunStore(tmp_path / "runs.db") as store:
        agent = Agent(model, [pay_once, die], parallel_tool_calls=False, store=store)
        with pytest.raises(Crash):
            await agent.run("t", run_id="r")
        again = Agent(scripted("done"), [pay_once, die])
        resumed = await convergent.resume("r", store=store, agent=again)
    assert paid == [5]
    assert [(r.name, r.result) for r in resumed.tool_calls][0] == ("pay_once", "paid 5")


async def test_each_write_appends_only_new_messages(store: RunStore, statements: list[str]) -> None:
    cycles = 30
    model = scripted(*(calc(n) for n in range(cycles - 1)), "done")
    result = await Agent(model, [calculator], store=store).run("t", run_id="r")
    inserted = [s for s in statements if s.startswith("INSERT OR REPLACE INTO messages")]
    assert len(inserted) == len(result.messages)
    assert store.load("r").messages == list(result.messages)


async def test_rare_events_are_stored_with_the_run(store: RunStore) -> None:
    scorer = scripted('{"clarity": 0.95, "certainty": 0.95, "reason": "clear"}')
    gate = ExecutiveGate(scorer, AskUser(QueueChannel()), threshold=0.5)
    verdicts = iter([Verification(False, "show your work"), Verification(True)])
    model = scripted(calc(1), "2", "2, because 1+1=2")
    agent = Agent(model, [calculator], gate=gate, verifier=lambda _: next(verdicts), store=store)
    await agent.run("t", run_id="r")
    rare = [event for _, event in store.events("r") if event["type"] != "model_responded"]
    assert [event["type"] for event in rare] == [
        "run_started",
        GateDecided.type,
        "verified",
        "verified",
    ]
    started = rare[0]
    # the start keeps the tools as the model saw them (the task is in the run's row)
    assert started["task"] == "" and started["tool_specs"][0]["name"] == "calculator"
    gate_event = rare[1]
    assert gate_event["decision"] == "executed" and gate_event["score"] == pytest.approx(0.95)


async def test_each_reply_stores_its_request_facts_not_its_text(store: RunStore) -> None:
    usage = Usage(input_tokens=10, output_tokens=5, requests=1)
    model = scripted(step(call("calculator", expression="1"), usage=usage), "the answer")
    agent = Agent(model, [calculator], store=store, settings=ModelSettings(temperature=0.0))
    await agent.run("t", run_id="r")
    replies = [event for _, event in store.events("r") if event["type"] == "model_responded"]
    assert [reply["cycle"] for reply in replies] == [1, 2]
    first = replies[0]
    assert first["usage"] == {"input_tokens": 10, "output_tokens": 5, "requests": 1, "cost": 0.0}
    assert first["duration"] >= 0 and first["finish_reason"] == "tool_calls"
    # a temperature of 0 is a setting, not an unset one
    assert first["settings"] == {"temperature": 0.0}
    assert "content" not in first and "tool_calls" not in first  # the messages hold them


async def test_per_cycle_usage_and_time_are_on_the_checkpoints(store: RunStore) -> None:
    model = scripted(
        step(
            call("calculator", expression="1"),
            usage=Usage(input_tokens=10, output_tokens=5, requests=1),
        ),
        answer("done", usage=Usage(input_tokens=20, output_tokens=7, requests=1)),
    )
    await Agent(model, [calculator], store=store).run("t", run_id="r")
    points = store.checkpoints("r")
    assert [cycle for cycle, _, _ in points] == [0, 1, 2]
    assert [usage.total_tokens for _, usage, _ in points] == [0, 15, 42]
    assert all(b[2] >= a[2] for a, b in zip(points, points[1:], strict=False))


async def test_a_full_disk_stops_the_run_with_a_storage_error(store: RunStore) -> None:
    (pages,) = store._conn.execute("PRAGMA page_count").fetchone()  # noqa: SLF001
    store._conn.execute(f"PRAGMA max_page_count = {pages + 1}")  # noqa: SLF001
    model = scripted(*(calc(n) for n in range(200)))
    agent = Agent(model, [calculator], store=store, limits=Limits(max_cycles=200))
    with pytest.raises(StorageError, match="database or disk is full"):
        await agent.run("a task " + "x" * 5000, run_id="r")


def _fill(path: Path) -> None:
    with RunStore(path) as store:
        asyncio.run(
            Agent(scripted(*(calc(n) for n in range(40)), "done"), [calculator]).run(
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


class LockWatchingStore(RunStore):
    """A `RunStore` that notes when its first write after `watch` waits, and commits."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.order: list[str] = []
        self.watching = False
        self.waiting = threading.Event()

    @contextmanager
    def transaction(self, doing: str = "write run database") -> Iterator[sqlite3.Connection]:
        watched, self.watching = self.watching, False
        if watched:
            self.order.append("write waits for the lock")
            self.waiting.set()
        with super().transaction(doing) as conn:
            yield conn
        if watched:
            self.order.append("write committed")


async def test_a_write_waiting_for_the_lock_does_not_hold_up_a_sibling_call(
    tmp_path: Path,
) -> None:
    """A finished call's write waits for another connection's lock off the event loop.

    The sibling call is what releases the lock: were the write blocking the loop, the
    sibling could not run until the write gave up (``database is locked``).
    """
    path = tmp_path / "runs.db"
    store = LockWatchingStore(path)
    other = sqlite3.connect(path, isolation_level=None)

    @tool
    async def take_lock() -> str:
        """Hold the database's write lock from another connection."""
        other.execute("BEGIN IMMEDIATE")
        store.watching = True
        return "locked"

    @tool
    async def release_lock() -> str:
        """Release the lock once the run's write waits for it."""
        assert await asyncio.to_thread(store.waiting.wait, 60.0)
        store.order.append("sibling call releases the lock")
        other.execute("COMMIT")
        return "released"

    model = scripted([call("take_lock"), call("release_lock")], "done")
    try:
        result = await Agent(model, [take_lock, release_lock], store=store).run("t", run_id="r")
    finally:
        other.close()
        store.close()
    assert result.stop_reason is StopReason.COMPLETED
    assert [(c.name, c.ok) for c in result.tool_calls] == [
        ("take_lock", True),
        ("release_lock", True),
    ]
    assert store.order == [
        "write waits for the lock",
        "sibling call releases the lock",
        "write committed",
    ]
    with RunStore(path) as reopened:
        assert [c.name for c in reopened.load("r").tool_calls] == ["take_lock", "release_lock"]


def test_a_write_goes_after_the_writes_queued_before_it(tmp_path: Path) -> None:
    """A write commits at once only when nothing waits ahead of it or makes it wait."""
    order: list[str] = []

    def insert(name: str) -> Callable[[sqlite3.Connection], None]:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO steering (run_id, kind, text, created_at) "
                "VALUES ('r', 'message', ?, 0)",
                (name,),
            )
            order.append(name)

        return write

    with RunStore(tmp_path / "runs.db") as store:
        assert store.write_if_free(insert("free"))
        release = threading.Event()

        def queued() -> None:
            release.wait(60.0)
            with store.transaction() as conn:
                insert("queued")(conn)

        done = store.in_writer(queued)
        assert not store.write_if_free(insert("jumping the queue"))
        release.set()
        done.result(60.0)
        assert store.write_if_free(insert("after"))
    assert order == ["free", "queued", "after"]
    with RunStore(tmp_path / "synced.db", durable=True) as synced:
        assert not synced.write_if_free(insert("synced"))  # each commit syncs: the writer's


async def test_a_journal_opened_the_old_way_still_writes_with_a_deprecation(
    store: RunStore,
) -> None:
    with pytest.warns(DeprecationWarning, match=r"pass a convergent\.durability\.JournaledRun"):
        journal = store.journal("old", recipe={"model": "scripted:x.json"}, workspace=None)
    state = Agent(ScriptedModel(["done"])).new_state("t", run_id="old")
    await journal.started(state, resumed=False)
    assert store.get_run("old").spec == {"model": "scripted:x.json"}
    with pytest.raises(TypeError, match="workspace"):
        store.journal(JournaledRun(run_id="new"), workspace="x")


async def test_the_request_after_a_stop_is_an_event_stored_with_the_run(store: RunStore) -> None:
    usage = Usage(input_tokens=30, output_tokens=4, requests=1)
    model = scripted(
        *[step(call("calculator", expression=f"{n}+1")) for n in range(2)],
        answer("my best guess: 3", usage=usage),
    )
    agent = Agent(
        model,
        [calculator],
        store=store,
        limits=Limits(max_cycles=2),
        settings=ModelSettings(max_tokens=300),
    )
    result = await agent.run("t", run_id="r")
    assert result.stop_reason is StopReason.MAX_CYCLES and result.output_after_stop
    (seen,) = [e for e in result.events if isinstance(e, AnsweredAfterStop)]
    assert seen.content == "my best guess: 3" and seen.usage == usage and not seen.error
    assert seen.settings is not None and seen.settings["plain_answer"] is True
    (stored,) = [event for _, event in store.events("r") if event["type"] == seen.type]
    assert stored["cycle"] == 2 and stored["prompt"] == seen.prompt
    assert stored["message_count"] == len(result.messages)
    assert stored["usage"]["output_tokens"] == 4 and stored["content"] == "my best guess: 3"


async def test_a_failed_request_after_a_stop_says_why(store: RunStore) -> None:
    model = scripted(step(call("calculator", expression="1+1")), ModelError("HTTP 503: busy"))
    agent = Agent(model, [calculator], store=store, limits=Limits(max_cycles=1))
    result = await agent.run("t", run_id="r")
    assert not result.output_after_stop
    (stored,) = [event for _, event in store.events("r") if event["type"] == "answered_after_stop"]
    assert stored["content"] == "" and "HTTP 503: busy" in stored["error"]


def test_the_monitors_counters_load_back_as_they_were_written() -> None:
    """The monitor's JSON, as the journal writes it into the run's row and the store
    loads it, keeps digests past 64 bits (the recent calls), maps keyed by digests, times
    and the budget's counters unchanged."""
    digest = 2**63 + 7
    monitor = MonitorState(
        stretch={digest: (11, 2)},
        results={digest: (2**40 + 1, 11)},
        started={digest: 0.1 + 0.2},
        ended={5: 1e-7},
        recent=[digest << 64 | 11, 5 << 64 | 3],
        watched=[digest],
        partial="cut \u00e9 ",
        budget=BudgetState(noted=True, tool_calls=3, calls_by_tool={"read": 3}, model_seconds=1.5),
    )
    text = row_monitor_json(monitor)
    assert len(text.encode()) % ROW_MONITOR_STEP == 0  # its "é" is two bytes
    stored = json.loads(text)
    data = {"schema_version": STATE_SCHEMA_VERSION, "run_id": "r", "task": "t", "monitor": stored}
    assert RunState.from_jsonable(data).monitor == monitor


async def test_a_run_cancelled_while_its_write_waits_for_the_lock_does_not_hold_the_loop(
    tmp_path: Path,
) -> None:
    """Another connection holds the database's write lock, so the run's first write waits
    on the store's writer thread. Cancelled, the run waits for that write as a coroutine:
    the event loop goes on (it used to wait in the loop's own thread, which stalled every
    other run on the loop until the lock came free or the store's timeout passed)."""
    store = RunStore(tmp_path / "runs.db", timeout=30.0)
    other = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    run = asyncio.ensure_future(
        convergent.Agent(scripted("done")).run("t", run_id="r", store=store)
    )
    for _ in range(20):
        await asyncio.sleep(0.005)  # the run's first write is with the writer, waiting
    assert not run.done()
    run.cancel()
    for _ in range(20):
        await asyncio.sleep(0)  # the loop goes on while the cancelled run waits
    assert not run.done()
    other.execute("COMMIT")
    other.close()
    with pytest.raises(asyncio.CancelledError):
        await run
    store.close()


@tool(idempotent=True)
async def look_up(n: int) -> str:
    """A result of about 400 characters for a number.

    Args:
        n: A number.
    """
    return f"{n}: " + "x" * 400


def _priced_script(cycles: int) -> ScriptedModel:
    """A call a cycle, each reply's tokens and cost more than the one before."""

    def used(n: int) -> Usage:
        return Usage(input_tokens=1500 + 400 * n, output_tokens=20 + n % 37, requests=1)

    calls = [step(call("look_up", n=n), usage=used(n)) for n in range(1, cycles)]
    done = answer("done", usage=used(cycles))
    return scripted(*calls, done, price=TokenPrice(input=3.0, output=15.0))


def _pages_a_cycle(path: Path, task: str, cycles: int) -> float:
    """The pages a run of ``cycles`` cycles writes into the log per cycle.

    A reader holds its view of the database from before the run, so nothing the run
    writes can leave the log: the log's growth is every page written.
    """
    with RunStore(path) as store:
        reader = sqlite3.connect(path, isolation_level=None)
        try:
            page_size = int(reader.execute("PRAGMA page_size").fetchone()[0])
            reader.execute("BEGIN")
            reader.execute("SELECT COUNT(*) FROM runs").fetchall()
            log = Path(f"{path}-wal")
            before = log.stat().st_size
            agent = Agent(_priced_script(cycles), [look_up], limits=Limits(max_cycles=cycles + 1))
            result = asyncio.run(agent.run(task, run_id="r", store=store))
            written = log.stat().st_size - before
        finally:
            reader.close()
    assert result.cycles == cycles and result.stop_reason is StopReason.COMPLETED
    return written / (24 + page_size) / cycles


def test_a_long_task_is_not_written_again_at_every_cycle(tmp_path: Path) -> None:
    """A run's row is written again at each cycle with its task in it: a long task costs
    about what a short one does, not its own pages again at every cycle."""
    short = _pages_a_cycle(tmp_path / "short.db", "count", 40)
    long = _pages_a_cycle(tmp_path / "long.db", "count " + "x" * 20_000, 40)
    assert long < short + 4, (short, long)
