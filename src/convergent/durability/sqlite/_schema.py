"""The run database's tables, its version, and opening it safely.

Version 7 (this one) adds each run's ``stop_rule``: the rule that gave its stop (the
setting's name, such as ``max_repeated_calls``, or the fact, such as ``answered``).

Version 6 adds each run's ``output_data``: its answer as JSON data, validated
against the agent's output type (``completed`` runs of agents that declare one).

Version 5 links a child run (an agent called as a tool) to the run and
call that started it (``parent_run_id``, ``parent_call_id``), indexed by parent.

Version 4 adds each run's ``monitor`` (the counters behind its stop facts,
as JSON, which replace the repeat counts and the streak) and ``output_after_stop``
(the output is the answer to the last request made after the stop).

Version 3 names each running run's holder fully: beside its process id, the process's
start time (``pid_start``) and the token of its claim (``claim``), so that a run is
claimed by one process or task at a time (see `convergent.durability.sqlite._claims`).

Version 2 changed version 1 so that a cycle writes fewer pages: finished calls are
clustered by run and cycle (no separate index), and repeated-call counts were derived
from them instead of being written (``call_counts`` keeps version-1 counts). It added
each run's agent spec (column ``recipe``), replay positions and tool-error streak;
per-checkpoint replay positions; the MCP server (``source``) of each finished call; an
``events`` table for the events worth keeping (gate decisions, verifier verdicts,
redirects, compaction, answers); and a ``questions`` table through which a run's
``ask_user`` can be answered from another process (the web console). The replay
positions are kept beside the run's state, not in it (`RunStore.model_positions`).

An older database is upgraded in place when it is opened for writing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from convergent.durability.sqlite._wal import SAFETY_NET_PAGES
from convergent.exceptions import StorageError, UserError

__all__ = ["DB_SCHEMA_VERSION", "connect", "storage_error"]

DB_SCHEMA_VERSION = 8
"""Version of the table layout, kept in ``PRAGMA user_version``."""

_TABLES = """
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

_V2 = """
CREATE TABLE finished_calls_v2 (
    run_id TEXT NOT NULL,
    cycle INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    outcome TEXT NOT NULL,
    result TEXT NOT NULL,
    duration REAL NOT NULL,
    finished_at REAL NOT NULL,
    source TEXT,
    PRIMARY KEY (run_id, cycle, call_id)
) WITHOUT ROWID;
INSERT OR REPLACE INTO finished_calls_v2 (run_id, cycle, call_id, position, name, arguments,
    outcome, result, duration, finished_at)
    SELECT run_id, cycle, call_id, position, name, arguments, outcome, result, duration,
    finished_at FROM finished_calls ORDER BY id;
DROP TABLE finished_calls;
ALTER TABLE finished_calls_v2 RENAME TO finished_calls;
ALTER TABLE runs ADD COLUMN recipe TEXT;
ALTER TABLE runs ADD COLUMN positions TEXT NOT NULL DEFAULT '{}';
ALTER TABLE runs ADD COLUMN tool_error_streak INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN positions TEXT NOT NULL DEFAULT '{}';
CREATE INDEX IF NOT EXISTS runs_updated ON runs (updated_at);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    cycle INTEGER NOT NULL,
    type TEXT NOT NULL,
    time REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS questions (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    question TEXT NOT NULL,
    asked_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    answer TEXT,
    answered_at REAL
);
CREATE INDEX IF NOT EXISTS questions_open ON questions (status, run_id);
"""

_V3 = """
ALTER TABLE runs ADD COLUMN pid_start INTEGER;
ALTER TABLE runs ADD COLUMN claim TEXT;
"""

_V4 = """
ALTER TABLE runs ADD COLUMN monitor TEXT;
ALTER TABLE runs ADD COLUMN output_after_stop INTEGER NOT NULL DEFAULT 0;
"""

_V5 = """
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN parent_call_id TEXT;
CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_run_id);
"""

_V6 = """
ALTER TABLE runs ADD COLUMN output_data TEXT;
"""

_V7 = """
ALTER TABLE runs ADD COLUMN stop_rule TEXT NOT NULL DEFAULT '';
"""

_V8 = """
CREATE TABLE IF NOT EXISTS tools (
    name TEXT PRIMARY KEY
) WITHOUT ROWID;
INSERT OR IGNORE INTO tools (name) SELECT DISTINCT name FROM finished_calls;
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
CREATE INDEX IF NOT EXISTS runs_stop_reason ON runs (stop_reason, parent_run_id);
"""
"""Version 8 keeps the names of the tools the stored runs called, for the filters that
list them (finding them in every finished call read the whole table), and counts the
runs of a status by indexes that change only when a run starts or stops: which rows
say ``running`` (the running and interrupted filters), and each stop reason's runs."""


LOCKED = "the database is locked by another process"
"""How a `StorageError` says that the database was busy (a wait, not a failure)."""


def storage_error(path: Path, exc: sqlite3.Error, doing: str) -> StorageError:
    """A one-line `StorageError` for a SQLite failure, naming the file and the cause."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
        return StorageError(f"run database {path} is damaged ({text}); it was not changed")
    if "locked" in text or "busy" in text:
        return StorageError(f"cannot {doing} {path}: {LOCKED}")
    return StorageError(f"cannot {doing} {path}: {text}")


def connect(path: Path, *, timeout: float, durable: bool, readonly: bool) -> sqlite3.Connection:
    """Open (and create or upgrade, unless ``readonly``) the run database at ``path``.

    Raises:
        UserError: If the database was written by a newer version, or is too old to
            read without upgrading and ``readonly`` is set.
        StorageError: If it cannot be opened, is damaged, or cannot be upgraded.
    """
    try:
        if readonly:
            conn = _open_readonly(path, timeout)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            conn.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except OSError as exc:
        raise StorageError(f"cannot open run database {path}: {exc.strerror or exc}") from None
    except sqlite3.Error as exc:
        raise storage_error(path, exc, "open run database") from None
    if version > DB_SCHEMA_VERSION:
        conn.close()
        raise UserError(
            f"{path} has schema version {version}; this convergent reads up to "
            f"{DB_SCHEMA_VERSION} (upgrade convergent)"
        )
    if version < DB_SCHEMA_VERSION:
        if readonly:
            conn.close()
            raise UserError(
                f"{path} has schema version {version}; open it once with write access to upgrade it"
            )
        try:
            _upgrade(conn, version)
        except sqlite3.Error as exc:
            conn.close()
            raise storage_error(path, exc, "upgrade run database") from None
    return conn


def _open_readonly(path: Path, timeout: float) -> sqlite3.Connection:
    """Open for reading only; a file on a read-only disk is opened as immutable.

    SQLite needs a writable folder for the shared-memory file of a WAL database; where
    it cannot create one (read-only disk or folder) the file cannot change either, so it
    is read without locking.
    """
    uri = path.resolve().as_uri()
    last: sqlite3.Error | None = None
    for options in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(
                f"{uri}?{options}",
                uri=True,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute("PRAGMA user_version").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            last = exc
    assert last is not None
    raise last


def _upgrade(conn: sqlite3.Connection, version: int) -> None:
    """Bring the tables to `DB_SCHEMA_VERSION` in one transaction (another process may race)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        statements = (
            (_TABLES if version == 0 else "")
            + (_V2 if version < 2 else "")
            + (_V3 if version < 3 else "")
            + (_V4 if version < 4 else "")
            + (_V5 if version < 5 else "")
            + (_V6 if version < 6 else "")
            + (_V7 if version < 7 else "")
            + (_V8 if version < 8 else "")
        )
        for statement in statements.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version={DB_SCHEMA_VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
