"""The one form every reader produces: a run's turns of recorded replies, and its label.

A reader also says what it could not read or had to guess in each run (`Trajectory.gaps`,
by the kinds of `GAPS`), and reports a line it passed over (`Skipped`) or a run it lost
(`Malformed`): nothing is dropped without a word.

A turn is what the loop plays as one run: it ends at a reply that answers (text and no
tool calls). A recording whose turn goes on after such a reply (a harness's own request
before the agent's, answered in text) is split there, so that every reply is replayed.
A reply the recording does not hold, only the harness's answer to it (it refused a reply
without tool calls), is such a reply with its text unknown (`RecordedReply.unrecorded`):
it ends its turn, and the harness's answer starts the next.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from convergent.effects import Effect
from convergent.messages import Usage

__all__ = [
    "GAPS",
    "Malformed",
    "RecordedCall",
    "RecordedReply",
    "Skipped",
    "Trajectory",
    "Turn",
    "call_key",
]

GAPS = {
    "matched_by_order": "results matched to their calls by order or tool name (no call ids)",
    "results_dropped": "results that belong to no call (dropped)",
    "calls_without_result": "calls without a recorded result",
    "messages_skipped": "messages or steps that could not be read (skipped)",
    "replies_unrecorded": (
        "replies the recording does not hold (their harness refused them), each ending a turn"
    ),
}
"""What a reader could not read or had to guess in a run, by key, in words."""


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
    mistake: bool = False
    """Whether the recording marks the call as the model's mistake (a format error, a
    call its harness refused to run): the loop counts it toward ``max_mistakes``."""
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
    unrecorded: bool = False
    """Whether the recording holds only the harness's answer to this reply (it refused a
    reply without tool calls and kept no trace of it): a reply without calls, its text
    unknown, that ends its turn as an answer does."""

    @property
    def answers(self) -> bool:
        """Whether the reply ends the turn: no tool calls, and text (or text unrecorded)."""
        return not self.calls and (self.unrecorded or bool(self.content.strip()))


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
    """Tools known to change nothing (reads, pure computations): `Effect.READ`."""
    terminal: frozenset[str] = frozenset()
    """Tools that hand the conversation off (a transfer to a human)."""
    writes: frozenset[str] = frozenset()
    """Tools each call of which changes something: `Effect.WRITE`."""
    waits: frozenset[str] = frozenset()
    """Tools that wait (a sleep, a poll that blocks): real time passes while they run.
    A wait is a read unless it is declared otherwise."""
    gaps: Mapping[str, int] = field(default_factory=dict)
    """What the reader could not read or had to guess in this run: counts by the keys
    of `GAPS` (empty: nothing)."""
    unlabelled_why: str = ""
    """Why a rule given for labels could not label the run ("" when it could, or none
    was given)."""
    idempotent: frozenset[str] = frozenset()
    """Tools whose call made again changes nothing more: `Effect.IDEMPOTENT`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "turns", split_turns(self.turns))

    def effect(self, name: str) -> Effect:
        """What a call of a tool does, as the recording and the user declare it."""
        if name in self.writes:
            return Effect.WRITE
        if name in self.idempotent:
            return Effect.IDEMPOTENT
        if name in self.read_only or name in self.waits:
            return Effect.READ
        return Effect.UNDECLARED

    @property
    def replies(self) -> int:
        """Recorded replies over all turns."""
        return sum(len(turn) for turn in self.turns)

    @property
    def final_answer(self) -> str | None:
        """The text of the run's last reply when it answers (no tool calls).

        None when the run ends on tool calls, or its last reply's text was not recorded.
        """
        last = self.turns[-1][-1] if self.turns and self.turns[-1] else None
        if last is None or not last.answers or not last.content.strip():
            return None
        return last.content


def split_turns(turns: tuple[Turn, ...]) -> tuple[Turn, ...]:
    """The turns, each split after every reply that answers and is not the turn's last.

    The loop ends a run at an answer (text, no tool calls); the replies a recording has
    after one belong to the next run the loop would play. A reply without calls or text
    is not an answer (the loop asks the model to go on) and splits nothing; an unrecorded
    reply (`RecordedReply.unrecorded`) is one.
    """
    if all(_ends_well(turn) for turn in turns):
        return turns
    split: list[Turn] = []
    for turn in turns:
        start = 0
        for index, reply in enumerate(turn[:-1]):
            if reply.answers:
                split.append(turn[start : index + 1])
                start = index + 1
        split.append(turn[start:])
    return tuple(split)


def _ends_well(turn: Turn) -> bool:
    return not any(reply.answers for reply in turn[:-1])


@dataclass(frozen=True, slots=True)
class Skipped:
    """A line of a file that holds no run (a header, metadata): passed over, reported."""

    where: str
    """The file and line."""
    why: str
    """What the line is, in a few words."""

    def describe(self) -> str:
        """``where: why``."""
        return f"{self.where}: {self.why}"


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
