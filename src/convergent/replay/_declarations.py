"""What the user knows of their tools and results, declared for every format.

A recording rarely says which tools only read, which change state and which wait, nor
which results were the model's mistake; without that, the loop treats every tool as
one that may change state and every result as a plain one, and some loops stay
invisible. A declaration fills that in, on the command line (``--read-only``,
``--writes``, ``--waits``, ``--mistake-if``, ``--failure-if``) or in a small YAML or
JSON file (``--declare``)::

    read_only: [get_order, search]      # tools that only read
    writes: [pay, cancel]               # tools that change state
    waits: [sleep, wait_for_job]        # tools that wait: time passes while they run
    mistakes: ["^Invalid arguments"]    # results that mean the call was the model's mistake
    failures: ["^Error:"]               # results that mean the call failed

Tool names are matched exactly; results by regular expression (searched). A declaration
wins over what a reader knows (a tool declared a write is no longer a read).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent._yaml import UnusableYaml, load_yaml
from convergent.exceptions import UserError
from convergent.replay._recording import RecordedCall, RecordedReply, Trajectory

__all__ = ["Declarations", "declared", "load_declarations"]

_KEYS = ("read_only", "writes", "waits", "mistakes", "failures")
_MAX_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Declarations:
    """Tools and results as the user declares them."""

    read_only: frozenset[str] = frozenset()
    """Tools that only read."""
    writes: frozenset[str] = frozenset()
    """Tools that change state."""
    waits: frozenset[str] = frozenset()
    """Tools that wait (real time passes while they run)."""
    mistakes: tuple[re.Pattern[str], ...] = ()
    """A result one of these matches was the model's mistake."""
    failures: tuple[re.Pattern[str], ...] = ()
    """A result one of these matches was a failure."""

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in _KEYS)

    def merged(self, other: Declarations) -> Declarations:
        """These and ``other`` together."""
        return Declarations(
            self.read_only | other.read_only,
            self.writes | other.writes,
            self.waits | other.waits,
            self.mistakes + other.mistakes,
            self.failures + other.failures,
        )

    def apply(self, run: Trajectory) -> Trajectory:
        """The run with these declarations over what its reader knows."""
        if not self:
            return run
        turns = run.turns
        if self.mistakes or self.failures:
            turns = tuple(tuple(self._reply(reply) for reply in turn) for turn in turns)
        return dataclasses.replace(
            run,
            turns=turns,
            read_only=(run.read_only - self.writes - self.waits) | self.read_only,
            writes=(run.writes - self.read_only) | self.writes,
            waits=run.waits | self.waits,
        )

    def _reply(self, reply: RecordedReply) -> RecordedReply:
        calls = tuple(self._call(call) for call in reply.calls)
        return reply if calls == reply.calls else dataclasses.replace(reply, calls=calls)

    def _call(self, call: RecordedCall) -> RecordedCall:
        text = call.result
        if text is None:
            return call
        mistake = call.mistake or any(pattern.search(text) for pattern in self.mistakes)
        failed = call.failed or any(pattern.search(text) for pattern in self.failures)
        if (mistake, failed) == (call.mistake, call.failed):
            return call
        return RecordedCall(call.name, call.arguments, text, failed, mistake)


_OPTIONS = {
    "read_only": "--read-only",
    "writes": "--writes",
    "waits": "--waits",
    "mistakes": "--mistake-if",
    "failures": "--failure-if",
}


def _names(values: Iterable[str]) -> frozenset[str]:
    """Tool names given as ``a,b`` (repeatable), each stripped."""
    names = {name.strip() for value in values for name in str(value).split(",")}
    names.discard("")
    return frozenset(names)


def _patterns(label: str, values: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    found = []
    for value in values:
        try:
            found.append(re.compile(str(value)))
        except re.error as exc:
            raise UserError(f"{label} {value!r}: not a regular expression ({exc})") from None
    return tuple(found)


def _built(values: Mapping[str, Iterable[str]], labels: Mapping[str, str]) -> Declarations:
    found = Declarations(
        _names(values.get("read_only", ())),
        _names(values.get("writes", ())),
        _names(values.get("waits", ())),
        _patterns(labels["mistakes"], values.get("mistakes", ())),
        _patterns(labels["failures"], values.get("failures", ())),
    )
    both = sorted(found.read_only & found.writes)
    if both:
        raise UserError(
            f"{both[0]!r} is declared both read-only ({labels['read_only']}) and a write "
            f"({labels['writes']}); choose one"
        )
    return found


def declared(
    *,
    read_only: Iterable[str] = (),
    writes: Iterable[str] = (),
    waits: Iterable[str] = (),
    mistakes: Iterable[str] = (),
    failures: Iterable[str] = (),
) -> Declarations:
    """Declarations from the command line's values (tool names may be ``a,b``).

    Raises:
        UserError: If a pattern is not a regular expression, or a tool is declared both
            a read and a write.
    """
    values = {
        "read_only": read_only,
        "writes": writes,
        "waits": waits,
        "mistakes": mistakes,
        "failures": failures,
    }
    return _built(values, _OPTIONS)


def load_declarations(path: Path) -> Declarations:
    """Declarations from a YAML or JSON file.

    Its keys are ``read_only``, ``writes``, ``waits``, ``mistakes`` and ``failures``,
    each a list of strings.

    Raises:
        UserError: If the file cannot be read, is not YAML/JSON, or has other keys or
            values.
    """
    where = f"--declare {path}"
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            raise UserError(f"{where}: larger than 1 MiB; a declaration file lists names")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{where}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"{where}: not UTF-8 text") from None
    try:
        data: Any = load_yaml(text)  # JSON is YAML
    except UnusableYaml as exc:
        raise UserError(f"{where}: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise UserError(f"{where}: expected a mapping with keys {', '.join(_KEYS)}")
    unknown = sorted(str(key) for key in data if key not in _KEYS)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}; expected {', '.join(_KEYS)}")
    lists: dict[str, list[str]] = {}
    for key in _KEYS:
        value = data.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise UserError(f"{where}: {key} must be a list of strings")
        lists[key] = value
    try:
        return _built(lists, {key: key for key in _KEYS})
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
