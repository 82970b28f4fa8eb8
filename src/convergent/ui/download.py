"""A whole run as one JSON document, written a few rows at a time.

Pages cut long values (see `convergent.ui.timeline.CLIP`); the run's download has them
all: its summary and recipe, its current conversation, every finished tool call and
every stored event. Rows are read `ROWS` at a time, each after the last one sent, so
the server holds a few rows of a run of any size, never the whole of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from convergent.durability.sqlite import RunStore

__all__ = ["ROWS", "run_json"]

ROWS = 8
"""Rows read per query (a row may be a tool result of many megabytes)."""


def run_json(store: RunStore, run_id: str) -> Iterator[bytes]:
    """The run as JSON: ``{"run": ..., "messages": [...], "tool_calls": [...], "events": [...]}``.

    Raises:
        UserError: If no run has this id (before anything is produced).
    """
    run = store.get_run(run_id)
    ((epoch,),) = store.query("SELECT epoch FROM runs WHERE run_id = ?", [run_id])
    summary = {
        "run_id": run.run_id,
        "task": run.task,
        "model": run.model,
        "status": run.status,
        "stop_reason": run.stop_reason.value if run.stop_reason else None,
        "stop_detail": run.stop_detail,
        "output": run.output,
        "output_after_stop": run.output_after_stop,
        "output_data": run.output_data,
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
        "recipe": run.recipe,
    }
    del run
    return _document(store, run_id, epoch, summary)


def _document(store: RunStore, run_id: str, epoch: int, summary: dict[str, Any]) -> Iterator[bytes]:
    yield b'{"run": ' + json.dumps(summary, ensure_ascii=False).encode()
    summary.clear()
    yield b', "messages": ['
    yield from _rows(
        store,
        "SELECT seq, data FROM messages WHERE run_id = ? AND epoch = ? AND seq > ? "
        "ORDER BY seq LIMIT ?",
        [run_id, epoch],
        (-1,),
        lambda row: row[1],
    )
    yield b'], "tool_calls": ['
    yield from _rows(
        store,
        "SELECT cycle, call_id, position, name, arguments, outcome, result, duration, "
        "finished_at FROM finished_calls WHERE run_id = ? AND (cycle, call_id) > (?, ?) "
        "ORDER BY cycle, call_id LIMIT ?",
        [run_id],
        (-1, ""),
        _call,
    )
    yield b'], "events": ['
    yield from _rows(
        store,
        "SELECT seq, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        [run_id],
        (-1,),
        lambda row: row[1],
    )
    yield b"]}\n"


def _call(row: tuple[Any, ...]) -> str:
    cycle, call_id, position, name, arguments, outcome, result, duration, finished = row
    head = json.dumps(
        {
            "cycle": cycle,
            "position": position,
            "call_id": call_id,
            "name": name,
            "outcome": outcome,
            "duration": duration,
            "finished_at": finished,
        },
        ensure_ascii=False,
    )
    # the arguments are stored as JSON text already: they go in as they are
    result_json = json.dumps(result, ensure_ascii=False)
    return f'{head[:-1]}, "arguments": {arguments}, "result": {result_json}}}'


def _rows(
    store: RunStore,
    sql: str,
    params: list[Any],
    start: tuple[Any, ...],
    text: Callable[[tuple[Any, ...]], str],
) -> Iterator[bytes]:
    """Each row's JSON text, comma-separated, reading `ROWS` rows after the last key.

    ``sql`` ends with a bound on the key (the first ``len(start)`` columns) and a limit.
    """
    after = start
    first = True
    while True:
        rows = store.query(sql, [*params, *after, ROWS])
        for row in rows:
            yield (b"" if first else b", ") + text(row).encode()
            first = False
        if len(rows) < ROWS:
            return
        after = tuple(rows[-1][: len(start)])
