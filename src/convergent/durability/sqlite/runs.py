"""`RunStore`: the SQLite database of durable runs, and everything that reads it.

One database file (WAL mode) holds any number of runs:

- ``runs``: one row per run with the live summary (cycles, usage, status, stop reason),
  its agent spec (in the column ``recipe``, its first name) and where its conversation is
  (``epoch``, ``message_count``);
- ``messages``: the conversation, append-only; compaction or a rewind writes it again
  under a new ``epoch`` and older epochs stay, so older checkpoints remain readable;
- ``checkpoints``: one row per finished cycle, the points a rewind can return to;
- ``finished_calls``: one row per tool call, committed the moment it finishes;
- ``tools``: the name of every tool the stored calls are of, for the filters that list
  them;
- ``call_counts``: the repeated-call counters of runs written by version 1;
- ``events``: the events worth keeping (gate decisions, verdicts, redirects...);
- ``steering`` and ``questions``: commands and answers sent from other processes;
- ``snapshots`` / ``blobs``: file contents saved before a file-modifying tool ran.

Runs are written by a `convergent.durability.sqlite.journal.SqliteJournal`, which `Agent.run`
opens through `RunStore.journal` (``agent.run(task, store=store)``). With
``synchronous=NORMAL`` (the default) a committed write survives the process being
killed; ``durable=True`` also survives a power loss, at the cost of an fsync per commit.
"""

from __future__ import annotations

import contextvars
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

from convergent._deprecated import warn_old
from convergent._run_id import check_run_id, child_run_id
from convergent.clock import now
from convergent.durability.protocol import JournaledRun
from convergent.durability.sqlite import _claims, rollback
from convergent.durability.sqlite._codec import (
    delete_calls,
    insert_messages,
    mark_consumed,
    next_epoch,
    parse_usage,
    record_json,
    row_usage_json,
)
from convergent.durability.sqlite._schema import DB_SCHEMA_VERSION, connect, storage_error
from convergent.durability.sqlite._wal import WalCheckpointer
from convergent.durability.sqlite.claim import RunClaim
from convergent.durability.sqlite.journal import SqliteJournal
from convergent.exceptions import UserError
from convergent.messages import CallOutcome, ToolResultMessage, Usage
from convergent.state import RunState
from convergent.steering import SteeringKind
from convergent.stop import StopReason

__all__ = ["DB_SCHEMA_VERSION", "DEFAULT_DB_PATH", "PendingQuestion", "RunStore", "RunSummary"]

DEFAULT_DB_PATH = Path(".convergent") / "runs.db"
"""Where the CLI keeps runs, relative to the working directory."""

T = TypeVar("T")

_WAITED_FOR = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
"""Result codes that mean another connection holds a lock (waited for, up to the timeout)."""

_TOP_IN_ORDER = "+parent_run_id IS NULL"
"""The runs that are no other run's child, in a query that reads runs most recently
updated first: the ``+`` keeps SQLite from finding them by an index of their parent (or
stop reason) and then sorting every one of them, so that it reads them in the
``updated_at`` index's order and stops at the page's last row."""

_RUN_TABLES = (
    "messages",
    "checkpoints",
    "call_counts",
    "steering",
    "snapshots",
    "events",
    "questions",
)
"""The tables of a run's rows that `RunStore.delete` removes, besides its calls
(`delete_calls`) and its row in ``runs``."""


def live_pids(pids: Iterable[int | None]) -> set[int]:
    """The process ids among ``pids`` that exist on this machine.

    The running processes are listed once (on Linux, one listing of ``/proc``), so
    thousands of runs whose process died cost one listing, not thousands of system
    calls; each holder found there is then checked in full (`_claims.holder_alive`).
    """
    wanted = {pid for pid in pids if pid is not None and pid > 0}
    try:
        running = set(psutil.pids())
    except (OSError, psutil.Error):
        return wanted
    running.add(os.getpid())
    return wanted & running


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
    """Unix time of the last write."""
    running: bool
    """Whether a live process is running it now."""
    workspace: str | None
    """Workspace folder the run's file tools used, if recorded."""
    usage: Usage = field(default_factory=Usage)
    """Total usage so far."""
    elapsed: float = 0.0
    """Seconds spent running so far."""
    spec: dict[str, Any] | None = None
    """How to rebuild its agent (a `convergent.spec.AgentSpec`, as JSON), if stored."""
    config: dict[str, Any] = field(default_factory=dict)
    """Settings stored by convergent 0.1's command line (read as a spec when resuming)."""
    pid: int | None = None
    """Id of the process that runs it, or last ran it."""
    output_after_stop: bool = False
    """``output`` is the answer the model gave after the stop, in a request with no tools."""
    parent_run_id: str | None = None
    """The run that started this one by calling an agent as a tool; None for a top run."""
    parent_call_id: str | None = None
    """The id of that tool call in the parent run."""
    output_data: Any = None
    """The output as JSON data, validated against the agent's output type (``completed``
    runs of agents that declare one); else None."""
    paused: bool = False
    """Its running process took a pause (``steer --pause``) and holds the run."""

    @property
    def recipe(self) -> dict[str, Any] | None:
        """Deprecated name of `spec`."""
        warn_old("RunSummary.recipe is now RunSummary.spec")
        return self.spec

    @property
    def status(self) -> str:
        """Where the run is: ``running``, ``paused``, ``interrupted``, or its stop reason.

        ``paused``: running, held by a pause; ``interrupted``: its process died.
        """
        if self.running:
            return "paused" if self.paused else "running"
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
    """A SQLite database of durable runs.

    Example:
        >>> store = RunStore(".convergent/runs.db")
        >>> result = await agent.run("task", run_id="r1", store=store)
        >>> result = await resume("r1", store=store, agent=agent)  # after a crash or a stop

    Args:
        path: Database file; created (with its folder) if missing.
        durable: Use ``synchronous=FULL`` so commits survive a power loss, not only a
            killed process.
        timeout: Seconds to wait for another process's write lock.
        readonly: Open without writing anything (reading a database on a read-only
            disk, or one this process may not change).

    Raises:
        UserError: If the file was written by a newer version.
        StorageError: If it cannot be opened or is damaged.
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_DB_PATH,
        *,
        durable: bool = False,
        timeout: float = 10.0,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._conn = connect(self.path, timeout=timeout, durable=durable, readonly=readonly)
        self._lock = threading.RLock()
        self._sent = 0
        self._checkpointer: WalCheckpointer | None = None
        self._writer: ThreadPoolExecutor | None = None
        self._writer_lock = threading.Lock()
        self._queued = 0
        self._timeout_ms = int(timeout * 1000)
        self._syncs = durable
        if not readonly:
            # at rest the connection never waits: a journal's write learns at once that
            # another connection holds the lock; every other use waits (see `_patient`)
            self._conn.execute("PRAGMA busy_timeout = 0")

    def close(self) -> None:
        """Close the connection (after the pending writes, and moving the log into the file)."""
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, doing: str = "write run database") -> Iterator[sqlite3.Connection]:
        """One write transaction, committed on success and rolled back on error.

        Raises:
            StorageError: If SQLite fails (disk full, read-only, locked, damaged).
        """
        with self._lock:
            try:
                with self._patient():
                    self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise storage_error(self.path, exc, doing) from None
            with self._begun(doing) as conn:
                yield conn

    @contextmanager
    def _patient(self) -> Iterator[None]:
        """Let the connection wait for other connections' locks (up to the timeout) meanwhile."""
        if self.readonly:
            yield  # a read-only connection always waits
            return
        self._conn.execute(f"PRAGMA busy_timeout = {self._timeout_ms}")
        try:
            yield
        finally:
            self._conn.execute("PRAGMA busy_timeout = 0")

    def _read(self, read: Callable[[], T]) -> T:
        """``read()`` under the connection's lock, waiting for other connections if it must.

        Raises:
            StorageError: If SQLite fails.
        """
        with self._lock:
            try:
                try:
                    return read()
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode & 0xFF not in _WAITED_FOR:
                        raise
                with self._patient():
                    return read()
            except sqlite3.Error as exc:
                raise storage_error(self.path, exc, "read run database") from None

    @contextmanager
    def _begun(self, doing: str) -> Iterator[sqlite3.Connection]:
        """The rest of a transaction that began: yield, then commit (or roll back)."""
        try:
            yield self._conn
        except BaseException as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise storage_error(self.path, exc, doing) from None
            raise
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise storage_error(self.path, exc, doing) from None
        if self._checkpointer is None and self.path.name != ":memory:":
            self._checkpointer = WalCheckpointer(self.path)
        if self._checkpointer is not None:
            self._checkpointer.committed()

    def write_if_free(
        self, write: Callable[[sqlite3.Connection], None], doing: str = "write run database"
    ) -> bool:
        """Run ``write`` in one transaction now, if nothing would make it wait.

        Nothing may: no work queued on the writer thread (it goes first), no other
        thread using the connection, no other connection holding the write lock, and
        no fsync per commit (``durable=True``). Otherwise nothing is done and the
        result is False: the caller hands the write to `in_writer`.

        Raises:
            StorageError: If SQLite fails once the transaction began.
        """
        if self._syncs or self._queued or not self._lock.acquire(blocking=False):
            return False
        try:
            if self._queued:
                return False
            try:
                self._conn.execute("BEGIN IMMEDIATE")  # at rest, it never waits
            except sqlite3.Error:
                return False  # held elsewhere (or failing): the writer thread waits or reports
            with self._begun(doing) as conn:
                write(conn)
            return True
        finally:
            self._lock.release()

    def in_writer(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on this database's writer thread, after the work submitted before.

        A journal's writes that would wait (see `write_if_free`) go there, in the order
        they were submitted, so that waiting for the lock or the disk never holds up the
        event loop the run's tool calls share. ``work`` runs in a copy of the caller's
        context (its clock).
        """
        with self._writer_lock:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="convergent-writer")
            self._queued += 1
            context = contextvars.copy_context()
            done = self._writer.submit(context.run, work)
        done.add_done_callback(self._dequeued)
        return done

    def write_soon(self, write: Callable[[sqlite3.Connection], None]) -> Future[None] | None:
        """Commit ``write`` in one transaction without making the caller wait for the lock.

        Now if nothing makes it wait (`write_if_free`): None. Otherwise it goes to the
        writer thread (`in_writer`), after the writes before, and its future is returned.
        """
        if self.write_if_free(write):
            return None
        return self.in_writer(lambda: self._write(write))

    def _write(self, write: Callable[[sqlite3.Connection], None]) -> None:
        with self.transaction() as conn:
            write(conn)

    def _dequeued(self, _done: Future[Any]) -> None:
        with self._writer_lock:
            self._queued -= 1

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read query and return every row.

        Raises:
            StorageError: If SQLite fails (damaged file, ...).
        """
        values = tuple(params)
        return self._read(lambda: self._conn.execute(sql, values).fetchall())

    def steering_version(self) -> tuple[int, int]:
        """Changes whenever a steering command may have been stored (cheap to poll).

        SQLite's ``data_version`` moves when another connection commits; the second
        number counts the commands this connection stored itself.
        """
        return int(self.query("PRAGMA data_version")[0][0]), self._sent

    def journal(self, run: JournaledRun | str, **legacy: Any) -> SqliteJournal:
        """The journal that writes ``run`` here (see `convergent.durability.protocol`).

        A run id with the options as keywords (``tools=``, ``workspace=``, ``spec=``,
        ``models=``, ``parent=``) is the old spelling, kept with a `DeprecationWarning`.

        Raises:
            UserError: If the run id breaks the rule of `convergent._run_id`.
        """
        if isinstance(run, str):
            warn_old(
                "RunStore.journal(run_id, **options): pass a convergent.durability.JournaledRun"
            )
            if "recipe" in legacy:
                legacy["spec"] = legacy.pop("recipe")
            run = JournaledRun(run_id=run, **legacy)
        elif legacy:
            raise TypeError(f"unexpected options beside a JournaledRun: {', '.join(legacy)}")
        check_run_id(run.run_id)
        return SqliteJournal(self, run)

    # -- runs -------------------------------------------------------------------------

    def claim(self, run_id: str, *, token: str | None = None) -> RunClaim:
        """Take the right to continue a stored run (see `convergent.durability.sqlite.claim`).

        One write transaction checks that no live process or task holds the run and
        makes this one its holder, so of any number of claimants exactly one gets it.

        Args:
            run_id: The run.
            token: Take over the claim with this token, which another process took
                for this one (the console does, before it starts ``convergent resume``).

        Raises:
            UserError: If the run is unknown, is running (``run ID is running (pid
                N)``), or ended ``completed``.
            StorageError: If the database cannot be written.
        """
        chosen = token if token is not None else _claims.new_token()
        with self.transaction("claim run") as conn:
            previous = _claims.take(conn, self.path, run_id, chosen, handed=token, resumable=True)
        return RunClaim(self, run_id, chosen, previous)

    _SUMMARY_COLUMNS = (
        "run_id, task, model, status, stop_reason, stop_detail, output, cycles, started_at, "
        "updated_at, pid, workspace, config, usage, elapsed, recipe, pid_start, claim, "
        "output_after_stop, parent_run_id, parent_call_id, output_data, "
        "(SELECT kind = 'pause' FROM steering s WHERE s.run_id = runs.run_id "
        "AND s.kind IN ('pause', 'resume') AND s.consumed_at IS NOT NULL "
        "ORDER BY s.id DESC LIMIT 1)"
    )

    @staticmethod
    def _summary(row: Sequence[Any]) -> RunSummary:
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
            usage,
            elapsed,
            spec,
            pid_start,
            claim,
            after_stop,
            parent_run_id,
            parent_call_id,
            data,
            paused,
        ) = row
        running = status == "running" and _claims.holder_alive(pid, pid_start, claim)
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
            running=running,
            paused=running and bool(paused),
            workspace=workspace,
            usage=parse_usage(usage),
            elapsed=elapsed,
            spec=json.loads(spec) if spec else None,
            config=json.loads(config),
            pid=pid,
            output_after_stop=bool(after_stop),
            parent_run_id=parent_run_id,
            parent_call_id=parent_call_id,
            output_data=json.loads(data) if data is not None else None,
        )

    def children(
        self, run_id: str, *, clip: int | None = None, limit: int | None = None, offset: int = 0
    ) -> list[RunSummary]:
        """The child runs a run started through agents called as tools, oldest first.

        Args:
            run_id: The parent run.
            clip: Cut their long texts to this many characters.
            limit: At most this many.
            offset: Skip this many first.
        """
        return [
            self._summary(row)
            for row in self.query(
                f"SELECT {self._columns(clip)} FROM runs WHERE parent_run_id = ? "
                "ORDER BY started_at, rowid LIMIT ? OFFSET ?",
                [run_id, -1 if limit is None else limit, offset],
            )
        ]

    def count_children(self, run_id: str) -> int:
        """How many child runs a run started (see `children`)."""
        rows = self.query("SELECT COUNT(*) FROM runs WHERE parent_run_id = ?", [run_id])
        return int(rows[0][0])

    def list_runs(
        self,
        limit: int | None = None,
        *,
        offset: int = 0,
        status: str | None = None,
        clip: int | None = None,
        search: str | None = None,
        tool: str | None = None,
        errors: bool = False,
        top_only: bool = False,
    ) -> list[RunSummary]:
        """Stored runs, most recently updated first.

        Only the rows asked for are read (the ``updated_at`` index orders them), so a
        page of a database with many runs costs no more than a page of a small one.

        Args:
            limit: At most this many.
            offset: Skip this many first.
            status: Only runs with this `RunSummary.status` (``running``,
                ``interrupted`` or a stop reason).
            clip: Cut the task, output and stop detail to this many characters (pages
                that show a part of them need not read runs of many megabytes whole).
            search: Only runs whose task or output, or one of whose tool calls' name,
                arguments or result, contains this text (ignoring the case of ASCII
                letters).
            tool: Only runs that called the tool of this name.
            errors: Only runs with an error: a tool call that failed, was invalid or
                was interrupted, or a ``tool_error`` or ``model_error`` stop.
            top_only: Leave out child runs (see `children`).
        """
        where, params = self._filter(status, search, tool, errors, top_only, ordered=True)
        sql = (
            f"SELECT {self._columns(clip)} FROM runs {where} "
            "ORDER BY updated_at DESC, rowid DESC LIMIT ? OFFSET ?"
        )
        params += [-1 if limit is None else limit, offset]
        return [self._summary(row) for row in self.query(sql, params)]

    def tool_names(self, limit: int = 200) -> list[str]:
        """The names of the tools the stored runs called, in order (at most ``limit``)."""
        rows = self.query("SELECT name FROM tools ORDER BY name LIMIT ?", [limit])
        return [name for (name,) in rows]

    def iter_runs(
        self,
        limit: int | None = None,
        *,
        status: str | None = None,
        clip: int | None = None,
        page: int = 500,
        top_only: bool = False,
    ) -> Iterator[RunSummary]:
        """Stored runs, most recently updated first, read ``page`` rows at a time.

        Each page continues after the last row of the one before (not by an offset), so
        listing every run of a large database takes time and memory in proportion to a
        page, not to the database. Arguments as in `list_runs`; ``top_only`` leaves out
        child runs (see `children`).
        """
        where, params = self._status_filter(status, ordered=True)
        where = f"{where} AND" if where else "WHERE"
        if top_only:
            where = f"{where} {_TOP_IN_ORDER} AND"
        after: tuple[float, int] | None = None
        left = limit
        while left is None or left > 0:
            size = page if left is None else min(page, left)
            bound = "(updated_at, rowid) < (?, ?)" if after is not None else "1"
            rows = self.query(
                f"SELECT {self._columns(clip)}, rowid FROM runs {where} {bound} "
                "ORDER BY updated_at DESC, rowid DESC LIMIT ?",
                [*params, *(after or ()), size],
            )
            for row in rows:
                yield self._summary(row[:-1])
            if len(rows) < size:
                return
            after = (rows[-1][9], rows[-1][-1])
            left = None if left is None else left - len(rows)

    @classmethod
    def _columns(cls, clip: int | None) -> str:
        """The summary's columns, with the long texts cut to ``clip`` characters if given."""
        if clip is None:
            return cls._SUMMARY_COLUMNS
        cut = int(clip)
        columns = cls._SUMMARY_COLUMNS
        for name in ("task", "stop_detail", "output"):
            columns = columns.replace(f" {name},", f" substr({name}, 1, {cut}),", 1)
        return columns

    def _status_filter(self, status: str | None, *, ordered: bool = False) -> tuple[str, list[Any]]:
        """The ``WHERE`` clause for a `RunSummary.status`.

        Whether a ``running`` row is live depends on its process: each distinct process
        id is asked once, and the live ones go into the query, so counting, ordering and
        paging stay in SQL. ``ordered``: for runs read most recently updated first, which
        find a stop reason's runs in that order (`_TOP_IN_ORDER`), not by its index.
        """
        if status is None:
            return "", []
        if status not in ("running", "interrupted"):
            return f"WHERE {'+' if ordered else ''}stop_reason = ?", [status]
        pids = self.query("SELECT DISTINCT pid FROM runs WHERE status = 'running'")
        present = json.dumps(sorted(live_pids(pid for (pid,) in pids)))
        rows = self.query(
            "SELECT rowid, pid, pid_start, claim FROM runs WHERE status = 'running' "
            "AND pid IN (SELECT value FROM json_each(?))",
            [present],
        )
        live = json.dumps([row[0] for row in rows if _claims.holder_alive(*row[1:])])
        if status == "running":
            return "WHERE rowid IN (SELECT value FROM json_each(?))", [live]
        return (
            "WHERE status = 'running' AND rowid NOT IN (SELECT value FROM json_each(?))",
            [live],
        )

    def _filter(
        self,
        status: str | None,
        search: str | None,
        tool: str | None = None,
        errors: bool = False,
        top_only: bool = False,
        *,
        ordered: bool = False,
    ) -> tuple[str, list[Any]]:
        """The ``WHERE`` clause for a status (see `_status_filter`) and the other filters.

        See `list_runs` for what each filter keeps; ``ordered``: for rows read most
        recently updated first (`_TOP_IN_ORDER`), not counted.
        """
        where, params = self._status_filter(status, ordered=ordered)
        terms = [where.removeprefix("WHERE ")] if where else []
        calls = "EXISTS (SELECT 1 FROM finished_calls f WHERE f.run_id = runs.run_id AND {})"
        if search:
            # instr, not LIKE: the text's % and _ are searched for as they are
            columns = ("task", "output", "f.name", "f.arguments", "f.result")
            found = [f"instr(lower({column}), lower(?)) > 0" for column in columns]
            in_calls = calls.format(f"({' OR '.join(found[2:])})")
            terms.append(f"({found[0]} OR {found[1]} OR {in_calls})")
            params += [search] * len(columns)
        if tool:
            terms.append(calls.format("f.name = ?"))
            params.append(tool)
        if errors:
            failed = calls.format("f.outcome IN ('failed', 'invalid', 'interrupted')")
            terms.append(f"(stop_reason IN ('tool_error', 'model_error') OR {failed})")
        if top_only:
            terms.append(_TOP_IN_ORDER if ordered else "parent_run_id IS NULL")
        return (f"WHERE {' AND '.join(terms)}" if terms else ""), params

    def count_runs(
        self,
        status: str | None = None,
        *,
        search: str | None = None,
        tool: str | None = None,
        errors: bool = False,
        top_only: bool = False,
    ) -> int:
        """How many runs are stored (with this status and the filters of `list_runs`)."""
        where, params = self._filter(status, search, tool, errors, top_only)
        return int(self.query(f"SELECT COUNT(*) FROM runs {where}", params)[0][0])

    def exists(self, run_id: str) -> bool:
        """Whether a run with this id is stored."""
        return bool(self.query("SELECT 1 FROM runs WHERE run_id = ?", [run_id]))

    def get_run(self, run_id: str, *, clip: int | None = None, data: bool = True) -> RunSummary:
        """The summary of one run (``clip`` as in `list_runs`).

        Args:
            run_id: The run.
            clip: Cut its long texts to this many characters.
            data: Read its ``output_data`` (False: None, however large it is).

        Raises:
            UserError: If no run has this id.
        """
        columns = self._columns(clip)
        if not data:
            columns = columns.replace(" output_data,", " NULL,", 1)
        rows = self.query(f"SELECT {columns} FROM runs WHERE run_id = ?", [run_id])
        if not rows:
            raise UserError(f"no run {run_id!r} in {self.path}")
        return self._summary(rows[0])

    def checkpoint_cycles(self, run_id: str) -> list[int]:
        """Cycles a run can be rewound to, oldest first."""
        rows = self.query("SELECT cycle FROM checkpoints WHERE run_id = ? ORDER BY cycle", [run_id])
        return [cycle for (cycle,) in rows]

    def checkpoints(self, run_id: str) -> list[tuple[int, Usage, float]]:
        """Each checkpoint's cycle, usage and elapsed seconds so far, oldest first."""
        rows = self.query(
            "SELECT cycle, usage, elapsed FROM checkpoints WHERE run_id = ? ORDER BY cycle",
            [run_id],
        )
        return [(cycle, parse_usage(usage), elapsed) for cycle, usage, elapsed in rows]

    def load(self, run_id: str, *, cycle: int | None = None) -> RunState:
        """The state to continue a run from.

        Without ``cycle``: the latest state, including every tool call that finished
        before its process stopped (even if it was killed mid-batch). With ``cycle``: the
        state at the end of that cycle.

        Raises:
            UserError: If the run or the checkpoint does not exist.
            StorageError: If the database cannot be read.
        """
        return self._read(lambda: self._load(run_id, cycle))

    def _load(self, run_id: str, cycle: int | None) -> RunState:
        conn = self._conn
        row = conn.execute(
            "SELECT task, model, cycles, usage, elapsed, started_at, stop_reason, stop_detail, "
            "output, epoch, message_count, state_version, monitor, "
            "output_after_stop, output_data, stop_rule FROM runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise UserError(f"no run {run_id!r} in {self.path}")
        (task, model, cycles, usage, elapsed, started_at, reason, detail, output) = row[:9]
        epoch, count, version, monitor, after_stop, output_data, rule = row[9:]
        if cycle is not None:
            point = conn.execute(
                "SELECT epoch, message_count, usage, elapsed FROM checkpoints "
                "WHERE run_id = ? AND cycle = ?",
                (run_id, cycle),
            ).fetchone()
            if point is None:
                known = ", ".join(map(str, self.checkpoint_cycles(run_id))) or "none"
                raise UserError(f"run {run_id!r} has no checkpoint for cycle {cycle}; have {known}")
            epoch, count, usage, elapsed = point
            # a rewound run starts its counters afresh: its files are restored (a change)
            cycles, reason, detail, output, monitor, after_stop = cycle, None, "", "", None, 0
            output_data, rule = None, ""
        limit = cycles if cycle is not None else None
        data = {
            "run_id": run_id,
            "task": task,
            "model": model,
            "messages": self._messages(run_id, epoch, count),
            "cycles": cycles,
            "usage": json.loads(usage),
            "tool_calls": [record_json(r) for r in self._finished(run_id, limit)],
            "monitor": json.loads(monitor) if monitor else {},
            "elapsed": elapsed,
            "started_at": started_at,
            "stop_reason": reason,
            "stop_detail": detail,
            "stop_rule": rule,
            "output": output,
            "output_after_stop": bool(after_stop),
            "output_json": json.loads(output_data) if output_data is not None else None,
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

    def _finished(self, run_id: str, max_cycle: int | None) -> list[tuple[Any, ...]]:
        sql = (
            "SELECT cycle, call_id, name, arguments, outcome, result, duration "
            "FROM finished_calls WHERE run_id = ? AND outcome NOT IN (?, ?)"
        )
        params: list[Any] = [run_id, CallOutcome.NEEDS_USER, CallOutcome.NOT_EXECUTED]
        if max_cycle is not None:
            sql += " AND cycle <= ?"
            params.append(max_cycle)
        return self._conn.execute(sql + " ORDER BY cycle, position, finished_at", params).fetchall()

    def _recover_finished(self, state: RunState) -> None:
        """Give pending calls the results their (killed) process committed for them."""
        pending = state.pending_calls()
        if not pending:
            return
        rows = self._conn.execute(
            "SELECT call_id, name, outcome, result FROM finished_calls "
            "WHERE run_id = ? AND cycle = ? AND outcome != ? ORDER BY position",
            (state.run_id, state.cycles, CallOutcome.NEEDS_USER),
        ).fetchall()
        finished = {call_id: (name, outcome, result) for call_id, name, outcome, result in rows}
        for call in pending:
            if call.id in finished:
                name, outcome, result = finished[call.id]
                state.messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        name=name,
                        content=result,
                        is_error=outcome != CallOutcome.OK,
                    )
                )
                self._count_child(state, call.id)

    def _count_child(self, state: RunState, call_id: str) -> None:
        """Count what the child run of a recovered call spent, as its process had.

        The process counted it when the call ended, but stored it only at its next
        boundary, which it did not reach.
        """
        row = self._conn.execute(
            "SELECT usage, cycles, monitor FROM runs "
            "WHERE run_id = ? AND parent_run_id = ? AND parent_call_id = ?",
            (child_run_id(state.run_id, state.cycles, call_id), state.run_id, call_id),
        ).fetchone()
        if row is None:
            return
        usage, cycles, monitor = row
        state.usage = state.usage + Usage(**json.loads(usage))
        grandchildren = _child_cycles(json.loads(monitor)) if monitor else 0
        state.monitor.budget.child_cycles += cycles + grandchildren

    def model_positions(self, run_id: str) -> dict[str, int]:
        """Where each replayed model (by role) of the run is in its script, to resume it.

        Raises:
            UserError: If the run does not exist.
            StorageError: If the database cannot be read.
        """
        rows = self.query("SELECT positions FROM runs WHERE run_id = ?", [run_id])
        if not rows:
            raise UserError(f"no run {run_id!r} in {self.path}")
        positions: dict[str, int] = json.loads(rows[0][0])
        return positions

    def pending_questions(self, run_id: str) -> list[PendingQuestion]:
        """Calls of the latest cycle that asked the user and still wait for an answer."""
        state = self.load(run_id)
        pending = {call.id for call in state.pending_calls()}
        rows = self.query(
            "SELECT call_id, result FROM finished_calls WHERE run_id = ? AND cycle = ? "
            "AND outcome = ? ORDER BY position",
            [run_id, state.cycles, CallOutcome.NEEDS_USER],
        )
        return [PendingQuestion(call_id, text) for call_id, text in rows if call_id in pending]

    def events(self, run_id: str, *, after: int = 0) -> list[tuple[int, dict[str, Any]]]:
        """The stored events of a run (``(seq, event as dict)``), those after ``after``."""
        rows = self.query(
            "SELECT seq, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
            [run_id, after],
        )
        return [(seq, json.loads(data)) for seq, data in rows]

    def delete(self, run_id: str) -> None:
        """Remove a run and everything stored for it."""
        with self.transaction() as conn:
            delete_calls(conn, "run_id = ?", (run_id,))
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
        try:
            steering_kind = SteeringKind(kind)
        except ValueError:
            raise UserError(f"unknown steering command {kind!r}") from None
        if not self.exists(run_id):
            raise UserError(f"no run {run_id!r} in {self.path}")
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO steering (run_id, kind, text, created_at) VALUES (?, ?, ?, ?)",
                (run_id, steering_kind.value, text, now()),
            )
        self._sent += 1

    def stored_steering(self, run_id: str, after: int) -> list[tuple[int, str, str]]:
        """Unconsumed steering commands of a run with ids above ``after``, oldest first."""
        return [
            (row_id, kind, text)
            for row_id, kind, text in self.query(
                "SELECT id, kind, text FROM steering WHERE run_id = ? AND consumed_at IS NULL "
                "AND id > ? ORDER BY id",
                [run_id, after],
            )
        ]

    def steering_if_free(
        self, run_id: str, after: int, seen: tuple[int, int] | None
    ) -> tuple[tuple[int, int], list[tuple[int, str, str]]] | None:
        """The version (`steering_version`) and the run's commands above ``after``, at once.

        While the version is still ``seen``, no command can have been stored: none is read.
        None when a write holds the database (its writer thread may be waiting for
        another process's lock): a run's poll never makes the event loop wait, where
        other runs' work goes on; it looks again later.
        """
        if not self._lock.acquire(blocking=False):
            return None
        try:
            version = self.steering_version()
            return version, [] if version == seen else self.stored_steering(run_id, after)
        finally:
            self._lock.release()

    def consume_steering(self, ids: Iterable[int]) -> None:
        """Mark stored steering commands as consumed."""
        marked = list(ids)
        if marked:
            with self.transaction() as conn:
                mark_consumed(conn, marked)

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
            state = self.load(run_id, cycle=cycle)
            state.stop_reason, state.stop_detail = StopReason.STOPPED, f"rewound to cycle {cycle}"
            state.stop_rule = "stop_requested"
            with self.transaction() as conn:
                workspace = Path(summary.workspace) if summary.workspace else None
                result = rollback.restore(conn, run_id, cycle, workspace)
                delete_calls(conn, "run_id = ? AND cycle > ?", (run_id, cycle))
                for table in (
                    "checkpoints",
                    "call_counts",
                    "snapshots",
                    "events",
                ):
                    conn.execute(
                        f"DELETE FROM {table} WHERE run_id = ? AND cycle > ?", (run_id, cycle)
                    )
                epoch = next_epoch(conn, run_id)
                insert_messages(conn, run_id, epoch, 0, state.messages)
                conn.execute(
                    "UPDATE runs SET status = 'stopped', stop_reason = ?, stop_detail = ?, "
                    "stop_rule = 'stop_requested', "
                    "output = '', cycles = ?, usage = ?, elapsed = ?, updated_at = ?, "
                    "epoch = ?, message_count = ?, monitor = NULL, positions = (SELECT positions "
                    "FROM checkpoints WHERE run_id = ? AND cycle = ?), "
                    "output_after_stop = 0, output_data = NULL WHERE run_id = ?",
                    (
                        StopReason.STOPPED.value,
                        state.stop_detail,
                        cycle,
                        row_usage_json(state.usage),
                        state.elapsed,
                        now(),
                        epoch,
                        len(state.messages),
                        run_id,
                        cycle,
                        run_id,
                    ),
                )
                rollback.drop_unused_blobs(conn)
        return result


def _child_cycles(monitor: dict[str, object]) -> int:
    """The cycles a stored run's children ran, from its monitor (of any stored version)."""
    budget = monitor.get("budget")
    found = (
        budget.get("child_cycles", 0)
        if isinstance(budget, dict)
        else monitor.get("child_cycles", 0)
    )
    return int(found) if isinstance(found, int) else 0
