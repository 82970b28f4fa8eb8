"""Real-time steering: messages, stop and pause requests delivered to a running loop.

Commands are queued from anywhere (another task, a thread, a terminal reader, another
process through the run store, a workflow signal) and the loop takes them at the next
cycle boundary: a message becomes a redirect (an interruption, not a stop), a stop ends
the run ``stopped``, a pause holds the loop before its next model request until resumed.
A stop that comes while a model request is in flight ends the request and the run at
once (`SteeringQueue.wait_for_stop`).

A message and a stop taken at the same boundary: the stop wins and the message is put
back, so it is delivered when the run resumes instead of being lost.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never

__all__ = ["NO_COMMANDS", "SteeringCommand", "SteeringKind", "SteeringQueue", "Taken"]


class SteeringKind(StrEnum):
    """What a steering command asks of the run."""

    MESSAGE = "message"
    """New user instructions, delivered as a redirect at the next boundary."""
    STOP = "stop"
    """End the run ``stopped`` at the next boundary (and end any pause)."""
    PAUSE = "pause"
    """Hold the run before its next model request."""
    RESUME = "resume"
    """Release a paused run."""


@dataclass(frozen=True, slots=True)
class SteeringCommand:
    """One steering command."""

    kind: SteeringKind
    """What is asked."""
    text: str = ""
    """The message, or the reason of a stop."""
    id: int | None = None
    """Row id when the command came from a run store (so the store can mark it consumed)."""


@dataclass(frozen=True, slots=True)
class Taken:
    """What the loop takes from a queue at one boundary."""

    messages: tuple[SteeringCommand, ...] = ()
    """Messages, oldest first."""
    stop: SteeringCommand | None = None
    """The first stop request, if any."""
    roll_over: bool = False
    """Continue the run in a fresh process from its state (a Temporal workflow whose
    history grew long); the messages stay queued for it."""


NO_COMMANDS = Taken()
"""What `SteeringQueue.take` returns when nothing is queued."""


class SteeringQueue:
    """A thread-safe queue of steering commands for one run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: deque[SteeringCommand] = deque()
        self._paused = False
        self._resumed = threading.Event()
        self._resumed.set()

    def put(self, command: SteeringCommand) -> None:
        """Apply one command: queue a message or stop, or change the pause state."""
        match command.kind:
            case SteeringKind.MESSAGE:
                with self._lock:
                    self._pending.append(command)
            case SteeringKind.STOP:
                with self._lock:
                    self._pending.append(command)
                self._set_paused(False)
            case SteeringKind.PAUSE:
                self._set_paused(True)
            case SteeringKind.RESUME:
                self._set_paused(False)
            case _:
                assert_never(command.kind)

    def send(self, message: str) -> None:
        """Queue new user instructions for the next cycle boundary."""
        self.put(SteeringCommand(SteeringKind.MESSAGE, message))

    def stop(self, reason: str = "stop requested") -> None:
        """Ask the run to stop at the next cycle boundary (and end any pause)."""
        self.put(SteeringCommand(SteeringKind.STOP, reason))

    def pause(self) -> None:
        """Hold the run before its next model request until `resume` or `stop`."""
        self.put(SteeringCommand(SteeringKind.PAUSE))

    def resume(self) -> None:
        """Let a paused run continue."""
        self.put(SteeringCommand(SteeringKind.RESUME))

    def _set_paused(self, paused: bool) -> None:
        with self._lock:
            self._paused = paused
            if paused:
                self._resumed.clear()
            else:
                self._resumed.set()

    @property
    def paused(self) -> bool:
        """Whether a pause is in force."""
        return self._paused

    @property
    def pending(self) -> bool:
        """Whether a message or stop waits to be taken."""
        return bool(self._pending)

    @property
    def stopping(self) -> bool:
        """Whether a stop waits to be taken."""
        if not self._pending:
            return False
        with self._lock:
            return any(command.kind is SteeringKind.STOP for command in self._pending)

    async def wait_for_stop(self, poll: float = 0.1) -> None:
        """Return once a stop waits to be taken (polls, so it works across threads).

        The loop races a model request against it: a stop that comes while a slow reply
        streams in ends the run at once, instead of at the request's end.
        """
        while not self.stopping:  # noqa: ASYNC110  (stopped from other threads)
            await asyncio.sleep(poll)

    def take(self) -> Taken:
        """Take every queued message and the first stop, oldest first."""
        if not self._pending:
            return NO_COMMANDS
        with self._lock:
            commands = list(self._pending)
            self._pending.clear()
        return _split(commands)

    def requeue(self, commands: Iterable[SteeringCommand]) -> None:
        """Put commands back at the front, in order (messages a stop kept from delivery)."""
        with self._lock:
            self._pending.extendleft(reversed(list(commands)))

    def acknowledge(self, commands: Iterable[SteeringCommand]) -> None:
        """Mark taken commands as handled; a stored queue marks their rows consumed."""

    async def wait_while_paused(self, poll: float = 0.05) -> None:
        """Return once no pause is in force (polls, so it works across threads)."""
        while not self._resumed.is_set():  # noqa: ASYNC110  (set from other threads)
            await asyncio.sleep(poll)


def _split(commands: list[SteeringCommand]) -> Taken:
    stop = next((c for c in commands if c.kind is SteeringKind.STOP), None)
    messages = tuple(c for c in commands if c.kind is SteeringKind.MESSAGE)
    return Taken(messages, stop)
