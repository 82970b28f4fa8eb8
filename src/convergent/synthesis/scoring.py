"""Steps 3 and 4: score each theme by agreement, confidence and research backing.

``score = mean(confidence) x multiplier(convergence_count) x (1 + 0.1 x research_backed)``

The multiplier table depends on whether every requested perspective completed (Step 3)
or at least one is missing (Step 4, partial completion). Arithmetic is exact (fractions),
so the seed's 4 x 1.5 x 1.2 is 7.2, not 7.199999999999999; ranking uses the exact value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from convergent.synthesis.grouping import Theme
from convergent.synthesis.insights import Insight

__all__ = [
    "FULL_MULTIPLIERS",
    "PARTIAL_MULTIPLIERS",
    "RESEARCH_BONUS_PER_MEMBER",
    "ScoredTheme",
    "convergence_multiplier",
    "research_bonus",
    "score_themes",
]

FULL_MULTIPLIERS: tuple[tuple[int, Fraction], ...] = (
    (4, Fraction("2.5")),
    (3, Fraction("2.0")),
    (2, Fraction("1.5")),
    (1, Fraction("1.0")),
)
"""Step 3: (minimum convergence count, multiplier), checked in order."""

PARTIAL_MULTIPLIERS: tuple[tuple[int, Fraction], ...] = (
    (3, Fraction("2.0")),
    (2, Fraction("1.3")),
    (1, Fraction("1.0")),
)
"""Step 4, when a perspective is missing: 3+ -> 2.0, 2 -> 1.3, else 1.0."""

RESEARCH_BONUS_PER_MEMBER = Fraction("0.1")
"""Added to the research bonus for each research-backed member."""


def convergence_multiplier(count: int, *, partial: bool = False) -> Fraction:
    """The multiplier for ``count`` agreeing archetypes (Step 3, or Step 4 if ``partial``)."""
    for minimum, multiplier in PARTIAL_MULTIPLIERS if partial else FULL_MULTIPLIERS:
        if count >= minimum:
            return multiplier
    return Fraction(1)


def research_bonus(members: Sequence[Insight]) -> Fraction:
    """``1.0 + 0.1`` per research-backed member."""
    return 1 + RESEARCH_BONUS_PER_MEMBER * sum(1 for m in members if m.research_backed)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredTheme:
    """A theme with its members and the factors of its score."""

    theme: Theme
    """The grouping's theme."""
    members: tuple[Insight, ...]
    """The insights in the theme, in input order."""
    multiplier: Fraction
    """Convergence multiplier."""
    avg_confidence: Fraction
    """Mean confidence of the members."""
    research_bonus: Fraction
    """``1 + 0.1 x`` research-backed members."""
    exact_score: Fraction
    """The product of the three factors."""

    @property
    def convergence_count(self) -> int:
        """How many archetypes share the theme."""
        return len(self.members)

    @property
    def score(self) -> float:
        """The score as a float, rounded to 2 decimals for display."""
        return round(float(self.exact_score), 2)

    @property
    def convergent(self) -> bool:
        """Shared by two or more archetypes (otherwise a divergent insight)."""
        return self.convergence_count >= 2


def score_themes(
    themes: Sequence[Theme], insights: Mapping[str, Insight], *, partial: bool = False
) -> tuple[ScoredTheme, ...]:
    """Score every theme and rank them, best first.

    Ties are broken by more archetypes, then higher mean confidence, then the order of
    the themes' first members in ``insights``.

    Args:
        themes: The grouping; each archetype in at most one theme.
        insights: Insight by archetype, in input order.
        partial: Use the Step 4 multipliers (a requested perspective is missing).
    """
    order = {archetype: n for n, archetype in enumerate(insights)}
    scored: list[ScoredTheme] = []
    for theme in themes:
        members = tuple(insights[a] for a in theme.archetypes)
        avg = Fraction(sum(m.confidence for m in members), len(members))
        multiplier = convergence_multiplier(len(members), partial=partial)
        bonus = research_bonus(members)
        scored.append(
            ScoredTheme(
                theme=theme,
                members=members,
                multiplier=multiplier,
                avg_confidence=avg,
                research_bonus=bonus,
                exact_score=avg * multiplier * bonus,
            )
        )
    scored.sort(
        key=lambda s: (
            -s.exact_score,
            -s.convergence_count,
            -s.avg_confidence,
            min(order[a] for a in s.theme.archetypes),
        )
    )
    return tuple(scored)
