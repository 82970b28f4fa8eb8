"""Steering across processes: commands stored in the run database, taken by the run.

``convergent steer RUN_ID "message"``, the web console and `RunStore.send_steering`
insert a row into the ``steering`` table; the running process's `DatabaseSteering`
takes it at the next cycle boundary and hands it to the loop exactly like an
in-process command. The row is marked consumed in the same transaction that stores the
message it delivered, so a crash can neither lose nor repeat it. Commands sent while no
process runs the run wait there and are delivered when it resumes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from convergent.durability.sqlite._access import StoreAccess
from convergent.durability.sqlite._codec import mark_consumed
from convergent.steering import SteeringCommand, SteeringKind, SteeringQueue, Taken

__all__ = ["DatabaseSteering"]


class DatabaseSteering(SteeringQueue):
    """A `SteeringQueue` that also takes the commands other processes stored for a run.

    Args:
        store: The run database.
        run_id: The run whose commands this queue receives.
    """

    def __init__(self, store: StoreAccess, run_id: str) -> None:
        super().__init__()
        self.store = store
        self.run_id = run_id
        self._last_id = 0
        self._seen_version: tuple[int, int] | None = None

    def poll(self) -> None:
        """Take the stored commands (only when the database changed since the last look).

        A database busy with a write is looked at again at the next poll, so that the
        event loop never waits for it.
        """
        polled = self.store.steering_if_free(self.run_id, self._last_id, self._seen_version)
        if polled is None or polled[0] == self._seen_version:
            return
        self._seen_version, stored = polled
        applied: list[int] = []
        for row_id, kind, text in stored:
            self._last_id = max(self._last_id, row_id)
            if kind == SteeringKind.STOP and not text:
                text = "stop requested from another process"
            command = SteeringCommand(SteeringKind(kind), text, row_id)
            self.put(command)
            if command.kind in (SteeringKind.PAUSE, SteeringKind.RESUME):
                applied.append(row_id)
        self._consume(applied)

    def take(self) -> Taken:
        """Take every queued command, stored ones included, oldest first."""
        self.poll()
        return super().take()

    def acknowledge(self, commands: Iterable[SteeringCommand]) -> None:
        """Mark the stored ones among ``commands`` consumed."""
        self._consume([c.id for c in commands if c.id is not None])

    def _consume(self, ids: list[int]) -> None:
        """Mark stored commands consumed, without making the event loop wait.

        Now if the database is free, else on its writer thread, after the writes before.
        """
        if ids:
            self.store.write_soon(lambda conn: mark_consumed(conn, ids))

    async def wait_for_stop(self, poll: float = 0.25) -> None:
        """Return once a stop waits to be taken, checking the database while waiting."""
        while True:
            self.poll()
            if self.stopping:
                return
            await asyncio.sleep(poll)

    async def wait_while_paused(self, poll: float = 0.05) -> None:
        """Return once no pause is in force, checking the database while waiting."""
        while self._paused:  # noqa: ASYNC110  (resumed from another process)
            await asyncio.sleep(poll)
            self.poll()
