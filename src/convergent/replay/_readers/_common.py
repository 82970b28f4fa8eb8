"""What the readers share: loading JSON and JSON Lines, and building turns from messages.

A reader meets a conversation as a list of messages: user messages start a turn,
assistant messages carry tool calls, and tool messages carry results. `TurnBuilder`
puts each result with its call. Call ids are not unique in every recording (GPT-4o
reuses them within a run), so a result goes to the call of the same id in the nearest
preceding assistant message, never to one found anywhere in the run; a result without
an id is matched by order, and counted as a guess.

Every reader is bounded: a JSON file over `MAX_FILE_BYTES` is not read whole, a JSON
Lines line over `MAX_LINE_BYTES` is skipped, a document nested deeper than the decoder
follows is refused, arguments nest at most `MAX_DEPTH` levels, and no step takes time
beyond linear in its input (Python-notation arguments are parsed only when short).
A run that breaks a bound is reported and skipped; the other runs are read.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from convergent.exceptions import UserError
from convergent.messages import Usage
from convergent.replay._recording import RecordedCall, RecordedReply, Turn

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "READ_ERRORS",
    "FormatMismatch",
    "TurnBuilder",
    "as_arguments",
    "as_text",
    "decode",
    "first_lines",
    "jsonl_objects",
    "load_json",
    "reward_label",
    "usage_of",
]


class FormatMismatch(UserError):
    """A file or run that does not fit the format being read; the message says why."""


READ_ERRORS = (
    FormatMismatch,
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    RecursionError,
)
"""What reading a run that does not fit its format raises: the run is reported, skipped."""

MAX_FILE_BYTES = 2 * 1024**3
"""Largest JSON file read whole (JSON Lines files are read a line at a time)."""
MAX_LINE_BYTES = 256 * 1024**2
"""Longest line of a JSON Lines file read; a longer one is skipped and reported."""
MAX_DEPTH = 100
"""Deepest nesting of a call's arguments (recorded models nest a few levels)."""
MAX_LITERAL_CHARS = 65_536
"""Longest text of arguments tried as a Python literal (its parser is slow and greedy)."""

_decoder = msgspec.json.Decoder()


def decode(data: bytes) -> Any:
    """The JSON value of ``data``.

    Raises:
        FormatMismatch: If it is not JSON, or nests deeper than the decoder can follow.
    """
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise FormatMismatch(f"not JSON ({exc})") from None
    except RecursionError:
        raise FormatMismatch("nested too deeply to read") from None


def load_json(path: Path) -> Any:
    """The JSON value of a whole file.

    Raises:
        FormatMismatch: If the file cannot be read, is too large, or is not JSON.
    """
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise FormatMismatch(
                f"{size / 1024**3:.1f} GiB: a JSON file over {MAX_FILE_BYTES // 1024**3} GiB "
                "is not read whole (write it as JSON Lines)"
            )
        return decode(path.read_bytes())
    except OSError as exc:
        raise FormatMismatch(f"cannot be read ({exc.strerror})") from None
    except MemoryError:
        raise FormatMismatch("too large to read in this memory") from None


def _lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """Each line of a file with its number; None for a line over `MAX_LINE_BYTES`."""
    with path.open("rb") as file:
        number = 0
        while True:
            line = file.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            number += 1
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                while (rest := file.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass  # the rest of the long line, passed over a piece at a time
                yield number, None
                continue
            yield number, line


def jsonl_objects(path: Path) -> Iterator[tuple[int, Any]]:
    """Each non-empty line of a JSON Lines file, decoded, with its line number (from 1).

    A line that is not JSON (or too long, or nested too deeply) is yielded as a
    `FormatMismatch` value, so that one bad line is reported and skipped without
    losing the rest of the file.
    """
    try:
        for number, line in _lines(path):
            if line is None:
                limit = MAX_LINE_BYTES // 1024**2
                yield number, FormatMismatch(f"line {number} is longer than {limit} MiB")
            elif line.strip():
                try:
                    yield number, decode(line)
                except FormatMismatch as exc:
                    yield number, FormatMismatch(f"line {number} is {exc}")
    except OSError as exc:
        raise FormatMismatch(f"cannot be read ({exc.strerror})") from None


def first_lines(path: Path, count: int) -> list[Any]:
    """The first ``count`` non-empty lines of a JSON Lines file, decoded.

    Raises:
        FormatMismatch: If the file cannot be read, or its first line is not JSON.
    """
    found: list[Any] = []
    for number, value in jsonl_objects(path):
        if isinstance(value, FormatMismatch):
            if not found:
                raise FormatMismatch(f"neither JSON nor JSON Lines ({value})")
            break
        found.append(value)
        if len(found) >= count or number > 4 * count:
            break
    if not found:
        raise FormatMismatch("empty")
    return found


def _too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (walked without recursion)."""
    if not isinstance(value, dict | list):
        return False
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def as_arguments(raw: Any) -> Mapping[str, Any]:
    """A call's arguments as a mapping: JSON text is decoded, anything else wrapped.

    Raises:
        FormatMismatch: If the arguments nest deeper than `MAX_DEPTH`.
    """
    if isinstance(raw, Mapping):
        found: Mapping[str, Any] = raw
    elif raw is None or raw == "":
        return {}
    elif isinstance(raw, str):
        try:
            decoded = _decoder.decode(raw)
        except msgspec.DecodeError:
            decoded = _python_literal(raw)
        except RecursionError:
            raise FormatMismatch("a call's arguments nest too deeply") from None
        found = decoded if isinstance(decoded, dict) else {"input": decoded}
    else:
        found = {"input": raw}
    if _too_deep(dict(found)):
        raise FormatMismatch(f"a call's arguments nest deeper than {MAX_DEPTH} levels")
    return found


def _python_literal(text: str) -> Any:
    """A dict some recordings write in Python's notation (single quotes), else the text.

    Only a dict that JSON can hold is taken: ``{'ignition'}`` is a set to Python, and
    arguments must be JSON like any model's. Text longer than `MAX_LITERAL_CHARS` stays
    text: Python's parser takes time and memory far beyond the text's size.
    """
    if not text.lstrip().startswith("{") or len(text) > MAX_LITERAL_CHARS:
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

    Raises:
        FormatMismatch: If the value nests too deeply to write as JSON.
    """
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list) and all(
        isinstance(block, dict) and block.get("type") == "text" for block in raw
    ):
        return "\n".join(str(block.get("text", "")) for block in raw)
    try:
        return json.dumps(
            raw, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str
        )
    except RecursionError:
        raise FormatMismatch("a message nests too deeply") from None
    except TypeError:  # keys JSON cannot sort (mixed types): in their own order
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"), default=str)


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
    results: list[tuple[str, bool, bool] | None]
    usage: Usage | None
    unrecorded: bool = False

    def free(self) -> list[int]:
        return [index for index, found in enumerate(self.results) if found is None]

    def freeze(self, gaps: Counter[str]) -> RecordedReply:
        calls = []
        for name, arguments, result in zip(self.names, self.arguments, self.results, strict=True):
            if result is None:
                gaps["calls_without_result"] += 1
                calls.append(RecordedCall(name, arguments, None))
            else:
                calls.append(RecordedCall(name, arguments, *result))
        return RecordedReply(self.content, tuple(calls), self.usage, self.unrecorded)


@dataclass
class TurnBuilder:
    """Builds turns from a conversation's messages, in order, counting what it guessed.

    `gaps` counts, by the keys of `convergent.replay.GAPS`, the results matched to a
    call without its id, the results no call could take, and (once `turns` is called)
    the calls left without a result.
    """

    gaps: Counter[str] = field(default_factory=Counter)
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

    def unrecorded_reply(self) -> None:
        """A reply the recording does not hold, only its harness's answer to it.

        The harness refused it for having no tool call: a reply without calls, its text
        unknown, that ends the turn (counted as ``replies_unrecorded``); the harness's
        answer starts the next turn, as a user message does.
        """
        self._turn.append(_Reply("", [], [], [], [], None, unrecorded=True))
        self.gaps["replies_unrecorded"] += 1
        self.user()

    def result(
        self,
        call_id: str | None,
        text: str,
        failed: bool = False,
        *,
        name: str | None = None,
        mistake: bool = False,
    ) -> bool:
        """Put a call's result with its call; returns whether one took it.

        By id: the call of that id in the nearest preceding reply (within it, the first
        of the id without a result yet, for ids repeated in one message). Without an id,
        or with one no call has, the result is matched in the latest reply with calls:
        to its first call of ``name`` without a result, else to its first call without
        one (results come in the order of their calls); such a match is counted
        (``matched_by_order``), and a result no call can take is counted as dropped.
        """
        entry = (text, failed, mistake)
        if call_id is not None:
            for reply in reversed(self._replies):
                if call_id not in reply.ids:
                    continue
                slots = [i for i, found in enumerate(reply.ids) if found == call_id]
                free = [i for i in slots if reply.results[i] is None]
                if not free:  # a second result for the call: the later one is kept
                    self.gaps["results_dropped"] += 1
                reply.results[(free or slots)[0]] = entry
                return True
        latest = next((reply for reply in reversed(self._replies) if reply.names), None)
        free = latest.free() if latest is not None else []
        if latest is None or not free:
            self.gaps["results_dropped"] += 1
            return False
        named = [i for i in free if latest.names[i] == name]
        latest.results[(named or free)[0]] = entry
        self.gaps["matched_by_order"] += 1
        return True

    def pending_call(self) -> Mapping[str, Any] | None:
        """The arguments of the latest call made when it has no result yet, else None."""
        latest = next((reply for reply in reversed(self._replies) if reply.names), None)
        if latest is None or latest.results[-1] is not None:
            return None
        return latest.arguments[-1]

    def own_result(
        self, position: int, text: str, failed: bool = False, mistake: bool = False
    ) -> None:
        """The result of the latest reply's call at ``position``, recorded with the call."""
        self._replies[-1].results[position] = (text, failed, mistake)

    def result_by_name(self, name: str, text: str, failed: bool = False) -> bool:
        """Put a result with the first call of ``name`` that has none, latest reply first.

        For recordings that name the tool but not the call, by their design (not
        counted as a guess). Returns whether one was found.
        """
        for reply in reversed(self._replies):
            free = [i for i in reply.free() if reply.names[i] == name]
            if free:
                reply.results[free[0]] = (text, failed, False)
                return True
        self.gaps["results_dropped"] += 1
        return False

    def result_of_last_call(self, text: str, failed: bool = False, mistake: bool = False) -> bool:
        """The result of the latest call made (not counted as a guess).

        For recordings that pair each step's call with the observation after it by
        their design.
        """
        for reply in reversed(self._replies):
            if reply.names:
                free = reply.free()
                if not free:
                    break
                reply.results[free[0]] = (text, failed, mistake)
                return True
        self.gaps["results_dropped"] += 1
        return False

    def turns(self) -> tuple[Turn, ...]:
        """Every non-empty turn, frozen (calls left without a result are counted)."""
        self.user()
        turns = tuple(tuple(reply.freeze(self.gaps) for reply in turn) for turn in self._turns)
        self._turns = []
        return turns
