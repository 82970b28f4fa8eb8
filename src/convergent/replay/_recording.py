"""The one form every reader produces: a run's turns of recorded replies, and its label."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from convergent.messages import Usage

__all__ = ["Malformed", "RecordedCall", "RecordedReply", "Trajectory", "Turn", "call_key"]


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One tool call the recorded model made, with the result it got."""

    name: str
    """The tool's name."""
    arguments: Mapping[str, Any]
    """The arguments as recorded."""
    result: str | None
    """The tool's recorded result (None when the recording has none)."""
    failed: bool = False
    """Whether the recording marks the result as a failure."""
    key: str = field(init=False, repr=False, compare=False)
    """The same call: the same name and the same arguments, key order ignored."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", call_key(self.name, self.arguments))


@dataclass(frozen=True, slots=True)
class RecordedReply:
    """One assistant message: its text and the tool calls it asked for, in order."""

    content: str
    """The message's text."""
    calls: tuple[RecordedCall, ...] = ()
    """The tool calls of the message, in order (empty for a plain answer)."""
    usage: Usage | None = None
    """Tokens and cost of the request that produced it, where the recording has them."""


Turn = tuple[RecordedReply, ...]
"""The agent's replies from one user message to the next."""


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One recorded run of an agent, with its success label where one is known."""

    id: str
    """Where to find the run again: file and position, and the run's own name."""
    name: str
    """The run's own name in its recording (a task, session, trace or instance id), which
    a ``--success`` map may use."""
    source: str
    """The file (or folder) the run came from."""
    model: str
    """The agent's model, as the recording names it ("" when it does not)."""
    success: bool | None
    """Whether the run succeeded (a benchmark's reward, or a label given); None: unknown."""
    turns: tuple[Turn, ...]
    """The agent's turns, in order."""
    read_only: frozenset[str] = frozenset()
    """Tools known to change nothing (reads, pure computations)."""
    terminal: frozenset[str] = frozenset()
    """Tools that hand the conversation off (a transfer to a human)."""

    @property
    def replies(self) -> int:
        """Recorded replies over all turns."""
        return sum(len(turn) for turn in self.turns)


@dataclass(frozen=True, slots=True)
class Malformed:
    """A run (or a file) that could not be read: reported and skipped, never replayed."""

    where: str
    """The file, and the run within it where known."""
    why: str
    """What did not fit, in a line."""

    def describe(self) -> str:
        """``where: why``."""
        return f"{self.where}: {self.why}"


_encoder = msgspec.json.Encoder(order="sorted")


def call_key(name: str, arguments: Mapping[str, Any]) -> str:
    """A stable key for a call: the name and the arguments with sorted keys."""
    try:
        encoded = _encoder.encode(arguments).decode()
    except (TypeError, ValueError, OverflowError):  # values JSON cannot hold: as text
        encoded = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return name + "\x00" + encoded
