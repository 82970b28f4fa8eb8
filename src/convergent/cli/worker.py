"""``convergent worker``: run convergent runs for a Temporal task queue."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from convergent.cli._app import app
from convergent.cli._temporal import (
    DbOption,
    TaskQueueOption,
    checked_address,
    connect_runner,
    require_extra,
)
from convergent.durability.sqlite import DEFAULT_DB_PATH
from convergent.exceptions import UserError

if TYPE_CHECKING:
    from convergent.temporal import TemporalRunner

__all__ = ["worker_command"]


async def _polling(runner: TemporalRunner, tries: int = 300) -> None:
    """Return once the server lists a worker on the task queue (or after ``tries``)."""
    for _ in range(tries):
        try:
            if await runner.has_workers():
                return
        except UserError:  # the queue cannot be described: the worker serves anyway
            return
        await asyncio.sleep(0.1)


@app.command("worker")
def worker_command(
    temporal: Annotated[
        str,
        typer.Option(
            "--temporal",
            metavar="HOST:PORT",
            help="The Temporal cluster.",
            callback=checked_address,
        ),
    ],
    task_queue: TaskQueueOption = "convergent",
    db: DbOption = DEFAULT_DB_PATH,
) -> None:
    """Run workflows and activities of convergent runs for a Temporal task queue."""
    require_extra()
    from convergent.temporal import make_worker  # noqa: PLC0415  (optional extra)

    store = Path(db).absolute()  # the default is relative: say which file it is

    async def serve() -> None:
        runner = await connect_runner(temporal, task_queue, db, quiet=False)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        # entering it refuses a payload store that is not the cluster's, before it polls
        async with make_worker(runner.client, task_queue):
            # a client refuses to submit runs to a queue no worker polls: say "ready"
            # only once the server lists this worker
            await _polling(runner)
            print(
                f"worker on {temporal}, task queue {task_queue!r}, payload store "
                f"{store}; Ctrl-C stops it",
                flush=True,
            )
            await stop.wait()

    asyncio.run(serve())
