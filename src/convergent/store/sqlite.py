"""Checkpoints in SQLite: every run's state, saved as it changes, so a run can resume.

One database file (WAL mode) holds any number of runs. What is stored, and when:

- ``runs``: one row per run with the live summary (cycles, usage, status, stop reason)
  and where its conversation is (``epoch``, ``message_count``).
- ``messages``: the conversation, append-only. Compaction or a rewind rewrites it
  under a new ``epoch``; older epochs stay so that older checkpoints remain readable.
- ``checkpoints``: one row per finished cycle (epoch, message count, usage), the
  points `RunStore.rewind` can return to.
- ``finished_calls``: one row per tool call, committed the moment the call finishes,
  before the loop records it. A process killed mid-batch loses no finished call.
- ``call_counts``: per-cycle increments of the repeated-call counters.
- ``steering``: commands sent from other processes (`DatabaseSteering`).
- ``snapshots`` / ``blobs``: file contents saved before a file-modifying tool ran
  (`convergent.store.rollback`).

Every write happens in its own short transaction. With ``synchronous=NORMAL`` (the
default) a committed transaction survives the process being killed; pass
``durable=True`` to also survive a power loss, at the cost of an fsync per commit.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from convergent.events import (
    CycleStarted,
    Event,
    ModelResponded,
    RunStarted,
    RunStopped,
    ToolFinished,
    ToolStarted,
)
from convergent.exceptions import UserError
from convergent.messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from convergent.state import RunState, ToolCallRecord
from convergent.stop import StopReason
from convergent.store import rollback
from convergent.tools import Tool

__all__ = [
    "DB_SCHEMA_VERSION",
    "DEFAULT_DB_PATH",
    "CheckpointObserver",
    "PendingQuestion",
    "RunStore",
    "RunSummary",
]

DB_SCHEMA_VERSION = 1
"""Version of the table layout, kept in ``PRAGMA user_version``."""

DEFAULT_DB_PATH = Path(".convergent") / "runs.db"
"""Where the CLI keeps checkpoints, relative to the working directory."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT,
    stop_detail TEXT NOT NULL DEFAULT '',
    output TEXT NOT NULL DEFAULT '',
    cycles INTEGER NOT NULL,
    usage TEXT NOT NULL,
    elapsed REAL NOT NULL,
    started_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    pid INTEGER,
    workspace TEXT,
    config TEXT NOT NULL DEFAULT '{}',
    epoch INTEGER NOT NULL,
    message_count INTEGER NOT NULL,
    state_version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    run_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, epoch, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (
    run_id TEXT NOT NULL,
    cycle INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    message_count INTEGER NOT NULL,
    usage TEXT NOT NULL,
    elapsed REAL NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, cycle)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS finished_calls (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    cycle INTEGER NOT NULL,
    position INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    outcome TEXT NOT NULL,
    result TEXT NOT NULL,
    duration REAL NOT NULL,
    finished_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS finished_calls_run ON finished_calls (run_id, cycle);
CREATE TABLE IF NOT EXISTS call_counts (
    run_id TEXT NOT NULL,
    cycle INTEGER NOT NULL,
    key TEXT NOT NULL,
    delta INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS call_counts_run ON call_counts (run_id, cycle);
CREATE TABLE IF NOT EXISTS steering (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    consumed_at REAL
);
CREATE INDEX IF NOT EXISTS steering_pending ON steering (run_id, consumed_at);
CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY,
    data BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    cycle INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    path TEXT NOT NULL,
    hash TEXT,
    existed INTEGER NOT NULL,
    taken_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS snapshots_run ON snapshots (run_id, cycle);
"""

_RUN_TABLES = ("messages", "checkpoints", "finished_calls", "call_counts", "steering", "snapshots")

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_NEEDS_USER = "needs_user"


def _usage_json(state: RunState) -> str:
    usage = state.usage
    return json.dumps(
        {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "requests": usage.requests,
            "cost": usage.cost,
        }
    )


def _pid_alive(pid: int | None) -> bool:
    if pid is None or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # A killed child that its parent has not reaped yet still answers kill(0).
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One stored run, as ``convergent runs`` lists it."""

    run_id: str
    """Id of the run."""
    task: str
    """The original task."""
    model: str
    """Name of the model backend."""
    cycles: int
    """Model requests made so far."""
    stop_reason: StopReason | None
    """Why it stopped; None while running or when its process died."""
    stop_detail: str
    """Detail of the stop."""
    output: str
    """Final output, once stopped."""
    started_at: float
    """Unix time the run first started."""
    updated_at: float
    """Unix time of the last checkpoint."""
    running: bool
    """Whether a live process is running it now."""
    workspace: str | None
    """Workspace folder the run's file tools used, if recorded."""
    config: dict[str, Any] = field(default_factory=dict)
    """Opaque settings stored with the run (the CLI keeps what ``resume`` needs)."""

    @property
    def status(self) -> str:
        """``running``, ``interrupted`` (its process died) or the stop reason."""
        if self.running:
            return "running"
        if self.stop_reason is None:
            return "interrupted"
        return self.stop_reason.value

    @property
    def resumable(self) -> bool:
        """Whether ``resume`` may continue it: not running, and not ``completed``."""
        if self.running:
            return False
        return self.stop_reason is None or self.stop_reason.resumable


@dataclass(frozen=True, slots=True)
class PendingQuestion:
    """A tool call waiting for the user's answer (the run stopped ``needs_user``)."""

    call_id: str
    """Id of the call the answer is for."""
    question: str
    """What the tool asked."""


class RunStore:
    """A SQLite database of checkpointed runs.

    Args:
        path: Database file; created (with its folder) if missing.
        durable: Use ``synchronous=FULL`` so commits survive a power loss, not only a
            killed process.
        timeout: Seconds to wait for another process's write lock.

    Raises:
        UserError: If the file cannot be opened or was written by a newer version.
    """

    def __init__(
        self, path: str | Path = DEFAULT_DB_PATH, *, durable: bool = False, timeout: float = 10.0
    ) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self._migrate()
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"cannot open checkpoint database {self.path}: {exc}") from None
        self._lock = threading.RLock()

    def _migrate(self) -> None:
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        if version > DB_SCHEMA_VERSION:
            raise UserError(
                f"{self.path} has schema version {version}; this convergent reads up to "
                f"{DB_SCHEMA_VERSION}"
            )
        if version < DB_SCHEMA_VERSION:
            self._conn.executescript(
                f"BEGIN;{_SCHEMA}PRAGMA user_version={DB_SCHEMA_VERSION};COMMIT;"
            )

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed on success and rolled back on error."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read query and return every row."""
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    # -- runs -------------------------------------------------------------------------

    def _summary(self, row: tuple[Any, ...]) -> RunSummary:
        (
            run_id,
            task,
            model,
            status,
            reason,
            detail,
            output,
            cycles,
            started,
            updated,
            pid,
            workspace,
            config,
        ) = row
        return RunSummary(
            run_id=run_id,
            task=task,
            model=model,
            cycles=cycles,
            stop_reason=StopReason(reason) if reason else None,
            stop_detail=detail,
            output=output,
            started_at=started,
            updated_at=updated,
            running=status == "running" and _pid_alive(pid),
            workspace=workspace,
            config=json.loads(config),
        )

    _SUMMARY_COLUMNS = (
        "run_id, task, model, status, stop_reason, stop_detail, output, cycles, started_at, "
        "updated_at, pid, workspace, config"
    )

    def list_runs(self, limit: int | None = None) -> list[RunSummary]:
        """Stored runs, most recently updated first."""
        sql = f"SELECT {self._SUMMARY_COLUMNS} FROM runs ORDER BY updated_at DESC"
        if limit is not None:
            return [self._summary(row) for row in self.query(sql + " LIMIT ?", [limit])]
        rows = self.query(sql)
        return [self._summary(row) for row in rows]

    def exists(self, run_id: str) -> bool:
        """Whether a run with this id is stored."""
        return bool(self.query("SELECT 1 FROM runs WHERE run_id = ?", [run_id]))

    def get_run(self, run_id: str) -> RunSummary:
        """The summary of one run.

        Raises:
            UserError: If no run has this id.
        """
        rows = self.query(f"SELECT {self._SUMMARY_COLUMNS} FROM runs WHERE run_id = ?", [run_id])
        if not rows:
            raise UserError(f"no run {run_id!r} in {self.path}")
        return self._summary(rows[0])

    def checkpoint_cycles(self, run_id: str) -> list[int]:
        """Cycles a run can be rewound to, oldest first."""
        rows = self.query("SELECT cycle FROM checkpoints WHERE run_id = ? ORDER BY cycle", [run_id])
        return [cycle for (cycle,) in rows]

    def load(self, run_id: str, *, cycle: int | None = None) -> RunState:
        """The state to continue a run from.

        Without ``cycle``: the latest state, including every tool call that finished
        before its process stopped (even if it was killed mid-batch). With ``cycle``: the
        state at the end of that cycle.

        Raises:
            UserError: If the run or the checkpoint does not exist.
        """
        with self._lock:
            return self._load(run_id, cycle)

    def _load(self, run_id: str, cycle: int | None) -> RunState:
        row = self._conn.execute(
            "SELECT task, model, cycles, usage, elapsed, started_at, stop_reason, stop_detail, "
            "output, epoch, message_count, state_version FROM runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise UserError(f"no run {run_id!r} in {self.path}")
        (
            task,
            model,
            cycles,
            usage,
            elapsed,
            started_at,
            reason,
            detail,
            output,
            epoch,
            count,
            version,
        ) = row
        if cycle is not None:
            point = self._conn.execute(
                "SELECT epoch, message_count, usage, elapsed FROM checkpoints "
                "WHERE run_id = ? AND cycle = ?",
                (run_id, cycle),
            ).fetchone()
            if point is None:
                known = ", ".join(map(str, self.checkpoint_cycles(run_id))) or "none"
                raise UserError(f"run {run_id!r} has no checkpoint for cycle {cycle}; have {known}")
            epoch, count, usage, elapsed = point
            cycles, reason, detail, output = cycle, None, "", ""
        limit = cycles if cycle is not None else None
        data = {
            "run_id": run_id,
            "task": task,
            "model": model,
            "messages": self._messages(run_id, epoch, count),
            "cycles": cycles,
            "usage": json.loads(usage),
            "tool_calls": [_record_json(r) for r in self._finished(run_id, limit, executed=True)],
            "call_counts": self._call_counts(run_id, limit),
            "elapsed": elapsed,
            "started_at": started_at,
            "stop_reason": reason,
            "stop_detail": detail,
            "output": output,
            "schema_version": version,
        }
        state = RunState.from_jsonable(data)
        if cycle is None:
            self._recover_finished(state)
        return state

    def _messages(self, run_id: str, epoch: int, count: int) -> list[Any]:
        rows = self._conn.execute(
            "SELECT data FROM messages WHERE run_id = ? AND epoch = ? AND seq < ? ORDER BY seq",
            (run_id, epoch, count),
        ).fetchall()
        if len(rows) != count:
            raise UserError(f"run {run_id!r}: checkpoint is missing messages ({len(rows)}/{count})")
        messages: list[Any] = json.loads("[" + ",".join(data for (data,) in rows) + "]")
        return messages

    def _finished(
        self, run_id: str, max_cycle: int | None, *, executed: bool
    ) -> list[tuple[Any, ...]]:
        sql = (
            "SELECT cycle, call_id, name, arguments, outcome, result, duration "
            "FROM finished_calls WHERE run_id = ?"
        )
        params: list[Any] = [run_id]
        if executed:
            sql += " AND outcome != ?"
            params.append(_NEEDS_USER)
        if max_cycle is not None:
            sql += " AND cycle <= ?"
            params.append(max_cycle)
        return self._conn.execute(sql + " ORDER BY cycle, position, id", params).fetchall()

    def _call_counts(self, run_id: str, max_cycle: int | None) -> dict[str, int]:
        sql = "SELECT key, SUM(delta) FROM call_counts WHERE run_id = ?"
        params: list[Any] = [run_id]
        if max_cycle is not None:
            sql += " AND cycle <= ?"
            params.append(max_cycle)
        rows = self._conn.execute(sql + " GROUP BY key", params).fetchall()
        return {key: total for key, total in rows if total}

    def _recover_finished(self, state: RunState) -> None:
        """Give pending calls the results their (killed) process committed for them."""
        pending = state.pending_calls()
        if not pending:
            return
        rows = self._conn.execute(
            "SELECT call_id, name, outcome, result FROM finished_calls "
            "WHERE run_id = ? AND cycle = ? AND outcome != ? ORDER BY id",
            (state.run_id, state.cycles, _NEEDS_USER),
        ).fetchall()
        finished = {call_id: (name, outcome, result) for call_id, name, outcome, result in rows}
        for call in pending:
            if call.id in finished:
                name, outcome, result = finished[call.id]
                state.messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id, name=name, content=result, is_error=outcome != "ok"
                    )
                )

    def pending_questions(self, run_id: str) -> list[PendingQuestion]:
        """Calls of the latest cycle that asked the user and still wait for an answer."""
        state = self.load(run_id)
        pending = {call.id for call in state.pending_calls()}
        rows = self.query(
            "SELECT call_id, result FROM finished_calls WHERE run_id = ? AND cycle = ? "
            "AND outcome = ? ORDER BY position, id",
            [run_id, state.cycles, _NEEDS_USER],
        )
        return [PendingQuestion(call_id, text) for call_id, text in rows if call_id in pending]

    def set_config(self, run_id: str, config: Mapping[str, Any]) -> None:
        """Store opaque settings with a run (what a later ``resume`` needs to rebuild it)."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE runs SET config = ? WHERE run_id = ?", (json.dumps(dict(config)), run_id)
            )

    def delete(self, run_id: str) -> None:
        """Remove a run and everything stored for it."""
        with self.transaction() as conn:
            for table in _RUN_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            rollback.drop_unused_blobs(conn)

    # -- steering ---------------------------------------------------------------------

    def send_steering(self, run_id: str, kind: str, text: str = "") -> None:
        """Queue a steering command (``message``, ``stop``, ``pause``, ``resume``) for a run.

        Raises:
            UserError: For an unknown run or kind.
        """
        if kind not in ("message", "stop", "pause", "resume"):
            raise UserError(f"unknown steering command {kind!r}")
        if not self.exists(run_id):
            raise UserError(f"no run {run_id!r} in {self.path}")
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO steering (run_id, kind, text, created_at) VALUES (?, ?, ?, ?)",
                (run_id, kind, text, time.time()),
            )

    def take_steering(self, run_id: str) -> list[tuple[str, str]]:
        """Claim every unconsumed steering command of a run, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, kind, text FROM steering WHERE run_id = ? AND consumed_at IS NULL "
                "ORDER BY id",
                (run_id,),
            ).fetchall()
            if not rows:
                return []
            with self.transaction() as conn:
                claimed = conn.execute(
                    f"UPDATE steering SET consumed_at = ? WHERE consumed_at IS NULL AND id IN "
                    f"({','.join('?' * len(rows))}) RETURNING id",
                    (time.time(), *(row[0] for row in rows)),
                ).fetchall()
            mine = {row_id for (row_id,) in claimed}
            return [(kind, text) for row_id, kind, text in rows if row_id in mine]

    # -- rollback ---------------------------------------------------------------------

    def rewind(self, run_id: str, cycle: int) -> rollback.RewindResult:
        """Restore a run's workspace files and conversation to the end of ``cycle``.

        Files a file-modifying tool changed after that cycle get the content they had
        before the first such change (files such a tool created are deleted). Later
        checkpoints, results and snapshots are discarded; the run is left ``stopped``
        and can be resumed from that cycle.

        Raises:
            UserError: If the run is running, or has no checkpoint for ``cycle``.
        """
        summary = self.get_run(run_id)
        if summary.running:
            raise UserError(f"run {run_id!r} is running; stop it before rewinding")
        with self._lock:
            state = self._load(run_id, cycle)
            state.stop_reason, state.stop_detail = StopReason.STOPPED, f"rewound to cycle {cycle}"
            with self.transaction() as conn:
                workspace = Path(summary.workspace) if summary.workspace else None
                result = rollback.restore(conn, run_id, cycle, workspace)
                for table in ("checkpoints", "finished_calls", "call_counts", "snapshots"):
                    conn.execute(
                        f"DELETE FROM {table} WHERE run_id = ? AND cycle > ?", (run_id, cycle)
                    )
                epoch = _next_epoch(conn, run_id)
                _insert_messages(conn, run_id, epoch, 0, state.messages)
                conn.execute(
                    "UPDATE runs SET status = 'stopped', stop_reason = ?, stop_detail = ?, "
                    "output = '', cycles = ?, usage = ?, elapsed = ?, updated_at = ?, "
                    "epoch = ?, message_count = ? WHERE run_id = ?",
                    (
                        StopReason.STOPPED.value,
                        state.stop_detail,
                        cycle,
                        _usage_json(state),
                        state.elapsed,
                        time.time(),
                        epoch,
                        len(state.messages),
                        run_id,
                    ),
                )
                rollback.drop_unused_blobs(conn)
        return result


def _record_json(row: tuple[Any, ...]) -> dict[str, Any]:
    cycle, call_id, name, arguments, outcome, result, duration = row
    return {
        "cycle": cycle,
        "id": call_id,
        "name": name,
        "arguments": json.loads(arguments),
        "ok": outcome == "ok",
        "outcome": outcome,
        "result": result,
        "duration": duration,
    }


def _next_epoch(conn: sqlite3.Connection, run_id: str) -> int:
    (last,) = conn.execute(
        "SELECT COALESCE(MAX(epoch), 0) FROM messages WHERE run_id = ?", (run_id,)
    ).fetchone()
    return int(last) + 1


def _dump(message: Message) -> str:
    return _MESSAGE.dump_json(message).decode()


def _insert_messages(
    conn: sqlite3.Connection, run_id: str, epoch: int, start: int, messages: Iterable[Message]
) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO messages (run_id, epoch, seq, data) VALUES (?, ?, ?, ?)",
        [(run_id, epoch, seq, _dump(m)) for seq, m in enumerate(messages, start)],
    )


def _find_call(messages: list[Message], call_id: str) -> tuple[int, ToolCall | None]:
    """Position and request of ``call_id`` in the latest assistant message with calls."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            for position, call in enumerate(message.tool_calls):
                if call.id == call_id:
                    return position, call
            return -1, None
    return -1, None


@dataclass(slots=True)
class _Tracked:
    """What one observer has persisted of one run so far."""

    epoch: int
    saved: list[Message]
    pinned: int
    counts: dict[str, int]
    counted_cycle: int
    clock: float
    elapsed_before: float
    snapshotted: set[tuple[int, str]] = field(default_factory=set)


class CheckpointObserver:
    """A `RunObserver` that saves a run to a `RunStore` as it happens.

    The assistant message that requests tool calls is committed before the calls start;
    each call's result is committed as soon as it finishes; the cycle's checkpoint is
    committed at the next cycle boundary. Before a tool marked ``modifies_files`` starts,
    the files it names (arguments ``path``, ``paths``, ``file``, ``files``,
    ``file_path``, ``filename``), or every workspace file if it names none, are
    snapshotted so that `RunStore.rewind` can restore them.

    Args:
        store: Where to save.
        tools: The agent's tools (to know which modify files); omit to skip snapshots.
        workspace: Folder that file-modifying tools work in; None disables snapshots.
        config: Opaque settings stored with each new run (see `RunStore.set_config`).
    """

    def __init__(
        self,
        store: RunStore,
        *,
        tools: Iterable[Tool] | Mapping[str, Tool] = (),
        workspace: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        listed = tools.values() if isinstance(tools, Mapping) else tools
        self._modifying = {t.name for t in listed if t.modifies_files}
        self.workspace = Path(workspace).resolve() if workspace is not None else None
        self.config = dict(config or {})
        self._runs: dict[str, _Tracked] = {}

    def on_event(self, event: Event, state: RunState) -> None:
        """Persist what ``event`` changed in ``state``."""
        if isinstance(event, RunStarted):
            self._start(state, resumed=event.resumed)
            return
        tracked = self._runs.get(state.run_id)
        if tracked is None:
            return
        match event:
            case ToolFinished():
                self._finished(tracked, event, state)
            case ToolStarted():
                self._tool_started(tracked, event, state)
            case CycleStarted():
                self._checkpoint(tracked, state, event.cycle - 1, status="running")
            case RunStopped():
                self._checkpoint(tracked, state, state.cycles, status="stopped")
                del self._runs[state.run_id]
            case ModelResponded():
                with self.store.transaction() as conn:
                    self._sync(conn, tracked, state)
                    self._update_live(conn, tracked, state, state.cycles)
            case _:
                rewritten = getattr(event, "rewrites_history", False)
                if rewritten or not self._in_sync(tracked, state):
                    with self.store.transaction() as conn:
                        self._sync(conn, tracked, state, force_new_epoch=rewritten)
                        self._update_live(conn, tracked, state, state.cycles)

    def _elapsed(self, tracked: _Tracked) -> float:
        return tracked.elapsed_before + time.monotonic() - tracked.clock

    def _start(self, state: RunState, *, resumed: bool) -> None:
        tracked = _Tracked(
            epoch=0,
            saved=[],
            pinned=0,
            counts={},
            counted_cycle=-1,
            clock=time.monotonic(),
            elapsed_before=state.elapsed,
        )
        with self.store.transaction() as conn:
            row = conn.execute(
                "SELECT epoch, message_count FROM runs WHERE run_id = ?", (state.run_id,)
            ).fetchone()
            if row is not None and not resumed:
                raise UserError(f"a run {state.run_id!r} already exists in {self.store.path}")
            if row is None:
                self._insert_run(conn, state)
            else:
                self._adopt(conn, tracked, state, epoch=row[0], count=row[1])
                conn.execute(
                    "UPDATE runs SET status = 'running', stop_reason = NULL, stop_detail = '', "
                    "pid = ? WHERE run_id = ?",
                    (os.getpid(), state.run_id),
                )
            self._sync(conn, tracked, state)
            self._sync_counts(conn, tracked, state, state.cycles)
            self._write_checkpoint(conn, tracked, state, state.cycles)
            self._update_live(conn, tracked, state, state.cycles)
        self._runs[state.run_id] = tracked

    def _insert_run(self, conn: sqlite3.Connection, state: RunState) -> None:
        now = time.time()
        conn.execute(
            "INSERT INTO runs (run_id, task, model, status, cycles, usage, elapsed, started_at, "
            "updated_at, pid, workspace, config, epoch, message_count, state_version) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?)",
            (
                state.run_id,
                state.task,
                state.model,
                state.cycles,
                _usage_json(state),
                state.elapsed,
                state.started_at or now,
                now,
                os.getpid(),
                str(self.workspace) if self.workspace is not None else None,
                json.dumps(self.config),
                state.schema_version,
            ),
        )
        if state.tool_calls:
            self._insert_records(conn, state.run_id, state.tool_calls)

    def _adopt(
        self,
        conn: sqlite3.Connection,
        tracked: _Tracked,
        state: RunState,
        *,
        epoch: int,
        count: int,
    ) -> None:
        """Continue the stored epoch and counters when ``state`` extends what is stored."""
        messages = state.messages
        if 0 < count <= len(messages):
            first, last = conn.execute(
                "SELECT (SELECT data FROM messages WHERE run_id = ?1 AND epoch = ?2 AND seq = 0),"
                " (SELECT data FROM messages WHERE run_id = ?1 AND epoch = ?2 AND seq = ?3)",
                (state.run_id, epoch, count - 1),
            ).fetchone()
            if first == _dump(messages[0]) and last == _dump(messages[count - 1]):
                tracked.epoch, tracked.saved, tracked.pinned = epoch, messages[:count], count
        tracked.counts = self.store._call_counts(state.run_id, None)  # noqa: SLF001
        (stored,) = conn.execute(
            "SELECT COUNT(*) FROM finished_calls WHERE run_id = ? AND outcome != ?",
            (state.run_id, _NEEDS_USER),
        ).fetchone()
        if stored != len(state.tool_calls):
            conn.execute(
                "DELETE FROM finished_calls WHERE run_id = ? AND outcome != ?",
                (state.run_id, _NEEDS_USER),
            )
            self._insert_records(conn, state.run_id, state.tool_calls)

    @staticmethod
    def _insert_records(
        conn: sqlite3.Connection, run_id: str, records: Iterable[ToolCallRecord]
    ) -> None:
        now = time.time()
        conn.executemany(
            "INSERT INTO finished_calls (run_id, cycle, position, call_id, name, arguments, "
            "outcome, result, duration, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    r.cycle,
                    index,
                    r.id,
                    r.name,
                    json.dumps(r.arguments),
                    r.outcome,
                    r.result,
                    r.duration,
                    now,
                )
                for index, r in enumerate(records)
            ],
        )

    @staticmethod
    def _in_sync(tracked: _Tracked, state: RunState) -> bool:
        saved, messages = tracked.saved, state.messages
        return len(messages) == len(saved) and (not saved or messages[-1] is saved[-1])

    def _sync(
        self,
        conn: sqlite3.Connection,
        tracked: _Tracked,
        state: RunState,
        *,
        force_new_epoch: bool = False,
    ) -> None:
        """Write the messages that changed since the last write.

        Messages are immutable and only appended, except when the last one is replaced
        (the gate rewrites the calls it rejects) or history is rewritten (compaction,
        which emits an event with ``rewrites_history``); the latter starts a new epoch.
        """
        if not force_new_epoch and self._in_sync(tracked, state):
            return
        messages, saved = state.messages, tracked.saved
        keep = min(len(saved), len(messages))
        steps = 0
        while keep > 0 and messages[keep - 1] is not saved[keep - 1] and steps < 4:
            keep, steps = keep - 1, steps + 1
        prefix_ok = keep == 0 or (messages[keep - 1] is saved[keep - 1] and messages[0] is saved[0])
        if force_new_epoch or tracked.epoch == 0 or not prefix_ok or keep < tracked.pinned:
            tracked.epoch = _next_epoch(conn, state.run_id)
            tracked.pinned, keep = 0, 0
        elif keep < len(saved):
            conn.execute(
                "DELETE FROM messages WHERE run_id = ? AND epoch = ? AND seq >= ?",
                (state.run_id, tracked.epoch, keep),
            )
        _insert_messages(conn, state.run_id, tracked.epoch, keep, messages[keep:])
        tracked.saved = list(messages)

    def _sync_counts(
        self, conn: sqlite3.Connection, tracked: _Tracked, state: RunState, cycle: int
    ) -> None:
        current, known = state.call_counts, tracked.counts
        if current == known:
            return
        deltas = [
            (state.run_id, cycle, key, count - known.get(key, 0))
            for key, count in current.items()
            if count != known.get(key, 0)
        ]
        deltas += [
            (state.run_id, cycle, key, -count) for key, count in known.items() if key not in current
        ]
        conn.executemany(
            "INSERT INTO call_counts (run_id, cycle, key, delta) VALUES (?, ?, ?, ?)", deltas
        )
        tracked.counts = dict(current)

    def _update_live(
        self,
        conn: sqlite3.Connection,
        tracked: _Tracked,
        state: RunState,
        cycles: int,
        status: str = "running",
    ) -> None:
        stopped = status == "stopped"
        conn.execute(
            "UPDATE runs SET status = ?, stop_reason = ?, stop_detail = ?, output = ?, "
            "cycles = ?, usage = ?, elapsed = ?, updated_at = ?, epoch = ?, message_count = ? "
            "WHERE run_id = ?",
            (
                status,
                state.stop_reason.value if stopped and state.stop_reason else None,
                state.stop_detail if stopped else "",
                state.output if stopped else "",
                cycles,
                _usage_json(state),
                state.elapsed if stopped else self._elapsed(tracked),
                time.time(),
                tracked.epoch,
                len(tracked.saved),
                state.run_id,
            ),
        )

    def _write_checkpoint(
        self, conn: sqlite3.Connection, tracked: _Tracked, state: RunState, cycle: int
    ) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO checkpoints (run_id, cycle, epoch, message_count, usage, "
            "elapsed, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                state.run_id,
                cycle,
                tracked.epoch,
                len(tracked.saved),
                _usage_json(state),
                self._elapsed(tracked),
                time.time(),
            ),
        )
        tracked.pinned = len(tracked.saved)

    def _checkpoint(self, tracked: _Tracked, state: RunState, cycle: int, *, status: str) -> None:
        with self.store.transaction() as conn:
            self._sync(conn, tracked, state)
            self._sync_counts(conn, tracked, state, cycle)
            self._write_checkpoint(conn, tracked, state, cycle)
            self._update_live(conn, tracked, state, cycle, status)

    def _tool_started(self, tracked: _Tracked, event: ToolStarted, state: RunState) -> None:
        snapshot = (
            event.name in self._modifying
            and self.workspace is not None
            and (event.cycle, event.call_id) not in tracked.snapshotted
        )
        first_of_cycle = tracked.counted_cycle != event.cycle
        if not snapshot and not first_of_cycle and self._in_sync(tracked, state):
            return
        with self.store.transaction() as conn:
            self._sync(conn, tracked, state)
            if first_of_cycle:
                self._sync_counts(conn, tracked, state, event.cycle)
                tracked.counted_cycle = event.cycle
            if snapshot and self.workspace is not None:
                tracked.snapshotted.add((event.cycle, event.call_id))
                rollback.snapshot_for_call(
                    conn, state.run_id, event.cycle, event.call_id, self.workspace, event.arguments
                )
            self._update_live(conn, tracked, state, state.cycles)

    def _finished(self, tracked: _Tracked, event: ToolFinished, state: RunState) -> None:
        position, call = _find_call(state.messages, event.call_id)
        arguments = call.arguments if call is not None else {}
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO finished_calls (run_id, cycle, position, call_id, name, arguments, "
                "outcome, result, duration, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    state.run_id,
                    event.cycle,
                    position,
                    event.call_id,
                    event.name,
                    json.dumps(arguments, default=str),
                    event.outcome,
                    event.result,
                    event.duration,
                    time.time(),
                ),
            )
