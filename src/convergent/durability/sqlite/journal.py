"""`SqliteJournal`: writes one run into a `RunStore` as the loop awaits it.

A cycle is one transaction: when the calls of a response are final, the new messages
(the previous cycle's results and this response), the previous cycle's checkpoint and
the live summary are committed before any call runs, so that a resumed run knows every
call that may have run. A finished call that may not run twice (its tool is not declared
``idempotent``) or that spent the run's budgets (a child run) is committed the moment
it finishes, so that neither its result nor its spend is lost and the call is never
repeated; the record of one that may simply run again waits for the next transaction
(a crash before it runs the call again when the run resumes). Each write
appends only what changed since the last one, so its cost does not grow with the length
of the run; the run's monitor (the counters behind its stop facts) is small and
bounded, and is written with the run's summary.

A write that nothing makes wait commits at once, as the loop awaits it; one that would
wait (another connection holds the write lock, a write is already queued, or each commit
syncs the disk) goes to the database's writer thread (`RunStore.write_soon`), where the
writes run one after the other in the order the loop asked for them. Either way the
loop goes on only after the commit: what each step promises is on disk when it returns,
yet waiting for another process's lock (up to the store's timeout) or for the disk never
stalls the event loop, where the run's other tool calls go on.

A stored run is claimed (see `convergent.durability.sqlite._claims`) in the transaction that adopts
it, so two processes or tasks never continue one run together.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent.clock import Clock, current_clock
from convergent.durability.protocol import JournaledRun
from convergent.durability.sqlite import _claims, rollback
from convergent.durability.sqlite._access import StoreAccess
from convergent.durability.sqlite._codec import (
    delete_calls,
    dump_arguments,
    dump_message,
    end_pause,
    insert_messages,
    insert_records,
    mark_consumed,
    next_epoch,
    remember_tools,
    row_monitor_json,
    row_usage_json,
    usage_dict,
    usage_json,
)
from convergent.durability.sqlite.steering import DatabaseSteering
from convergent.events import CycleStarted, Event, ModelResponded, event_to_dict
from convergent.exceptions import UserError
from convergent.messages import AssistantMessage, CallOutcome, ToolCall, Usage
from convergent.models.base import Replayable
from convergent.state import RunState, ToolCallRecord
from convergent.steering import SteeringCommand
from convergent.tools import Tool

__all__ = ["SqliteJournal"]

_NOT_STORED = frozenset({"cycle_started", "tool_started", "tool_finished", "run_stopped"})
"""Events whose content the other tables already hold."""
_UNRECORDED = (CallOutcome.NEEDS_USER, CallOutcome.NOT_EXECUTED)
"""Outcomes kept in ``finished_calls`` that are not among the run's executed calls."""


@dataclass(frozen=True, slots=True)
class _Boundary:
    """The state at the end of a cycle, kept until the next write stores it."""

    cycle: int
    count: int
    usage: Usage
    elapsed: float
    positions: str


class SqliteJournal:
    """Persists one run into a `RunStore` (see `convergent.durability.protocol.RunJournal`).

    Args:
        store: The database.
        run: The run, and what the journal needs to know of its agent: its tools
            (file-modifying ones get snapshots; MCP tools their server), its workspace
            (None disables snapshots), its spec (stored, so another process can rebuild
            its agent), its models (replayed ones have their position stored) and the
            call it is the child run of.
        claim: Token of a claim taken on the stored run for this journal (see
            `convergent.durability.sqlite.claim.RunClaim`); without one, resuming claims
            the run when it starts.
    """

    receives_deltas = False
    """Streaming deltas are not journaled: the final response is."""

    def __init__(self, store: StoreAccess, run: JournaledRun, *, claim: str | None = None) -> None:
        self.store = store
        self.run_id = run.run_id
        self._sources = {t.name: getattr(t, "source", None) for t in run.tools}
        self._at_once = frozenset(t.name for t in run.tools if not t.idempotent or t.spends_budget)
        """Tools whose call's end is committed the moment it comes: one that may not run
        twice, and one that spends the run's budgets (a child run), whose spend counts."""
        self._held: list[Callable[[sqlite3.Connection], None]] = []
        """Writes that may wait: they go first in the next transaction."""
        self._tools_stored: set[str] = set()
        """Names of tools this journal has put in the ``tools`` table (once is enough)."""
        self._workspace = Path(run.workspace) if run.workspace is not None else None
        self._spec = run.spec
        self._replayed = {
            role: model
            for role, model in run.models.items()
            if isinstance(model, Replayable) and model.position() is not None
        }
        self._positions_seen: tuple[tuple[int | None, ...], str] = ((), "{}")
        self._steering = DatabaseSteering(store, run.run_id)
        self._epoch = 0
        self._written = 0
        self._boundary: _Boundary | None = None
        self._checkpointed = -1
        self._rewrite = False
        self._events: list[tuple[int, int, str, float, str]] = []
        self._event_seq = 0
        self._clock: Clock = current_clock()
        self._started = 0.0
        self._elapsed_before = 0.0
        self._claim = claim
        self._parent = run.parent
        self._token = _claims.new_token()
        self.claimed = False
        """Whether the run is held under this journal's own claim (once started)."""

    @property
    def steering(self) -> DatabaseSteering:
        """Steering commands stored for this run (``convergent steer``, the console)."""
        return self._steering

    def _elapsed(self) -> float:
        return self._elapsed_before + self._clock.monotonic() - self._started

    def _positions(self) -> str:
        if not self._replayed:
            return "{}"
        positions = tuple(model.position() for model in self._replayed.values())
        if positions != self._positions_seen[0]:
            text = json.dumps(dict(zip(self._replayed, positions, strict=True)))
            self._positions_seen = (positions, text)
        return self._positions_seen[1]

    def on_event(self, event: Event, state: RunState) -> None:
        """Remember the end of each cycle, and keep the events worth storing."""
        if isinstance(event, CycleStarted):
            self._boundary = _Boundary(
                event.cycle - 1,
                len(state.messages),
                state.usage,
                self._elapsed(),
                self._positions(),
            )
            return
        if event.type in _NOT_STORED:
            return
        if getattr(event, "rewrites_history", False):
            self._rewrite = True
        self._event_seq += 1
        stored = _reply_facts(event) if isinstance(event, ModelResponded) else event_to_dict(event)
        if event.type == "run_started":
            stored["task"] = ""  # the run's row has it (a task may be long)
        data = json.dumps(stored, ensure_ascii=False, default=str)
        self._events.append((self._event_seq, event.cycle, event.type, event.time, data))

    # -- the awaited steps --------------------------------------------------------------

    async def started(self, state: RunState, *, resumed: bool) -> None:
        """Insert the run (or claim and adopt its stored rows when resuming).

        Raises:
            UserError: If the run exists and this is not a resumption, or another
                process or task holds it.
        """
        self._clock = current_clock()
        self._started = self._clock.monotonic()
        self._elapsed_before = state.elapsed
        try:
            await self._commit(lambda conn: self._begin(conn, state, resumed))
        except BaseException:
            _claims.drop(self._token)
            raise
        self.claimed = True
        if self._claim is not None:
            _claims.drop(self._claim)

    def _begin(self, conn: sqlite3.Connection, state: RunState, resumed: bool) -> None:
        row = conn.execute(
            "SELECT epoch, message_count FROM runs WHERE run_id = ?", (self.run_id,)
        ).fetchone()
        if row is not None and not resumed:
            raise UserError(f"a run {self.run_id!r} already exists in {self.store.path}")
        if row is None:
            self._insert_run(conn, state)
        else:
            _claims.take(conn, self.store.path, self.run_id, self._token, handed=self._claim)
            self._adopt(conn, state, epoch=row[0], count=row[1])
            end_pause(conn, self.run_id)
        (self._event_seq,) = conn.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", (self.run_id,)
        ).fetchone()
        self._write_messages(conn, state)
        self._write_checkpoint(
            conn,
            _Boundary(
                state.cycles, len(state.messages), state.usage, state.elapsed, self._positions()
            ),
        )
        self._update_run(conn, state, state.cycles)

    async def calls_ready(self, state: RunState, cycle: int, calls: Sequence[ToolCall]) -> None:
        """Store the assistant message with its calls before any of them runs."""
        boundary, events = self._take_boundary(), self._take_events()

        def write(conn: sqlite3.Connection) -> None:
            self._write_messages(conn, state)
            self._write_boundary(conn, boundary)
            self._write_events(conn, events)
            self._update_running(conn, state, cycle)

        await self._commit(write)

    async def before_call(self, state: RunState, cycle: int, call: ToolCall, tool: Tool) -> None:
        """Snapshot the files the call may change (read in a thread, stored in one write)."""
        if self._workspace is None:
            return
        files = await asyncio.to_thread(rollback.capture, self._workspace, call.arguments)
        taken_at = self._clock.now()

        def write(conn: sqlite3.Connection) -> None:
            rollback.save_snapshot(conn, self.run_id, cycle, call.id, files, taken_at)

        await self._commit(write)

    async def finished(self, state: RunState, record: ToolCallRecord, position: int) -> None:
        """Commit one finished call, before the loop records it."""
        if position < 0:
            position = _position(state, record.id)
        finished_at, source = self._clock.now(), self._sources.get(record.name)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO finished_calls (run_id, cycle, position, call_id, name, "
                "arguments, outcome, result, duration, finished_at, source) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.run_id,
                    record.cycle,
                    position,
                    record.id,
                    record.name,
                    dump_arguments(record.arguments),
                    record.outcome,
                    record.result,
                    record.duration,
                    finished_at,
                    source,
                ),
            )
            if record.name not in self._tools_stored:
                remember_tools(conn, (record.name,))
                self._tools_stored.add(record.name)

        if record.name in self._at_once:
            await self._commit(write)
        else:
            self._held.append(write)  # it may run again: it waits for the next transaction

    async def delivered(self, state: RunState, commands: Sequence[SteeringCommand]) -> None:
        """Store the delivered messages and mark their steering rows consumed, together."""
        events = self._take_events()

        def write(conn: sqlite3.Connection) -> None:
            self._write_messages(conn, state)
            mark_consumed(conn, [c.id for c in commands if c.id is not None])
            self._write_events(conn, events)
            self._update_running(conn, state, state.cycles)

        await self._commit(write)

    async def stopped(self, state: RunState, consumed: Sequence[SteeringCommand] = ()) -> None:
        """Store the end of the run: messages, last checkpoint, stop reason."""
        boundary, events = self._take_boundary(), self._take_events()

        def write(conn: sqlite3.Connection) -> None:
            self._write_messages(conn, state)
            self._write_boundary(conn, boundary)
            self._write_checkpoint(
                conn,
                _Boundary(
                    state.cycles, len(state.messages), state.usage, state.elapsed, self._positions()
                ),
            )
            mark_consumed(conn, [c.id for c in consumed if c.id is not None])
            self._write_events(conn, events)
            self._update_run(conn, state, state.cycles, stopped=True)
            conn.execute("UPDATE runs SET claim = NULL WHERE run_id = ?", (self.run_id,))

        await self._commit(write)
        _claims.drop(self._token)

    def on_run_error(self, error: BaseException, state: RunState) -> None:
        """The run ended with an exception: this process lets go of it."""
        _claims.drop(self._token)

    # -- pieces of the writes -----------------------------------------------------------

    async def _commit(self, write: Callable[[sqlite3.Connection], None]) -> None:
        """Commit ``write`` in one transaction: now if it need not wait, else on the writer.

        The writes held until then go first, in the same transaction. A cancelled caller
        still waits for the write it started (it is on its way to disk), so that what
        the run does next never races it; it waits as a coroutine, so the event loop and
        the other runs on it go on meanwhile (the writer may be waiting for another
        process's lock). Cancelled again meanwhile, it stops waiting: the writer thread
        still runs the writes in the order they came.
        """
        if self._held:
            held, self._held = [*self._held, write], []

            def write(conn: sqlite3.Connection) -> None:
                for step in held:
                    step(conn)

        queued = self.store.write_soon(write)
        if queued is None:
            return
        done = asyncio.wrap_future(queued)
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            await asyncio.wait([done])
            if done.done() and not done.cancelled():
                done.exception()  # the run is cancelled: its last write's failure is not raised
            raise

    def _take_boundary(self) -> _Boundary | None:
        """The cycle end noted since the last write (taken on the loop, stored by the writer)."""
        boundary, self._boundary = self._boundary, None
        return boundary

    def _take_events(self) -> list[tuple[int, int, str, float, str]]:
        """The events kept since the last write (taken on the loop, stored by the writer)."""
        events, self._events = self._events, []
        return events

    def _insert_run(self, conn: sqlite3.Connection, state: RunState) -> None:
        now = self._clock.now()
        _claims.hold(self._token)
        conn.execute(
            "INSERT INTO runs (run_id, task, model, status, cycles, usage, elapsed, started_at, "
            "updated_at, pid, pid_start, claim, workspace, recipe, epoch, message_count, "
            "state_version, parent_run_id, parent_call_id) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?)",
            (
                self.run_id,
                state.task,
                state.model,
                state.cycles,
                row_usage_json(state.usage),
                state.elapsed,
                state.started_at or now,
                now,
                os.getpid(),
                _claims.own_start(),
                self._token,
                str(self._workspace) if self._workspace is not None else None,
                json.dumps(self._spec) if self._spec is not None else None,
                state.schema_version,
                *(self._parent or (None, None)),
            ),
        )
        if state.tool_calls:
            insert_records(conn, self.run_id, state.tool_calls, now)

    def _adopt(self, conn: sqlite3.Connection, state: RunState, *, epoch: int, count: int) -> None:
        """Continue the stored epoch and records when ``state`` extends what is stored."""
        messages = state.messages
        if 0 < count <= len(messages):
            first, last = conn.execute(
                "SELECT (SELECT data FROM messages WHERE run_id = ?1 AND epoch = ?2 AND seq = 0),"
                " (SELECT data FROM messages WHERE run_id = ?1 AND epoch = ?2 AND seq = ?3)",
                (self.run_id, epoch, count - 1),
            ).fetchone()
            if first == dump_message(messages[0]) and last == dump_message(messages[count - 1]):
                self._epoch, self._written = epoch, count
        (stored,) = conn.execute(
            "SELECT COUNT(*) FROM finished_calls WHERE run_id = ? AND outcome NOT IN (?, ?)",
            (self.run_id, *_UNRECORDED),
        ).fetchone()
        if stored != len(state.tool_calls):
            delete_calls(conn, "run_id = ? AND outcome NOT IN (?, ?)", (self.run_id, *_UNRECORDED))
            insert_records(conn, self.run_id, state.tool_calls, self._clock.now())
        conn.execute(
            "UPDATE runs SET stop_reason = NULL, stop_detail = '', stop_rule = '', output = '', "
            "output_after_stop = 0, output_data = NULL, recipe = COALESCE(?, recipe), "
            "workspace = COALESCE(?, workspace) WHERE run_id = ?",
            (
                json.dumps(self._spec) if self._spec is not None else None,
                str(self._workspace) if self._workspace is not None else None,
                self.run_id,
            ),
        )

    def _write_messages(self, conn: sqlite3.Connection, state: RunState) -> None:
        messages = state.messages
        if self._rewrite or self._epoch == 0 or len(messages) < self._written:
            self._epoch, self._written, self._rewrite = next_epoch(conn, self.run_id), 0, False
        if len(messages) > self._written:
            insert_messages(
                conn, self.run_id, self._epoch, self._written, messages[self._written :]
            )
            self._written = len(messages)

    def _write_boundary(self, conn: sqlite3.Connection, boundary: _Boundary | None) -> None:
        if boundary is not None and boundary.cycle > self._checkpointed:
            self._write_checkpoint(conn, boundary)

    def _write_checkpoint(self, conn: sqlite3.Connection, point: _Boundary) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO checkpoints (run_id, cycle, epoch, message_count, usage, "
            "elapsed, created_at, positions) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.run_id,
                point.cycle,
                self._epoch,
                point.count,
                usage_json(point.usage),
                point.elapsed,
                self._clock.now(),
                point.positions,
            ),
        )
        self._checkpointed = max(self._checkpointed, point.cycle)

    def _write_events(
        self, conn: sqlite3.Connection, events: list[tuple[int, int, str, float, str]]
    ) -> None:
        if events:
            conn.executemany(
                "INSERT OR REPLACE INTO events (run_id, seq, cycle, type, time, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(self.run_id, *event) for event in events],
            )

    def _update_running(self, conn: sqlite3.Connection, state: RunState, cycles: int) -> None:
        """The live summary of a running run: what a cycle changes (`_update_run` the rest)."""
        conn.execute(
            "UPDATE runs SET cycles = ?, usage = ?, elapsed = ?, updated_at = ?, epoch = ?, "
            "message_count = ?, monitor = ?, positions = ? WHERE run_id = ?",
            (
                cycles,
                row_usage_json(state.usage),
                self._elapsed(),
                self._clock.now(),
                self._epoch,
                self._written,
                row_monitor_json(state.monitor),
                self._positions(),
                self.run_id,
            ),
        )

    def _update_run(
        self, conn: sqlite3.Connection, state: RunState, cycles: int, *, stopped: bool = False
    ) -> None:
        conn.execute(
            "UPDATE runs SET status = ?, stop_reason = ?, stop_detail = ?, stop_rule = ?, "
            "output = ?, cycles = ?, usage = ?, elapsed = ?, updated_at = ?, epoch = ?, "
            "message_count = ?, "
            "monitor = ?, output_after_stop = ?, output_data = ?, positions = ?, "
            "state_version = ? WHERE run_id = ?",
            (
                "stopped" if stopped else "running",
                state.stop_reason.value if stopped and state.stop_reason else None,
                state.stop_detail if stopped else "",
                state.stop_rule if stopped else "",
                state.output if stopped else "",
                cycles,
                row_usage_json(state.usage),
                state.elapsed if stopped else self._elapsed(),
                self._clock.now(),
                self._epoch,
                self._written,
                row_monitor_json(state.monitor),
                stopped and state.output_after_stop,
                json.dumps(state.output_json)
                if stopped and state.output_json is not None
                else None,
                self._positions(),
                state.schema_version,
                self.run_id,
            ),
        )


def _position(state: RunState, call_id: str) -> int:
    """Position of ``call_id`` in the latest assistant message with calls (-1: not found)."""
    for message in reversed(state.messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            for position, call in enumerate(message.tool_calls):
                if call.id == call_id:
                    return position
            return -1
    return -1


def _reply_facts(event: ModelResponded) -> dict[str, Any]:
    """What is stored of a reply: the request's facts (the reply itself is in ``messages``)."""
    return {
        "type": event.type,
        "run_id": event.run_id,
        "cycle": event.cycle,
        "time": event.time,
        "finish_reason": event.finish_reason,
        "usage": usage_dict(event.usage),
        "metadata": event.metadata,
        "duration": event.duration,
        "first_delta": event.first_delta,
        "settings": event.settings,
    }
