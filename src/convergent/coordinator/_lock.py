"""The state file's lock: an exclusive lock on ``<state>.lock`` between processes and threads.

Every hook call takes it, so it costs no import of note: ``fcntl.flock`` where the
platform has it (the lock is released when the process ends, however it ends), and the
``filelock`` package elsewhere, imported only there.
"""

from __future__ import annotations

import os
import threading
import time
from types import TracebackType

__all__ = ["StateLock"]

_POLL = 0.01
"""Seconds between two tries of a lock another process holds."""


class StateLock:
    """A reentrant exclusive lock on a lock file, for processes and the threads of one.

    Args:
        path: The lock file (created if missing; a symbolic link is refused).
        timeout: Seconds to wait for another holder before a `TimeoutError`.
    """

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._thread = threading.RLock()
        self._depth = 0
        self._fd: int | None = None
        self._portable: object = None

    def __enter__(self) -> StateLock:
        deadline = time.monotonic() + self.timeout
        if not self._thread.acquire(timeout=max(self.timeout, 0)):
            raise TimeoutError(self.path)
        try:
            if self._depth == 0:
                self._take(deadline)
        except BaseException:
            self._thread.release()
            raise
        self._depth += 1
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._depth -= 1
        try:
            if self._depth == 0:
                self._give_back()
        finally:
            self._thread.release()

    def _take(self, deadline: float) -> None:
        try:
            import fcntl
        except ImportError:  # not POSIX: the portable lock
            self._take_portable(deadline)
            return
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path, flags, 0o644)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise TimeoutError(self.path) from None
                time.sleep(_POLL)
            else:
                self._fd = fd
                return

    def _take_portable(self, deadline: float) -> None:
        from filelock import FileLock, Timeout

        lock = FileLock(self.path, timeout=max(deadline - time.monotonic(), 0))
        try:
            lock.acquire()
        except Timeout:
            raise TimeoutError(self.path) from None
        self._portable = lock

    def _give_back(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the flock
        elif self._portable is not None:
            lock, self._portable = self._portable, None
            lock.release()  # type: ignore[attr-defined]
