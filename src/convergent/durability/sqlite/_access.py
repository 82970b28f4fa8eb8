"""What a run's journal and steering need from the run database, as a protocol.

`RunStore` provides it; the journal and the steering queue depend on this protocol
instead of on the store, so the store can build them without an import cycle.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, TypeVar

__all__ = ["StoreAccess"]

T = TypeVar("T")


class StoreAccess(Protocol):
    """Writes and steering rows of one run database."""

    path: Path
    """The database file."""

    def transaction(
        self, doing: str = "write run database"
    ) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction."""
        ...

    def write_if_free(self, write: Callable[[sqlite3.Connection], None]) -> bool:
        """Commit ``write`` now if nothing makes it wait; False if nothing was done."""
        ...

    def in_writer(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the database's writer thread, after the work submitted before."""
        ...

    def steering_version(self) -> tuple[int, int]:
        """Changes whenever a steering command may have been stored."""
        ...

    def stored_steering(self, run_id: str, after: int) -> list[tuple[int, str, str]]:
        """Unconsumed steering commands of a run with ids above ``after``."""
        ...

    def steering_if_free(
        self, run_id: str, after: int, seen: tuple[int, int] | None
    ) -> tuple[tuple[int, int], list[tuple[int, str, str]]] | None:
        """The steering version and the run's commands above ``after``; None if busy."""
        ...

    def consume_steering(self, ids: Iterable[int]) -> None:
        """Mark stored steering commands as consumed."""
        ...
