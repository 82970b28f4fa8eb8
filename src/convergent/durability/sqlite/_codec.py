"""How messages, usage and tool-call records are written into and read from the database."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import fields
from typing import Any

import msgspec
from pydantic import TypeAdapter

from convergent.clock import now
from convergent.messages import CallOutcome, Message, Usage
from convergent.state import BudgetState, MonitorState, ToolCallRecord

__all__ = [
    "ROW_MONITOR_STEP",
    "ROW_USAGE_STEP",
    "dump_arguments",
    "delete_calls",
    "dump_message",
    "insert_messages",
    "insert_records",
    "mark_consumed",
    "monitor_json",
    "next_epoch",
    "parse_usage",
    "record_json",
    "remember_tools",
    "row_monitor_json",
    "row_usage_json",
    "steady",
    "usage_dict",
    "usage_json",
]

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
_MONITOR_FIELDS = tuple(f.name for f in fields(MonitorState) if f.name != "budget")
_BUDGET_FIELDS = tuple(f.name for f in fields(BudgetState))


def dump_message(message: Message) -> str:
    """One message as JSON text."""
    return _MESSAGE.dump_json(message).decode()


_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)
_last_usage: list[tuple[Usage, str]] = []


def dump_arguments(arguments: Any) -> str:
    """A call's arguments as JSON text."""
    return _ENCODER.encode(arguments)


def usage_dict(usage: Usage) -> dict[str, Any]:
    """Usage as a JSON-ready dict."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "requests": usage.requests,
        "cost": usage.cost,
    }


def usage_json(usage: Usage) -> str:
    """Usage as JSON text (the last one is remembered: a run writes the same one often)."""
    if _last_usage and _last_usage[0][0] is usage:
        return _last_usage[0][1]
    text = _ENCODER.encode(usage_dict(usage))
    _last_usage[:] = [(usage, text)]
    return text


_MONITOR_ENCODER = msgspec.json.Encoder()


def monitor_json(monitor: MonitorState) -> str:
    """A run's monitor state as JSON text, written each cycle.

    It is plain data (numbers, text, lists and maps of them, all finite), which msgspec
    encodes about five times as fast as the standard library.
    """
    data = {name: getattr(monitor, name) for name in _MONITOR_FIELDS}
    budget = monitor.budget
    data["budget"] = {name: getattr(budget, name) for name in _BUDGET_FIELDS}
    return _MONITOR_ENCODER.encode(data).decode()


ROW_MONITOR_STEP = 1024
"""A run's row holds its monitor's JSON padded to a multiple of this many bytes (`steady`)."""
ROW_USAGE_STEP = 128
"""A run's row holds its usage's JSON padded to a multiple of this many bytes (`steady`)."""


def steady(text: str, step: int) -> str:
    """``text`` followed by spaces up to a multiple of ``step`` bytes (in UTF-8).

    A running run's row is written again at every cycle. While the row keeps its size,
    SQLite writes only the pages whose bytes changed; when the size changes, it writes
    the whole row again, the task and the recipe stored in it included (for a task of
    20,000 characters, eight more pages a cycle). The monitor and the usage are what
    changes length from one cycle to the next: padded, they change the row's size only
    when they cross a step. Readers of JSON skip the spaces.
    """
    size = len(text) if text.isascii() else len(text.encode())
    return text + " " * (-size % step)


def row_monitor_json(monitor: MonitorState) -> str:
    """`monitor_json` as a run's row holds it (`steady`)."""
    return steady(monitor_json(monitor), ROW_MONITOR_STEP)


def row_usage_json(usage: Usage) -> str:
    """`usage_json` as a run's row holds it (`steady`)."""
    return steady(usage_json(usage), ROW_USAGE_STEP)


def parse_usage(text: str) -> Usage:
    """Usage from its JSON text."""
    data = json.loads(text)
    return Usage(
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        requests=int(data.get("requests", 0)),
        cost=float(data.get("cost", 0.0)),
    )


def insert_messages(
    conn: sqlite3.Connection, run_id: str, epoch: int, start: int, messages: Iterable[Message]
) -> None:
    """Store messages at positions ``start``, ``start + 1``... of ``epoch``."""
    conn.executemany(
        "INSERT OR REPLACE INTO messages (run_id, epoch, seq, data) VALUES (?, ?, ?, ?)",
        [(run_id, epoch, seq, dump_message(m)) for seq, m in enumerate(messages, start)],
    )


def insert_records(
    conn: sqlite3.Connection, run_id: str, records: Sequence[ToolCallRecord], now: float
) -> None:
    """Store executed tool-call records, in order (each outcome as its value, ``ok``...)."""
    conn.executemany(
        "INSERT OR REPLACE INTO finished_calls (run_id, cycle, position, call_id, name, "
        "arguments, outcome, result, duration, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run_id,
                r.cycle,
                index,
                r.id,
                r.name,
                dump_arguments(r.arguments),
                r.outcome,
                r.result,
                r.duration,
                now,
            )
            for index, r in enumerate(records)
        ],
    )
    remember_tools(conn, (r.name for r in records))


def remember_tools(conn: sqlite3.Connection, names: Iterable[str]) -> None:
    """Add the names of tools that calls were stored for to the ``tools`` table.

    A name it has already is ignored, and SQLite then writes no page.
    """
    conn.executemany("INSERT OR IGNORE INTO tools (name) VALUES (?)", [(n,) for n in set(names)])


def delete_calls(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> None:
    """Delete the stored calls that ``where`` selects.

    The names that no stored call has any more leave the ``tools`` table with them.
    """
    names = conn.execute(f"SELECT DISTINCT name FROM finished_calls WHERE {where}", params)
    dropped = [(name,) for (name,) in names.fetchall()]
    conn.execute(f"DELETE FROM finished_calls WHERE {where}", params)
    conn.executemany(
        "DELETE FROM tools WHERE name = ?1 "
        "AND NOT EXISTS (SELECT 1 FROM finished_calls WHERE name = ?1)",
        dropped,
    )


def record_json(row: Sequence[Any]) -> dict[str, Any]:
    """A ``finished_calls`` row (cycle, call_id, name, arguments, outcome, result, duration)."""
    cycle, call_id, name, arguments, outcome, result, duration = row
    return {
        "cycle": cycle,
        "id": call_id,
        "name": name,
        "arguments": json.loads(arguments),
        "ok": outcome == CallOutcome.OK,
        "outcome": outcome,
        "result": result,
        "duration": duration,
    }


def next_epoch(conn: sqlite3.Connection, run_id: str) -> int:
    """An epoch number not yet used by the run's messages."""
    (last,) = conn.execute(
        "SELECT COALESCE(MAX(epoch), 0) FROM messages WHERE run_id = ?", (run_id,)
    ).fetchone()
    return int(last) + 1


def end_pause(conn: sqlite3.Connection, run_id: str) -> None:
    """Record that a run taken by a new process is not paused (inside a transaction).

    A pause holds the process that took it; the process that continues the run starts
    unpaused, and a consumed ``resume`` row says so to whoever reads the run's status.
    """
    last = conn.execute(
        "SELECT kind FROM steering WHERE run_id = ? AND kind IN ('pause', 'resume') "
        "AND consumed_at IS NOT NULL ORDER BY id DESC LIMIT 1",
        (run_id,),
    ).fetchone()
    if last is not None and last[0] == "pause":
        conn.execute(
            "INSERT INTO steering (run_id, kind, text, created_at, consumed_at) "
            "VALUES (?, 'resume', '', ?, ?)",
            (run_id, now(), now()),
        )


def mark_consumed(conn: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Mark steering rows consumed (inside the caller's transaction)."""
    if ids:
        conn.execute(
            f"UPDATE steering SET consumed_at = ? WHERE id IN ({','.join('?' * len(ids))})",
            (now(), *ids),
        )
