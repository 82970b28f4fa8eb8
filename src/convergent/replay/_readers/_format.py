"""What a reader is: a format's name, what it expects, how it knows its files, how it reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent.replay._recording import Malformed, Skipped, Trajectory

__all__ = ["Format", "Sample"]


@dataclass(frozen=True, slots=True)
class Sample:
    """The start of a file, decoded.

    The whole value of a JSON file, or the first lines of a JSON Lines file.
    """

    value: Any
    """The decoded value (of a JSON Lines file: its first line)."""
    lines: bool
    """Whether the file is JSON Lines."""
    head: tuple[Any, ...] = ()
    """A JSON Lines file's first few lines (a header line may come before the runs)."""


@dataclass(frozen=True, slots=True)
class Format:
    """One recording format."""

    name: str
    """The name ``--format`` takes."""
    expects: str
    """What its files look like, in a phrase (for the message about an unknown file)."""
    claims: Callable[[Path, Sample], bool]
    """Whether a file (its path and decoded start) is in this format."""
    read: Callable[[Path, Sample], Iterator[Trajectory | Malformed | Skipped]]
    """The runs of one file, each read or reported as malformed, and the lines passed
    over."""
