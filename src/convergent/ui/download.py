"""A whole run as one JSON document, written a piece at a time.

Pages cut long values (see `convergent.ui.timeline.CLIP`); the run's download has them
all: its summary and agent spec, its current conversation, every finished tool call and
every stored event. Rows are listed by their keys and lengths only; each value is then
read `PIECE` characters at a time (``substr`` in SQLite) and sent on, so the server holds
a piece of a value of any size, never the value, its JSON text and its bytes at once,
however many downloads run side by side (the console reads in one thread).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from convergent.durability.sqlite import RunStore

__all__ = ["PIECE", "ROWS", "run_json"]

ROWS = 64
"""Rows listed per query (their keys and lengths, not their values)."""
PIECE = 1 << 20
"""Characters of a value read and sent at a time."""


def run_json(store: RunStore, run_id: str) -> Iterator[bytes]:
    """The run as JSON: ``{"run": ..., "messages": [...], "tool_calls": [...], "events": [...]}``.

    Raises:
        UserError: If no run has this id (before anything is produced).
    """
    run = store.get_run(run_id, clip=0, data=False)
    ((epoch,),) = store.query("SELECT epoch FROM runs WHERE run_id = ?", [run_id])
    small = {
        "run_id": run.run_id,
        "model": run.model,
        "status": run.status,
        "stop_reason": run.stop_reason.value if run.stop_reason else None,
        "output_after_stop": run.output_after_stop,
        "cycles": run.cycles,
        "usage": {
            "input_tokens": run.usage.input_tokens,
            "output_tokens": run.usage.output_tokens,
            "requests": run.usage.requests,
            "cost": run.usage.cost,
        },
        "elapsed": run.elapsed,
        "started_at": run.started_at,
        "updated_at": run.updated_at,
        "workspace": run.workspace,
        "spec": run.spec,
    }
    return _document(store, run_id, epoch, small)


def _document(store: RunStore, run_id: str, epoch: int, small: dict[str, Any]) -> Iterator[bytes]:
    where = ("runs", "run_id = ?", [run_id])
    yield b'{"run": {'
    for name in ("task", "stop_detail", "output"):
        yield json.dumps(name).encode() + b": "
        yield from _string(store, *where, name)
        yield b", "
    yield b'"output_data": '
    yield from _value(store, *where, "output_data")
    yield b", " + json.dumps(small, ensure_ascii=False)[1:].encode()
    yield b', "messages": ['
    for n, (seq,) in enumerate(
        _keys(store, "messages", "seq", "run_id = ? AND epoch = ?", [run_id, epoch])
    ):
        yield b", " if n else b""
        yield from _value(store, "messages", "run_id = ? AND epoch = ? AND seq = ?",
                          [run_id, epoch, seq], "data")  # fmt: skip
    yield b'], "tool_calls": ['
    for n, key in enumerate(
        _keys(store, "finished_calls", "cycle, call_id", "run_id = ?", [run_id])
    ):
        yield b", " if n else b""
        yield from _call(store, run_id, *key)
    yield b'], "events": ['
    for n, (seq,) in enumerate(_keys(store, "events", "seq", "run_id = ?", [run_id])):
        yield b", " if n else b""
        yield from _value(store, "events", "run_id = ? AND seq = ?", [run_id, seq], "data")
    yield b"]}\n"


def _call(store: RunStore, run_id: str, cycle: int, call_id: str) -> Iterator[bytes]:
    where = ("finished_calls", "run_id = ? AND cycle = ? AND call_id = ?", [run_id, cycle, call_id])
    ((position, name, outcome, duration, finished),) = store.query(
        f"SELECT position, name, outcome, duration, finished_at FROM {where[0]} WHERE {where[1]}",
        where[2],
    )
    head = {
        "cycle": cycle,
        "position": position,
        "call_id": call_id,
        "name": name,
        "outcome": outcome,
        "duration": duration,
        "finished_at": finished,
    }
    yield json.dumps(head, ensure_ascii=False)[:-1].encode() + b', "arguments": '
    # the arguments are stored as JSON text already: they go in as they are
    yield from _value(store, *where, "arguments")
    yield b', "result": '
    yield from _string(store, *where, "result")
    yield b"}"


def _keys(
    store: RunStore, table: str, key: str, where: str, params: Sequence[Any]
) -> Iterator[tuple[Any, ...]]:
    """The keys of a table's rows (``key``: its columns), in order, `ROWS` at a time."""
    after: tuple[Any, ...] = ()
    marks = ", ".join("?" * (key.count(",") + 1))
    while True:
        bound = f" AND ({key}) > ({marks})" if after else ""
        rows = store.query(
            f"SELECT {key} FROM {table} WHERE {where}{bound} ORDER BY {key} LIMIT ?",
            [*params, *after, ROWS],
        )
        yield from rows
        if len(rows) < ROWS:
            return
        after = tuple(rows[-1])


def _pieces(
    store: RunStore, table: str, where: str, params: Sequence[Any], column: str
) -> Iterator[str | None]:
    """A text column's value, `PIECE` characters at a time (one None for NULL)."""
    ((length, whole),) = store.query(
        f"SELECT length({column}), CASE WHEN length({column}) <= ? THEN {column} END "
        f"FROM {table} WHERE {where}",
        [PIECE, *params],
    )
    if length is None or length <= PIECE:
        yield None if length is None else str(whole)
        return
    for start in range(1, length + 1, PIECE):
        ((piece,),) = store.query(
            f"SELECT substr({column}, ?, ?) FROM {table} WHERE {where}", [start, PIECE, *params]
        )
        yield str(piece)


def _value(
    store: RunStore, table: str, where: str, params: Sequence[Any], column: str
) -> Iterator[bytes]:
    """A column holding JSON text, sent as it is (``null`` for NULL)."""
    for piece in _pieces(store, table, where, params, column):
        yield b"null" if piece is None else piece.encode()


def _string(
    store: RunStore, table: str, where: str, params: Sequence[Any], column: str
) -> Iterator[bytes]:
    """A text column as a JSON string, escaped piece by piece."""
    yield b'"'
    for piece in _pieces(store, table, where, params, column):
        if piece:
            yield json.dumps(piece, ensure_ascii=False)[1:-1].encode()
    yield b'"'
