"""``convergent worker``: run convergent runs for a Temporal task queue."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer

from convergent.cli._app import app
from convergent.cli._temporal import TaskQueueOption, connect_runner, require_extra

__all__ = ["worker_command"]


@app.command("worker")
def worker_command(
    temporal: Annotated[
        str, typer.Option("--temporal", metavar="HOST:PORT", help="The Temporal cluster.")
    ],
    task_queue: TaskQueueOption = "convergent",
) -> None:
    """Run workflows and activities of convergent runs for a Temporal task queue."""
    require_extra()
    from convergent.temporal import run_worker  # noqa: PLC0415  (optional extra)

    async def serve() -> None:
        connected = await connect_runner(temporal, task_queue)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"worker on {temporal}, task queue {task_queue!r}; Ctrl-C stops it", flush=True)
        await run_worker(connected.client, task_queue, stop=stop)

    asyncio.run(serve())
