"""What the user knows of their tools and results, declared for every format.

A recording rarely says what each tool does to the world, which tools wait, nor which
results were the model's mistake; without that, every tool is one nothing declares, and
some loops stay invisible. A declaration fills that in with the words of
`convergent.Effect` (``docs/loop.md``, "What a call does"), on the command line
(``--reads``, ``--idempotent``, ``--writes``, ``--waits``, ``--mistake-if``,
``--failure-if``) or in a small YAML or JSON file (``--declare``)::

    reads: [get_order, search]          # change nothing: judged on their results
    idempotent: [set_address]           # the same call again changes nothing more
    writes: [pay, cancel]               # each call changes something: judged before it runs
    waits: [sleep, wait_for_job]        # time passes while they run (a wait is a read)
    mistakes: ["^Invalid arguments"]    # results that mean the call was the model's mistake
    failures: ["^Error:"]               # results that mean the call failed

``read_only`` (``--read-only``), the flag's name in ``@tool``, is accepted for ``reads``.
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
from convergent.effects import Effect
from convergent.exceptions import UserError
from convergent.replay._recording import RecordedCall, RecordedReply, Trajectory

__all__ = ["Declarations", "declared", "load_declarations"]

_KEYS = ("reads", "idempotent", "writes", "waits", "mistakes", "failures")
_EFFECTS = ("reads", "idempotent", "writes")
_ALIASES = {"read_only": "reads"}
"""Older spellings of a key: ``read_only`` is the flag's name in ``@tool``."""
_MAX_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Declarations:
    """Tools and results as the user declares them."""

    reads: frozenset[str] = frozenset()
    """Tools that change nothing (`Effect.READ`)."""
    idempotent: frozenset[str] = frozenset()
    """Tools whose call made again changes nothing more (`Effect.IDEMPOTENT`)."""
    writes: frozenset[str] = frozenset()
    """Tools each call of which changes something (`Effect.WRITE`)."""
    waits: frozenset[str] = frozenset()
    """Tools that wait (real time passes while they run); reads unless declared otherwise."""
    mistakes: tuple[re.Pattern[str], ...] = ()
    """A result one of these matches was the model's mistake."""
    failures: tuple[re.Pattern[str], ...] = ()
    """A result one of these matches was a failure."""

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in _KEYS)

    def effect(self, name: str) -> Effect | None:
        """The effect declared for a tool (None: these declarations say nothing of it)."""
        if name in self.writes:
            return Effect.WRITE
        if name in self.idempotent:
            return Effect.IDEMPOTENT
        if name in self.reads or name in self.waits:
            return Effect.READ
        return None

    def merged(self, other: Declarations) -> Declarations:
        """These and ``other`` together.

        Raises:
            UserError: If a tool gets two effects.
        """
        both = Declarations(
            self.reads | other.reads,
            self.idempotent | other.idempotent,
            self.writes | other.writes,
            self.waits | other.waits,
            self.mistakes + other.mistakes,
            self.failures + other.failures,
        )
        _one_effect(both, {key: key for key in _KEYS})
        return both

    def apply(self, run: Trajectory) -> Trajectory:
        """The run with these declarations over what its reader knows."""
        if not self:
            return run
        turns = run.turns
        if self.mistakes or self.failures:
            turns = tuple(tuple(self._reply(reply) for reply in turn) for turn in turns)
        declared = self.reads | self.idempotent | self.writes
        return dataclasses.replace(
            run,
            turns=turns,
            read_only=(run.read_only - declared) | self.reads,
            idempotent=(run.idempotent - declared) | self.idempotent,
            writes=(run.writes - declared) | self.writes,
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
    "reads": "--reads",
    "idempotent": "--idempotent",
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


def _one_effect(found: Declarations, labels: Mapping[str, str]) -> None:
    """Refuse a tool declared with two effects, in one line naming both."""
    for index, first in enumerate(_EFFECTS):
        for second in _EFFECTS[index + 1 :]:
            both = sorted(getattr(found, first) & getattr(found, second))
            if both:
                raise UserError(
                    f"{both[0]!r} is declared both {first} ({labels[first]}) and {second} "
                    f"({labels[second]}); choose one"
                )


def _built(values: Mapping[str, Iterable[str]], labels: Mapping[str, str]) -> Declarations:
    found = Declarations(
        _names(values.get("reads", ())),
        _names(values.get("idempotent", ())),
        _names(values.get("writes", ())),
        _names(values.get("waits", ())),
        _patterns(labels["mistakes"], values.get("mistakes", ())),
        _patterns(labels["failures"], values.get("failures", ())),
    )
    _one_effect(found, labels)
    return found


def declared(
    *,
    reads: Iterable[str] = (),
    idempotent: Iterable[str] = (),
    writes: Iterable[str] = (),
    waits: Iterable[str] = (),
    mistakes: Iterable[str] = (),
    failures: Iterable[str] = (),
) -> Declarations:
    """Declarations from the command line's values (tool names may be ``a,b``).

    Raises:
        UserError: If a pattern is not a regular expression, or a tool is declared with
            two effects (a read and a write, say).
    """
    values = {
        "reads": reads,
        "idempotent": idempotent,
        "writes": writes,
        "waits": waits,
        "mistakes": mistakes,
        "failures": failures,
    }
    return _built(values, _OPTIONS)


def load_declarations(path: Path) -> Declarations:
    """Declarations from a YAML or JSON file.

    Its keys are ``reads`` (or ``read_only``), ``idempotent``, ``writes``, ``waits``,
    ``mistakes`` and ``failures``, each a list of strings (or one string).

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
    try:
        return _built(_lists(data), {key: key for key in _KEYS})
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def _lists(data: Mapping[Any, Any]) -> dict[str, list[str]]:
    """Each key of a declaration file (its older spelling read as the key) and its list."""
    lists: dict[str, list[str]] = {}
    for raw, value in data.items():
        key = _ALIASES.get(str(raw), str(raw))
        if key not in _KEYS:
            raise UserError(f"unknown key {str(raw)!r}; expected {', '.join(_KEYS)}")
        if key in lists:
            raise UserError(f"{key} is given twice (as {key} and read_only)")
        value = value or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise UserError(f"{raw} must be a list of strings")
        lists[key] = value
    return lists
