"""Checkpoint cost per cycle at two run lengths, next to a bare SQLite write, and resume time.

A scripted run of N cycles (one tool call per cycle, a result of 400 characters) is run
twice in one process: in memory, and persisted into a fresh `RunStore` (WAL,
``synchronous=NORMAL``), once with a tool declared ``idempotent`` (a lookup: its end
is committed with the next cycle, one transaction a cycle) and once with a tool that
may not run twice (its end is committed as it comes: two). The checkpoint cost per
cycle is the time spent inside the journal's awaited steps (measured around each call);
the end-to-end overhead is the difference of the two runs. Beside them, the same number of bare
``INSERT`` + ``COMMIT`` transactions into a fresh WAL database with the same settings
gives the floor any durable write pays (its log moved into the file as the store moves
its own: by a thread, after commits). Resume time is loading the finished run plus
the time until the resumed run sends its first model request.

A commit's cost follows the pages it writes to the write-ahead log. One more run of each
kind, with the log kept whole (no checkpointing), counts the pages a cycle writes, by
the table (or index) each belongs to (``--pages`` prints them), beside the bare write's,
and the transactions; counting them calls Python for each statement, so it stays out
of the timed runs.

A run's task is stored in its row, which is written again at every cycle: ``--task-chars``
makes the task longer (a coding agent's issue text runs to thousands of characters).

Run: ``python benchmarks/bench_checkpoint.py [--cycles 100 1000] [--repeat 3] [--pages]
[--task-chars N] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from convergent import Agent, Limits, ModelResponse, ScriptedModel, StopPolicy, ToolCall, tool
from convergent.durability.protocol import JournaledRun
from convergent.durability.sqlite import RunStore, SqliteJournal
from convergent.durability.sqlite._wal import SAFETY_NET_PAGES, WalCheckpointer
from convergent.messages import Message, ToolSpec

RESULT_CHARS = 400
STEPS = ("started", "calls_ready", "finished", "stopped", "delivered", "before_call")


@tool(timeout=None, idempotent=True)
async def lookup(n: int) -> str:
    """Return a fixed-size text for a number.

    Args:
        n: A number.
    """
    return f"{n}:" + "x" * RESULT_CHARS


@tool(timeout=None, name="lookup")
async def once(n: int) -> str:
    """Return a fixed-size text for a number (as a tool that may not run twice).

    Args:
        n: A number.
    """
    return f"{n}:" + "x" * RESULT_CHARS


TOOLS = {"idempotent": lookup, "once": once}


def script(cycles: int) -> ScriptedModel:
    made = 0

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        nonlocal made
        made += 1
        if made >= cycles:
            return ModelResponse(content="done")
        call = ToolCall(id=f"c{made}", name="lookup", arguments={"n": made})
        return ModelResponse(content="next", tool_calls=(call,))

    return ScriptedModel(reply, record_requests=False)


class TimedStore(RunStore):
    """A `RunStore` whose journals record the seconds spent in each awaited step."""

    spent: list[float]

    def journal(self, run: JournaledRun | str, **legacy: Any) -> SqliteJournal:
        journal = super().journal(run, **legacy)
        for step in STEPS:
            original = getattr(journal, step)

            async def timed(*args: Any, _original: Any = original, **kw: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await _original(*args, **kw)
                finally:
                    self.spent.append(time.perf_counter() - started)

            setattr(journal, step, timed)
        return journal


def agent(cycles: int, kind: str = "idempotent") -> Agent:
    return Agent(
        script(cycles),
        [TOOLS[kind]],
        system_prompt="benchmark",
        limits=Limits(max_cycles=cycles + 1),
        policy=StopPolicy(max_repeated_calls=cycles + 1),
        record_events=False,
    )


def bare_database(path: Path, autocheckpoint: int) -> sqlite3.Connection:
    """A fresh WAL database with the store's sync setting and one table, for bare commits."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA wal_autocheckpoint={autocheckpoint}")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data TEXT)")
    return conn


def bare_commits(
    conn: sqlite3.Connection, cycles: int, committed: Callable[[], None] = lambda: None
) -> None:
    """``cycles`` transactions of one INSERT of a result-sized row each."""
    payload = "x" * RESULT_CHARS
    for n in range(cycles):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (data) VALUES (?)", (payload + str(n),))
        conn.execute("COMMIT")
        committed()


def bare_sqlite(folder: Path, cycles: int) -> float:
    """Seconds per cycle of one INSERT + COMMIT into a fresh WAL database.

    With the store's handling of the write-ahead log: moved into the file by a thread of
    its own after commits, not inside the commit that fills it (which would add a sync
    to one commit in about a thousand, and its noise to the floor).
    """
    path = folder / "bare.db"
    conn = bare_database(path, SAFETY_NET_PAGES)
    checkpointer = WalCheckpointer(path)
    started = time.perf_counter()
    bare_commits(conn, cycles, checkpointer.committed)
    seconds = time.perf_counter() - started
    checkpointer.close()
    conn.close()
    return seconds / cycles


WAL_HEADER, FRAME_HEADER = 32, 24
"""Bytes of the write-ahead log's header and of each frame's (SQLite's file format)."""


def wal_pages(database: Path, conn: sqlite3.Connection) -> collections.Counter[str]:
    """The pages in ``database``'s write-ahead log, counted by the table or index owning each."""
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    owners = dict(conn.execute("SELECT pageno, name FROM dbstat"))
    log = Path(f"{database}-wal").read_bytes()
    pages: collections.Counter[str] = collections.Counter()
    for offset in range(WAL_HEADER, len(log) - FRAME_HEADER, FRAME_HEADER + page_size):
        number = int.from_bytes(log[offset : offset + 4], "big")
        pages[owners.get(number, "free")] += 1
    return pages


class _KeptLog:
    """Stands in for the store's WAL checkpointer: the log keeps every page written."""

    def committed(self) -> None:
        pass

    def close(self) -> None:
        pass


async def pages_per_cycle(cycles: int, folder: Path, kind: str, task: str) -> dict[str, float]:
    """WAL pages a checkpointed cycle writes, by owner (``bare``: one bare INSERT+COMMIT),
    and its transactions (``transactions``), counted here, outside the timed runs."""
    store = RunStore(folder / "pages.db")
    store._checkpointer = _KeptLog()  # type: ignore[assignment]  # noqa: SLF001
    store._conn.execute("PRAGMA wal_autocheckpoint=0")  # noqa: SLF001
    transactions = 0

    def count(statement: str) -> None:
        nonlocal transactions
        transactions += statement.startswith("BEGIN")

    store._conn.set_trace_callback(count)  # noqa: SLF001
    await agent(cycles, kind).run(task, run_id="pages", store=store)
    store._conn.set_trace_callback(None)  # noqa: SLF001
    ours = wal_pages(folder / "pages.db", store._conn)  # noqa: SLF001
    store.close()
    bare = bare_database(folder / "bare-pages.db", 0)
    before = sum(wal_pages(folder / "bare-pages.db", bare).values())
    bare_commits(bare, cycles)
    floor = sum(wal_pages(folder / "bare-pages.db", bare).values()) - before
    bare.close()
    return {
        **{owner: count / cycles for owner, count in ours.most_common()},
        "bare": floor / cycles,
        "transactions": transactions / cycles,
    }


def database_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("runs.db*"))


async def measure(cycles: int, folder: Path, kind: str, task: str) -> dict[str, Any]:
    started = time.perf_counter()
    await agent(cycles, kind).run(task, run_id="plain")
    plain = time.perf_counter() - started

    store = TimedStore(folder / "runs.db")
    store.spent = []
    started = time.perf_counter()
    result = await agent(cycles, kind).run(task, run_id="bench", store=store)
    persisted = time.perf_counter() - started
    assert result.cycles == cycles, result.stop_detail

    started = time.perf_counter()
    state = RunStore(folder / "runs.db").load("bench")
    loaded = time.perf_counter() - started
    first_request: list[float] = []

    def first(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        first_request.append(time.perf_counter())
        return ModelResponse(content="resumed")

    resumer = Agent(
        ScriptedModel(first, record_requests=False),
        [TOOLS[kind]],
        limits=Limits(max_cycles=cycles + 2),
        policy=StopPolicy(max_repeated_calls=cycles + 1),
        record_events=False,
    )
    started = time.perf_counter()
    await resumer.run(state=state, store=store)
    to_first_request = first_request[0] - started
    store.close()
    return {
        "tool": kind,
        "cycles": cycles,
        "messages": len(result.messages),
        "checkpoint_ms_per_cycle": sum(store.spent) / cycles * 1e3,
        "end_to_end_overhead_ms_per_cycle": (persisted - plain) / cycles * 1e3,
        "bare_insert_commit_ms": bare_sqlite(folder, cycles) * 1e3,
        "resume_ms": (loaded + to_first_request) * 1e3,
        "database_bytes": database_bytes(folder),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeat", type=int, default=3, help="median of N runs")
    parser.add_argument("--pages", action="store_true", help="print WAL pages by table")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument(
        "--task-chars", type=int, default=0, help="make the task this many characters longer"
    )
    args = parser.parse_args()
    task = "benchmark" + " x" * (args.task_chars // 2)
    rows = []
    for cycles, kind in [(cycles, kind) for cycles in args.cycles for kind in TOOLS]:
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as folder:
                runs.append(asyncio.run(measure(cycles, Path(folder), kind, task)))
        with tempfile.TemporaryDirectory() as folder:
            pages = asyncio.run(pages_per_cycle(cycles, Path(folder), kind, task))
        row = {key: runs[0][key] for key in ("tool", "cycles", "messages")}
        row["transactions_per_cycle"] = pages.pop("transactions")
        row["wal_pages_per_cycle"] = {"bare": pages.pop("bare"), **pages}
        for key in (
            "checkpoint_ms_per_cycle",
            "end_to_end_overhead_ms_per_cycle",
            "bare_insert_commit_ms",
            "resume_ms",
            "database_bytes",
        ):
            row[key] = statistics.median(run[key] for run in runs)
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"load average: {os.getloadavg()[0]:.2f} (2 cores); median of {args.repeat} runs; "
        f"a task of {len(task):,} characters"
    )
    header = (
        f"{'tool':>11} {'cycles':>7} {'checkpoint ms/cycle':>20} {'end-to-end ms/cycle':>20} "
        f"{'bare INSERT+COMMIT ms':>22} {'ratio':>6} {'txn/cycle':>10} {'resume ms':>10} "
        f"{'WAL pages/cycle (bare)':>23}"
    )
    print(header)
    for row in rows:
        ratio = row["checkpoint_ms_per_cycle"] / row["bare_insert_commit_ms"]
        pages = row["wal_pages_per_cycle"]
        ours = sum(count for owner, count in pages.items() if owner != "bare")
        written = f"{ours:.1f} ({pages['bare']:.1f})"
        print(
            f"{row['tool']:>11} {row['cycles']:>7} {row['checkpoint_ms_per_cycle']:>20.3f} "
            f"{row['end_to_end_overhead_ms_per_cycle']:>20.3f} "
            f"{row['bare_insert_commit_ms']:>22.3f} {ratio:>6.1f} "
            f"{row['transactions_per_cycle']:>10.2f} {row['resume_ms']:>10.1f} "
            f"{written:>23}"
        )
    if args.pages:
        for row in rows:
            owners = ", ".join(
                f"{owner} {count:.2f}"
                for owner, count in row["wal_pages_per_cycle"].items()
                if owner != "bare" and count >= 0.05
            )
            print(f"{row['tool']} x {row['cycles']}: {owners}")


if __name__ == "__main__":
    main()
