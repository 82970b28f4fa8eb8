"""What a call of a tool does to the world, as the tool declares it: `Effect`.

The stop rules judge a repeated call by its tool's declared effect, never by a guess
from its name or its result (``docs/loop.md``, "What a call does"):

- `Effect.READ`: changes nothing (a lookup, a search, a status, a wait). It runs and is
  judged on its result.
- `Effect.IDEMPOTENT`: may change something, but calling it again with the same
  arguments changes nothing more (setting a value, writing the same file). It runs and
  is judged on its result, like a read; its first call may change something.
- `Effect.WRITE`: each call changes something (a payment, a voucher, a booking, a
  message sent). A repeat is judged before it runs, whatever the results say: the
  repeat itself is the harm.
- `Effect.UNDECLARED`: nothing says. It runs and is judged on its result (a user's
  status poll finishes), and once the model was told it repeats, a repeat without
  time passing does not run (it may be a write).

`effect_of` reads the flags a `convergent.Tool` carries (``read_only``,
``idempotent``); `as_effect` reads what a host passes for a tool: an `Effect`, or the
older ``read_only`` flag (True, False, None); `annotated_effect` reads a tool's MCP
annotations, the one reading of them for convergent's MCP tools and every host's.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = ["Declared", "Effect", "annotated_effect", "as_effect", "effect_of"]


class Effect(StrEnum):
    """What a call of a tool does to the world, as the tool declares it."""

    READ = "read"
    """Changes nothing: runs, and is judged on its result."""
    IDEMPOTENT = "idempotent"
    """May change something; the same call again changes nothing more."""
    WRITE = "write"
    """Each call changes something: a repeat is judged before it runs."""
    UNDECLARED = "undeclared"
    """Nothing declares it: runs and is judged on its result; after a note, a repeat
    without time passing does not run."""


def effect_of(read_only: bool | None, idempotent: bool = False) -> Effect:
    """A tool's effect from its flags.

    Args:
        read_only: True: it only reads; False: it changes something; None: unknown.
        idempotent: Calling it again with the same arguments has no further effect.
    """
    if read_only:
        return Effect.READ
    if idempotent:
        return Effect.IDEMPOTENT
    return Effect.WRITE if read_only is False else Effect.UNDECLARED


Declared = Effect | bool | None
"""What a host may pass for a tool: an `Effect`, or the older ``read_only`` flag."""


def as_effect(declared: Declared) -> Effect:
    """An `Effect`, from an `Effect` or the older ``read_only`` flag (True, False, None)."""
    if isinstance(declared, Effect):
        return declared
    return effect_of(declared)


_HINTS = {
    "read_only": ("read_only_hint", "readOnlyHint"),
    "idempotent": ("idempotent_hint", "idempotentHint"),
    "destructive": ("destructive_hint", "destructiveHint"),
}
"""Each MCP hint under the names it goes by: the MCP SDK's attribute, the protocol's key."""


def _hint(annotations: object, hint: str) -> bool | None:
    for name in _HINTS[hint]:
        value = (
            annotations.get(name)
            if isinstance(annotations, Mapping)
            else getattr(annotations, name, None)
        )
        if isinstance(value, bool):
            return value
    return None


def annotated_effect(annotations: object) -> Effect:
    """A tool's effect from its MCP annotations.

    ``annotations`` is the MCP SDK's ``ToolAnnotations`` (or any object with its
    attributes), or a mapping with the protocol's keys (``readOnlyHint``...) or the
    SDK's (``read_only_hint``...); None: the tool has none.

    ``readOnlyHint`` says whether the tool only reads. ``idempotentHint`` and
    ``destructiveHint`` mean something only for a tool that is not read-only, so a
    server that sets either without ``readOnlyHint`` declares a change; with
    ``idempotentHint`` true, a repeat has no further effect. ``destructiveHint`` says
    how bad one call is, not whether a repeat adds anything: it changes no count. With
    no hint at all the tool is undeclared (MCP's own defaults are hints, not
    declarations).
    """
    if annotations is None:
        return Effect.UNDECLARED
    read_only = _hint(annotations, "read_only")
    idempotent = _hint(annotations, "idempotent")
    if read_only is None and (
        idempotent is not None or _hint(annotations, "destructive") is not None
    ):
        read_only = False
    return effect_of(read_only, bool(idempotent))
