"""The common form every corpus reader produces: turns of recorded replies and a label."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One tool call the recorded model made, with the result it got."""

    name: str
    """The tool's name."""
    arguments: Mapping[str, Any]
    """The arguments as recorded."""
    result: str | None
    """The tool's recorded result (None when the recording has none)."""
    failed: bool
    """Whether the recording marks the result as a failure (an error result)."""

    @property
    def key(self) -> str:
        """The same call: same name and the same arguments, key order ignored."""
        return call_key(self.name, self.arguments)


@dataclass(frozen=True, slots=True)
class RecordedReply:
    """One assistant message: its text and the tool calls it asked for, in order."""

    content: str
    """The message's text."""
    calls: tuple[RecordedCall, ...]
    """The tool calls of the message, in order (empty for a plain answer)."""


Turn = tuple[RecordedReply, ...]
"""The agent's replies from one user message to the next."""


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One recorded run of an agent on one task, with its success label."""

    id: str
    """Where to find the run again: file, position and task, as the reader words it."""
    corpus: str
    """The corpus (file or folder) the run came from."""
    model: str
    """The agent's model, as the recording names it."""
    success: bool
    """Whether the benchmark judged the run successful."""
    turns: tuple[Turn, ...]
    """The agent's turns, in order."""
    read_only: frozenset[str]
    """Tools known to change nothing (reads, pure computations)."""
    terminal: frozenset[str]
    """Tools that hand the conversation off (a transfer to a human)."""

    @property
    def replies(self) -> int:
        """Recorded replies over all turns."""
        return sum(len(turn) for turn in self.turns)


def call_key(name: str, arguments: Mapping[str, Any]) -> str:
    """A stable key for a call: the name and the arguments with sorted keys."""
    return name + "\x00" + json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
