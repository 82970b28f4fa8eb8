"""Real-time steering: messages, stop and pause requests delivered to a running loop.

Commands are queued from anywhere (another task, a thread, a terminal reader) and the
loop drains them at the next cycle boundary: a message becomes a redirect (an
interruption, not a stop), a stop ends the run with ``stopped``, a pause holds the
loop before its next model request until resumed.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass

__all__ = ["SteeringCommand", "SteeringQueue"]


@dataclass(frozen=True, slots=True)
class SteeringCommand:
    """One steering command: ``kind`` is ``message``, ``stop``, ``pause`` or ``resume``."""

    kind: str
    text: str = ""


class SteeringQueue:
    """A thread-safe queue of steering commands for one run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: deque[SteeringCommand] = deque()
        self._paused = False
        self._resumed = threading.Event()
        self._resumed.set()

    def send(self, message: str) -> None:
        """Queue new user instructions for the next cycle boundary."""
        self._put(SteeringCommand("message", message))

    def stop(self, reason: str = "stop requested") -> None:
        """Ask the run to stop at the next cycle boundary (and end any pause)."""
        self._put(SteeringCommand("stop", reason))
        self.resume()

    def pause(self) -> None:
        """Hold the run before its next model request until `resume` or `stop`."""
        with self._lock:
            self._paused = True
            self._resumed.clear()

    def resume(self) -> None:
        """Let a paused run continue."""
        with self._lock:
            self._paused = False
            self._resumed.set()

    @property
    def paused(self) -> bool:
        """Whether a pause is in force."""
        return self._paused

    def _put(self, command: SteeringCommand) -> None:
        with self._lock:
            self._pending.append(command)

    def drain(self) -> list[SteeringCommand]:
        """Take every queued command, oldest first."""
        with self._lock:
            commands = list(self._pending)
            self._pending.clear()
        return commands

    async def wait_while_paused(self, poll: float = 0.05) -> None:
        """Return once no pause is in force (polls, so it works across threads)."""
        while not self._resumed.is_set():  # noqa: ASYNC110  (set from other threads)
            await asyncio.sleep(poll)
