"""What the readers share: loading JSON and JSON Lines, and building turns from messages.

A reader meets a conversation as a list of messages: user messages start a turn,
assistant messages carry tool calls, and tool messages carry results. `TurnBuilder`
puts each result with its call. Call ids are not unique in every recording (GPT-4o
reuses them within a run), so a result goes to the call of the same id in the nearest
preceding assistant message, never to one found anywhere in the run.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from convergent.exceptions import UserError
from convergent.messages import Usage
from convergent.replay._recording import RecordedCall, RecordedReply, Turn

__all__ = [
    "READ_ERRORS",
    "FormatMismatch",
    "TurnBuilder",
    "as_arguments",
    "as_text",
    "jsonl_objects",
    "load_json",
    "reward_label",
    "usage_of",
]


class FormatMismatch(UserError):
    """A file or run that does not fit the format being read; the message says why."""


READ_ERRORS = (FormatMismatch, KeyError, TypeError, ValueError, AttributeError, IndexError)
"""What reading a run that does not fit its format raises: the run is reported, skipped."""


_decoder = msgspec.json.Decoder()


def load_json(path: Path) -> Any:
    """The JSON value of a whole file.

    Raises:
        FormatMismatch: If the file cannot be read or is not JSON.
    """
    try:
        return _decoder.decode(path.read_bytes())
    except OSError as exc:
        raise FormatMismatch(f"cannot be read ({exc.strerror})") from None
    except msgspec.DecodeError as exc:
        raise FormatMismatch(f"not JSON ({exc})") from None


def jsonl_objects(path: Path) -> Iterator[tuple[int, Any]]:
    """Each non-empty line of a JSON Lines file, decoded, with its line number (from 1).

    A line that is not JSON is yielded as a `FormatMismatch` value, so that one bad line
    is reported and skipped without losing the rest of the file.
    """
    try:
        with path.open("rb") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    yield number, _decoder.decode(line)
                except msgspec.DecodeError as exc:
                    yield number, FormatMismatch(f"line {number} is not JSON ({exc})")
    except OSError as exc:
        raise FormatMismatch(f"cannot be read ({exc.strerror})") from None


def as_arguments(raw: Any) -> Mapping[str, Any]:
    """A call's arguments as a mapping: JSON text is decoded, anything else wrapped."""
    if isinstance(raw, Mapping):
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            decoded = _decoder.decode(raw)
        except msgspec.DecodeError:
            decoded = _python_literal(raw)
        return decoded if isinstance(decoded, dict) else {"input": decoded}
    return {"input": raw}


def _python_literal(text: str) -> Any:
    """A dict some recordings write in Python's notation (single quotes), else the text.

    Only a dict that JSON can hold is taken: ``{'ignition'}`` is a set to Python, and
    arguments must be JSON like any model's.
    """
    if not text.lstrip().startswith("{"):
        return text
    try:
        value = ast.literal_eval(text)
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text
    return value if isinstance(value, dict) else text


def as_text(raw: Any) -> str:
    """A result or a message content as text.

    Strings stay as they are, text blocks are joined, anything else is compact JSON.
    """
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list) and all(
        isinstance(block, dict) and block.get("type") == "text" for block in raw
    ):
        return "\n".join(str(block.get("text", "")) for block in raw)
    return json.dumps(raw, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def reward_label(reward: Any) -> bool:
    """A benchmark reward as a success label: 1 (within rounding) is success.

    Raises:
        FormatMismatch: If the reward is not a number.
    """
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise FormatMismatch(f"a reward must be a number, got {reward!r}")
    return reward >= 1 - 1e-6


def usage_of(input_tokens: Any = None, output_tokens: Any = None, cost: Any = None) -> Usage | None:
    """A recorded request's usage, or None when the recording has no figures."""
    numbers = [value for value in (input_tokens, output_tokens, cost) if value is not None]
    if not numbers:
        return None
    try:
        return Usage(
            input_tokens=int(input_tokens or 0),
            output_tokens=int(output_tokens or 0),
            requests=1,
            cost=float(cost or 0.0),
        )
    except (TypeError, ValueError):
        return None


@dataclass
class _Reply:
    content: str
    names: list[str]
    arguments: list[Mapping[str, Any]]
    ids: list[str | None]
    results: list[tuple[str, bool] | None]
    usage: Usage | None

    def freeze(self) -> RecordedReply:
        calls = tuple(
            RecordedCall(name, arguments, *(result or (None, False)))
            for name, arguments, result in zip(
                self.names, self.arguments, self.results, strict=True
            )
        )
        return RecordedReply(self.content, calls, self.usage)


@dataclass
class TurnBuilder:
    """Builds turns from a conversation's messages, in order."""

    _turns: list[list[_Reply]] = field(default_factory=list)
    _turn: list[_Reply] = field(default_factory=list)
    _replies: list[_Reply] = field(default_factory=list)

    def user(self) -> None:
        """A user message: the turn so far ends (an empty turn is dropped)."""
        if self._turn:
            self._turns.append(self._turn)
        self._turn = []

    def assistant(
        self,
        content: str,
        calls: Sequence[tuple[str | None, str, Mapping[str, Any]]] = (),
        usage: Usage | None = None,
    ) -> None:
        """An assistant message with its calls, each as ``(id, name, arguments)``."""
        reply = _Reply(
            content=content,
            names=[name for _, name, _ in calls],
            arguments=[arguments for _, _, arguments in calls],
            ids=[call_id for call_id, _, _ in calls],
            results=[None] * len(calls),
            usage=usage,
        )
        self._turn.append(reply)
        self._replies.append(reply)

    def result(self, call_id: str | None, text: str, failed: bool = False) -> bool:
        """Put a call's result with the call of that id in the nearest preceding reply.

        Within that reply it goes to the first call of the id without a result yet (for
        ids repeated in one message). Returns whether a call was found.
        """
        for reply in reversed(self._replies):
            if call_id not in reply.ids:
                continue
            slots = [i for i, found in enumerate(reply.ids) if found == call_id]
            free = [i for i in slots if reply.results[i] is None]
            reply.results[(free or slots)[0]] = (text, failed)
            return True
        return False

    def result_by_name(self, name: str, text: str, failed: bool = False) -> bool:
        """Put a result with the first call of ``name`` that has none, latest reply first.

        For recordings that name the tool but not the call. Returns whether one was found.
        """
        for reply in reversed(self._replies):
            free = [
                i
                for i, (found, result) in enumerate(zip(reply.names, reply.results, strict=True))
                if found == name and result is None
            ]
            if free:
                reply.results[free[0]] = (text, failed)
                return True
        return False

    def result_of_last_call(self, text: str, failed: bool = False) -> bool:
        """The result of the latest call made (for recordings that carry no call ids)."""
        for reply in reversed(self._replies):
            if reply.names:
                free = [i for i, found in enumerate(reply.results) if found is None]
                if not free:
                    return False
                reply.results[free[0]] = (text, failed)
                return True
        return False

    def turns(self) -> tuple[Turn, ...]:
        """Every non-empty turn, frozen."""
        self.user()
        return tuple(tuple(reply.freeze() for reply in turn) for turn in self._turns)
