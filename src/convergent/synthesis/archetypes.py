"""The perspectives a synthesis asks for: five default archetypes, or your own.

An archetype is a name and a stance. The name doubles as the insight id stem
(``{name}_insight``) used by theme grouping, so it must be a short lowercase identifier.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from convergent.exceptions import UserError

__all__ = [
    "DEFAULT_ARCHETYPES",
    "Archetype",
    "parse_archetypes",
    "resolve_archetypes",
    "validate_archetype_name",
]

_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


def validate_archetype_name(name: str) -> str:
    """Return ``name`` normalised to lower case, or raise if it cannot form an insight id.

    Raises:
        UserError: If the name is not a lowercase identifier (letters, digits, ``_``).
    """
    normalised = name.strip().lower()
    if not _NAME.fullmatch(normalised):
        raise UserError(
            f"archetype name {name!r} must be a lowercase identifier "
            "(a letter, then letters, digits or '_', at most 40 characters)"
        )
    return normalised


@dataclass(frozen=True, slots=True)
class Archetype:
    """One perspective: who answers, and from which stance."""

    name: str
    """Identifier, e.g. ``critic``; the insight id is ``{name}_insight``."""
    stance: str
    """How this perspective looks at a question; becomes its system prompt."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", validate_archetype_name(self.name))
        if not self.stance.strip():
            raise UserError(f"archetype {self.name!r} needs a non-empty stance")

    @property
    def insight_id(self) -> str:
        """The id grouping uses for this perspective's insight."""
        return f"{self.name}_insight"


DEFAULT_ARCHETYPES: tuple[Archetype, ...] = (
    Archetype(
        "optimist",
        "You are the Optimist. Look for the opportunities, upside and best realistic "
        "outcomes, and explain what would make them happen.",
    ),
    Archetype(
        "critic",
        "You are the Critic. Look for risks, weaknesses, failure modes and hidden costs, "
        "and say which of them matter most.",
    ),
    Archetype(
        "analyst",
        "You are the Analyst. Reason from data, evidence and base rates; separate what is "
        "known from what is assumed.",
    ),
    Archetype(
        "innovator",
        "You are the Innovator. Look for unconventional approaches, reframings and "
        "combinations that others would miss.",
    ),
    Archetype(
        "pragmatist",
        "You are the Pragmatist. Focus on what can be done now with the resources at hand, "
        "and on the concrete next steps.",
    ),
)
"""The seed's five perspectives: optimist, critic, analyst, innovator, pragmatist."""

_BY_NAME = {archetype.name: archetype for archetype in DEFAULT_ARCHETYPES}


def resolve_archetypes(items: Iterable[str | Archetype] | None = None) -> tuple[Archetype, ...]:
    """Turn names and `Archetype` objects into a validated tuple (default: the five).

    A plain string must name one of the defaults; custom perspectives are given as
    `Archetype` objects.

    Raises:
        UserError: For an unknown name, a duplicate, or fewer than two perspectives.
    """
    if items is None:
        return DEFAULT_ARCHETYPES
    resolved: list[Archetype] = []
    for item in items:
        if isinstance(item, Archetype):
            resolved.append(item)
            continue
        name = validate_archetype_name(item)
        if name not in _BY_NAME:
            known = ", ".join(_BY_NAME)
            raise UserError(
                f"unknown archetype {item!r}; use one of {known} or define it as name=stance"
            )
        resolved.append(_BY_NAME[name])
    _check_unique(a.name for a in resolved)
    if len(resolved) < 2:
        raise UserError("a synthesis needs at least two archetypes")
    return tuple(resolved)


def parse_archetypes(spec: str) -> tuple[Archetype, ...]:
    """Parse the CLI form: comma-separated names, each optionally ``name=stance``.

    ``"optimist,critic,security=You look for attack surfaces"`` gives two defaults and
    one custom perspective. A stance cannot contain a comma.

    Raises:
        UserError: If an entry is empty or invalid (see `resolve_archetypes`).
    """
    items: list[str | Archetype] = []
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            raise UserError(f"--archetypes has an empty entry: {spec!r}")
        name, sep, stance = entry.partition("=")
        items.append(Archetype(name, stance) if sep else name)
    return resolve_archetypes(items)


def _check_unique(names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UserError(f"archetype {name!r} is listed twice")
        seen.add(name)
