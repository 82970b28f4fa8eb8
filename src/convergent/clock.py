"""Where the loop gets the time and fresh ids, so that its decisions can be replayed.

The loop and everything it calls while deciding (limits, stall counts, the gate, event
stamps) read time and ids from the clock of the current context, never from `time`,
`os.urandom`, `uuid` or `random` directly. A durable-execution engine installs its own deterministic
clock with `use_clock` (Temporal: the workflow's time and seeded ids), so replaying a
run's history reaches the same decisions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["Clock", "SystemClock", "current_clock", "now", "readers", "use_clock"]


class Clock:
    """Wall time, a monotonic timer and fresh ids: the loop's only sources of either.

    Subclass it to replace any of the three; the base class reads the system.
    """

    __slots__ = ()

    def now(self) -> float:
        """Unix time in seconds (event stamps, ``started_at``)."""
        return time.time()

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (elapsed time, durations)."""
        return time.perf_counter()

    def new_id(self) -> str:
        """A fresh 12-character random id (run ids, ids of calls the loop makes itself)."""
        return os.urandom(6).hex()


class SystemClock(Clock):
    """The default clock: the system's time and random ids."""

    __slots__ = ()


_SYSTEM = SystemClock()
_CURRENT: ContextVar[Clock] = ContextVar("convergent_clock", default=_SYSTEM)


def current_clock() -> Clock:
    """The clock of the running context (the system clock unless one was installed)."""
    return _CURRENT.get()


def now() -> float:
    """Unix time from the current clock."""
    return _CURRENT.get().now()


def readers(clock: Clock) -> tuple[Callable[[], float], Callable[[], float]]:
    """``clock``'s wall time and monotonic timer, as the quickest callables that read them.

    A clock that reads the system (whatever it does for ids) gives `time.time` and
    `time.perf_counter` themselves: a run reads them several times a cycle.
    """
    kind = type(clock)
    wall = time.time if kind.now is Clock.now else clock.now
    monotonic = time.perf_counter if kind.monotonic is Clock.monotonic else clock.monotonic
    return wall, monotonic


@contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    """Install ``clock`` for the code run inside the block (and the tasks it starts)."""
    token = _CURRENT.set(clock)
    try:
        yield clock
    finally:
        try:
            _CURRENT.reset(token)
        except ValueError:
            # a coroutine closed from another context (a workflow evicted from a
            # worker's cache): that context never saw the clock, nothing to undo
            pass
