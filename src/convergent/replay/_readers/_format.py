"""What a reader is: a format's name, what it expects, how it knows its files, how it reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent.replay._recording import Malformed, Trajectory

__all__ = ["Format", "Sample"]


@dataclass(frozen=True, slots=True)
class Sample:
    """The start of a file, decoded.

    The whole value of a JSON file, or the first line of a JSON Lines file.
    """

    value: Any
    """The decoded value."""
    lines: bool
    """Whether the file is JSON Lines (``value`` is its first line)."""


@dataclass(frozen=True, slots=True)
class Format:
    """One recording format."""

    name: str
    """The name ``--format`` takes."""
    expects: str
    """What its files look like, in a phrase (for the message about an unknown file)."""
    claims: Callable[[Path, Sample], bool]
    """Whether a file (its path and decoded start) is in this format."""
    read: Callable[[Path, Sample], Iterator[Trajectory | Malformed]]
    """The runs of one file, each either read or reported as malformed."""
