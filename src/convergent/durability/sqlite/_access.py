"""What a run's journal and steering need from the run database, as a protocol.

`RunStore` provides it; the journal and the steering queue depend on this protocol
instead of on the store, so the store can build them without an import cycle.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

__all__ = ["StoreAccess"]


class StoreAccess(Protocol):
    """Writes and steering rows of one run database."""

    path: Path
    """The database file."""

    def transaction(
        self, doing: str = "write run database"
    ) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""
        ...

    def write_soon(self, write: Callable[[sqlite3.Connection], None]) -> Future[None] | None:
        """Commit ``write`` now if nothing makes it wait (None), else on the writer thread."""
        ...

    def steering_if_free(
        self, run_id: str, after: int, seen: tuple[int, int] | None
    ) -> tuple[tuple[int, int], list[tuple[int, str, str]]] | None:
        """The steering version and the run's commands above ``after``; None if busy."""
        ...
