"""Steering across processes: commands stored in the run database, polled by the run.

``convergent steer RUN_ID "message"`` (or `RunStore.send_steering`) inserts a row into
the ``steering`` table; the running process's `DatabaseSteering` claims it at the next
cycle boundary and hands it to the loop exactly like an in-process command. Commands
sent while no process runs the run wait there and are delivered when it resumes.
"""

from __future__ import annotations

import asyncio

from convergent.steering import SteeringCommand, SteeringQueue
from convergent.store.sqlite import RunStore

__all__ = ["DatabaseSteering"]


class DatabaseSteering(SteeringQueue):
    """A `SteeringQueue` that also takes the commands other processes stored for a run.

    Args:
        store: The run database.
        run_id: The run whose commands this queue receives.
    """

    def __init__(self, store: RunStore, run_id: str) -> None:
        super().__init__()
        self.store = store
        self.run_id = run_id

    def poll(self) -> None:
        """Claim the stored commands and apply them to this queue."""
        for kind, text in self.store.take_steering(self.run_id):
            if kind == "message":
                self.send(text)
            elif kind == "stop":
                self.stop(text or "stop requested from another process")
            elif kind == "pause":
                self.pause()
            elif kind == "resume":
                self.resume()

    def drain(self) -> list[SteeringCommand]:
        """Take every queued command, stored ones included, oldest first."""
        self.poll()
        return super().drain()

    @property
    def paused(self) -> bool:
        """Whether a pause is in force (after taking stored commands)."""
        self.poll()
        return self._paused

    async def wait_while_paused(self, poll: float = 0.05) -> None:
        """Return once no pause is in force, checking the database while waiting."""
        while self.paused:  # noqa: ASYNC110  (resumed from another process)
            await asyncio.sleep(poll)
