"""Moving the write-ahead log into the database file off the run's critical path.

In WAL mode SQLite copies the log back into the database (a checkpoint) once it holds
1,000 pages, inside whichever commit crosses that size, and syncs the file: a pause of
several milliseconds in the middle of a run, every few hundred cycles. A
`WalCheckpointer` does that work on its own thread and connection instead, shortly
after commits, so the run's commits stay short. SQLite's automatic checkpoint stays on
as a safety net at a larger size, for when the thread falls behind.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

__all__ = ["SAFETY_NET_PAGES", "WalCheckpointer"]

SAFETY_NET_PAGES = 20_000
"""WAL size (pages) at which a commit checkpoints by itself after all."""


class WalCheckpointer:
    """A daemon thread that checkpoints a database's WAL after commits.

    Args:
        path: The database file.
        delay: Seconds to wait after a commit before checkpointing (commits in between
            are folded into one checkpoint).
    """

    def __init__(self, path: Path, *, delay: float = 0.2) -> None:
        self.path = path
        self.delay = delay
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="convergent-wal", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """Note a commit: a checkpoint follows shortly."""
        if not self._wake.is_set():  # set already: the coming checkpoint takes this commit
            self._wake.set()

    def close(self) -> None:
        """Checkpoint once more and stop the thread."""
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout=10.0)

    def _loop(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        except sqlite3.Error:
            return
        try:
            while not self._closed.is_set():
                self._wake.wait()
                self._closed.wait(self.delay)
                self._wake.clear()
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error:
                    continue  # busy or gone: the next commit tries again
        finally:
            conn.close()
