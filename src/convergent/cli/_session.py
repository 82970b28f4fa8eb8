"""What ``run`` and ``resume`` share: the store, the run id, and the terminal session.

The session runs the agent the command built: it opens the steering queue (stored
commands plus lines typed in the terminal), hands the terminal to ``ask_user`` while it
waits for an answer, writes the trace, shows the live view (and, for a stored run, the
reply as it streams to the web console) and prints the result.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TypeAlias

import typer
from rich.console import Console
from rich.markup import escape

from convergent._run_id import check_run_id
from convergent.agent import Agent
from convergent.cli._gate import GateView
from convergent.cli._live import LiveView
from convergent.cli._terminal import HELP, TerminalSteering
from convergent.clock import current_clock
from convergent.durability.sqlite import DatabaseSteering, RunStore
from convergent.events import (
    Event,
    EventHandler,
    JsonlTraceWriter,
    ModelResponded,
    RunStopped,
    ToolFinished,
    ToolStarted,
)
from convergent.exceptions import StorageError, UserError
from convergent.gate import ASK_USER
from convergent.result import RunResult
from convergent.resuming import Continuation
from convergent.steering import SteeringQueue
from convergent.stop import StopReason
from convergent.ui.live_text import LiveTextWriter

__all__ = ["Session", "default_steer", "new_run_id", "open_reader", "open_store"]

_Start: TypeAlias = Callable[[EventHandler, SteeringQueue], Awaitable[RunResult]]
"""Starts the run with the session's event handler and steering queue."""


def open_store(db: Path, *, must_exist: bool, readonly: bool = False) -> RunStore:
    """Open the run database.

    Raises:
        UserError: If ``must_exist`` and there is no database at ``db``.
        StorageError: If it cannot be opened or is damaged.
    """
    if must_exist and not db.is_file():
        raise UserError(f"no run database at {db} (pass --db PATH)")
    return RunStore(db, readonly=readonly)


def open_reader(db: Path) -> RunStore:
    """The database opened for reading: with write access if possible, else read-only.

    Raises:
        UserError: If there is no database at ``db``.
        StorageError: If it cannot be opened even read-only, or is damaged.
    """
    try:
        return open_store(db, must_exist=True)
    except StorageError:
        return open_store(db, must_exist=True, readonly=True)


def new_run_id(store: RunStore | None, requested: str | None) -> str:
    """The id for a new run: ``requested`` if valid and unused, else a fresh one.

    Raises:
        UserError: If ``requested`` is malformed or already stored.
    """
    if requested is None:
        return current_clock().new_id()
    check_run_id(requested, name="--run-id")
    if store is not None and store.exists(requested):
        raise UserError(f"run {requested!r} already exists; continue it with: resume {requested}")
    return requested


def default_steer(steer: bool | None, json_output: bool) -> bool:
    """``--steer`` default: on when standard input is a terminal and output is not JSON."""
    if steer is not None:
        return steer
    return not json_output and sys.stdin is not None and sys.stdin.isatty()


class Session:
    """Runs one agent from the command line to an objective stop and reports it.

    Args:
        store: Run database, or None to run without persisting.
        run_id: Id of the run.
        steer: Read steering lines from standard input while the run goes on.
        json_output: Print one JSON object instead of the live view.
        trace: JSON Lines file to append every event to (but the streaming deltas).
    """

    def __init__(
        self,
        *,
        store: RunStore | None,
        run_id: str,
        steer: bool,
        json_output: bool,
        trace: Path | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.steer = steer
        self.json_output = json_output
        self.trace = trace
        self._notes = Console(stderr=True, highlight=False)
        self._reader: TerminalSteering | None = None
        self._said_saved = False

    def note(self, text: str) -> None:
        """Print a notice on standard error unless the output is JSON."""
        if not self.json_output:
            self._notes.print(f"[dim]{escape(text)}[/]")

    def _warn(self, text: str) -> None:
        if not self.json_output:
            self._notes.print(f"[yellow]{escape(text)}[/]")

    def _on_event(self, event: Event) -> None:
        """Let ``ask_user`` have the terminal while it asks."""
        if self._reader is None:
            return
        if isinstance(event, ToolStarted) and event.name == ASK_USER:
            self._reader.suspend()
        elif isinstance(event, ToolFinished) and event.name == ASK_USER:
            self._reader.release()

    def _say_saved(self, event: Event) -> None:
        """Say where the run is saved once it is kept: at its first reply, or its stop.

        Not before: a run that fails before its first reply (a model file or a server
        that does not start) is not kept (see `_forget_unstarted`).
        """
        if self.store is not None and not self._said_saved:
            if isinstance(event, ModelResponded | RunStopped):
                self._said_saved = True
                self.note(f"run {self.run_id} · saved in {self.store.path}")

    def _trace_writer(self) -> JsonlTraceWriter | None:
        if self.trace is None:
            return None
        try:
            return JsonlTraceWriter(self.trace)
        except OSError as exc:
            raise UserError(f"cannot write trace file {self.trace}: {exc.strerror}") from None

    def _queue(self) -> SteeringQueue:
        if self.store is not None:
            return DatabaseSteering(self.store, self.run_id)
        return SteeringQueue()

    def run(self, agent: Agent, task: str) -> None:
        """Run ``task``, print the outcome, exit with its code.

        Raises:
            typer.Exit: With code 1 unless the run completed.
            UserError: If the trace file cannot be written, or steering needs a terminal.
        """

        def start(on_event: EventHandler, steering: SteeringQueue) -> Awaitable[RunResult]:
            return agent.run(
                task, run_id=self.run_id, steering=steering, on_event=on_event, store=self.store
            )

        try:
            result = self._outcome(agent, start)
        except UserError:
            self._forget_unstarted()
            raise
        self._report(result)

    def _forget_unstarted(self) -> None:
        """Remove the new run if it failed before its first cycle ended.

        Such a failure is bad input (a model file that does not exist): a run that
        never started leaves nothing behind.
        """
        store = self.store
        if store is None or not store.exists(self.run_id):
            return
        run = store.get_run(self.run_id, clip=1)
        if run.cycles == 0 and run.stop_reason is None:
            store.delete(self.run_id)
            self.note(f"run {self.run_id} never started: it was not kept")

    def resume(self, ready: Continuation) -> None:
        """Continue a stored run made ready by `prepare_resume`, print the outcome, exit.

        Raises:
            typer.Exit: With code 1 unless the run completed.
            UserError: If the trace file cannot be written, or steering needs a terminal.
        """
        try:
            result = self._outcome(ready.agent, partial(_continued, ready))
        finally:
            ready.claim.release()
        self._report(result)

    def _report(self, result: RunResult) -> None:
        if self.json_output:
            print(json.dumps(result.to_dict(), ensure_ascii=False))
        if result.stop_reason is not StopReason.COMPLETED:
            raise typer.Exit(1)

    def _outcome(self, agent: Agent, start: _Start) -> RunResult:
        """Run the agent with the views, the trace and the terminal's steering."""
        writer = self._trace_writer()
        handlers: list[EventHandler] = [self._on_event, *([writer] if writer else [])]
        view = None
        if not self.json_output:
            console = Console(highlight=False)
            view = LiveView(console)
            handlers += [view, GateView(console)]
        handlers.append(self._say_saved)  # after the view: the note follows what it printed
        # the console shows a stored run's reply as it streams (the deltas are not stored)
        live = LiveTextWriter(self.store.path) if self.store is not None else None
        if live is not None:
            handlers.append(live)

        def on_event(event: Event) -> None:
            for handler in handlers:
                handler(event)

        queue = self._queue()
        try:
            if self.steer:
                try:
                    fd = sys.stdin.fileno()
                except (AttributeError, OSError, ValueError):
                    raise UserError("--steer needs a readable standard input") from None
                self._reader = TerminalSteering(queue, fd, notify=self._warn).start()
                self.note(HELP)
            return asyncio.run(_execute(agent, start, queue, on_event))
        finally:
            if view is not None:
                view.close()
            if live is not None:
                live.close()
            if self._reader is not None:
                self._reader.close()
                self._reader = None
            if writer is not None:
                writer.close()


def _continued(
    ready: Continuation, on_event: EventHandler, steering: SteeringQueue
) -> Awaitable[RunResult]:
    return ready.run(on_event=on_event, steering=steering)


async def _execute(
    agent: Agent, start: _Start, steering: SteeringQueue, on_event: EventHandler
) -> RunResult:
    # a run's MCP server processes must not outlive it, so SIGTERM ends it in order
    watch = agent.mcp_servers and sys.platform != "win32"
    terminated = _on_sigterm_cancel() if watch else None
    try:
        async with agent:
            return await start(on_event, steering)
    except asyncio.CancelledError:
        if terminated is not None and terminated.is_set():
            print("error: terminated", file=sys.stderr)
            raise typer.Exit(143) from None
        raise
    finally:
        if terminated is not None:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)


def _on_sigterm_cancel() -> asyncio.Event:
    """Make SIGTERM cancel the run, so that its MCP server processes are stopped too."""
    task = asyncio.current_task()
    assert task is not None
    terminated = asyncio.Event()

    def cancel() -> None:
        terminated.set()
        task.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, cancel)
    return terminated
