"""Step 5: the synthesis report, as the seed's YAML shape and as readable Markdown.

Themes shared by two or more archetypes are *convergent insights* (ranked by score);
single-member themes are *divergent insights*, kept with attribution. When no theme is
shared, the report becomes a portfolio of options with a diagnosis and three choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from convergent.messages import Usage
from convergent.synthesis.grouping import GroupingResult
from convergent.synthesis.insights import Insight
from convergent.synthesis.perspectives import PerspectiveResult
from convergent.synthesis.scoring import ScoredTheme

__all__ = [
    "DIVERGENT_NOTE",
    "HIGH_CONFIDENCE",
    "LOW_CONFIDENCE",
    "USER_CHOICES",
    "Diagnosis",
    "NoConvergence",
    "SynthesisReport",
    "diagnose",
]

DIVERGENT_NOTE = "This perspective was not echoed by other archetypes"
"""The note on every divergent insight."""

HIGH_CONFIDENCE = 4
"""Confidence at or above this counts as high for the no-convergence diagnosis."""
LOW_CONFIDENCE = 2
"""Confidence at or below this counts as low for the no-convergence diagnosis."""

USER_CHOICES: tuple[str, ...] = (
    "Proceed with portfolio synthesis",
    "Refine the original prompt for another attempt",
    "Select most relevant perspective for deeper exploration",
)
"""What the user may do when no theme converged."""

_PORTFOLIO_INTRO = """No strong consensus emerged across perspectives. This suggests:
- The problem may be genuinely complex with no clear answer
- Different framings lead to different conclusions
- Multiple valid approaches exist"""


class Diagnosis(StrEnum):
    """Why no theme converged, read from the perspectives' confidence."""

    GENUINELY_COMPLEX = "genuinely_complex"
    """All high confidence and no overlap."""
    PROMPT_NEEDS_REFINEMENT = "prompt_needs_refinement"
    """All low confidence and no overlap."""
    NORMAL_DIVERGENCE = "normal_divergence"
    """Mixed confidence."""

    @property
    def explanation(self) -> str:
        """One sentence for the report."""
        return _EXPLANATIONS[self]


_EXPLANATIONS = {
    Diagnosis.GENUINELY_COMPLEX: "All perspectives are highly confident yet none overlap: "
    "the problem is likely genuinely complex.",
    Diagnosis.PROMPT_NEEDS_REFINEMENT: "All perspectives have low confidence and none "
    "overlap: the prompt may need refinement.",
    Diagnosis.NORMAL_DIVERGENCE: "Confidence is mixed and the perspectives do not overlap: "
    "normal divergence.",
}


def diagnose(insights: Sequence[Insight]) -> Diagnosis:
    """All confidences >= 4: complex; all <= 2: refine the prompt; otherwise normal."""
    if insights and all(i.confidence >= HIGH_CONFIDENCE for i in insights):
        return Diagnosis.GENUINELY_COMPLEX
    if insights and all(i.confidence <= LOW_CONFIDENCE for i in insights):
        return Diagnosis.PROMPT_NEEDS_REFINEMENT
    return Diagnosis.NORMAL_DIVERGENCE


@dataclass(frozen=True, slots=True)
class NoConvergence:
    """The portfolio framing used when no theme is shared by two or more archetypes."""

    diagnosis: Diagnosis
    """What the lack of overlap suggests."""
    perspectives: int
    """How many distinct perspectives the portfolio offers."""
    choices: tuple[str, ...] = USER_CHOICES
    """What the user may do next."""

    def to_dict(self) -> dict[str, Any]:
        """The ``no_convergence`` entry of the report."""
        return {
            "diagnosis": self.diagnosis.value,
            "explanation": self.diagnosis.explanation,
            "choices": list(self.choices),
        }


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _ranked_members(theme: ScoredTheme) -> list[Insight]:
    """Members by confidence, then research backing, then input order."""
    indexed = list(enumerate(theme.members))
    indexed.sort(key=lambda pair: (-pair[1].confidence, not pair[1].research_backed, pair[0]))
    return [member for _, member in indexed]


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


@dataclass(frozen=True, slots=True, kw_only=True)
class SynthesisReport:
    """Everything a synthesis produced: ranked themes, perspectives and grouping record."""

    prompt: str | None
    """The question, when known."""
    requested: tuple[str, ...]
    """Archetypes that were asked (or expected, for given insights)."""
    perspectives: tuple[PerspectiveResult, ...]
    """One entry per requested archetype, in order."""
    grouping: GroupingResult
    """How the themes were formed."""
    themes: tuple[ScoredTheme, ...]
    """Scored themes, best first."""
    partial: bool
    """Whether a requested perspective is missing (the Step 4 multipliers applied)."""
    usage: Usage = Usage()
    """Tokens spent, perspectives and grouping together."""

    @property
    def convergent(self) -> tuple[ScoredTheme, ...]:
        """Themes shared by two or more archetypes, best first."""
        return tuple(t for t in self.themes if t.convergent)

    @property
    def divergent(self) -> tuple[ScoredTheme, ...]:
        """Single-archetype themes, best first."""
        return tuple(t for t in self.themes if not t.convergent)

    @property
    def insights(self) -> tuple[Insight, ...]:
        """The insights that took part, in archetype order."""
        return tuple(p.insight for p in self.perspectives if p.insight is not None)

    @property
    def validation_warnings(self) -> tuple[str, ...]:
        """Every confidence clamping warning, in archetype order."""
        return tuple(w for p in self.perspectives for w in p.validation_warnings)

    @property
    def no_convergence(self) -> NoConvergence | None:
        """The portfolio framing, when no theme is shared by two or more archetypes."""
        if self.convergent:
            return None
        return NoConvergence(diagnose(self.insights), len(self.insights))

    def to_dict(self) -> dict[str, Any]:
        """The seed's report shape (``validation_warnings``, ``no_convergence`` when they apply)."""
        data: dict[str, Any] = {
            "convergent_insights": [_convergent_entry(t) for t in self.convergent],
            "divergent_insights": [_divergent_entry(t.members[0]) for t in self.divergent],
        }
        if self.validation_warnings:
            data["validation_warnings"] = list(self.validation_warnings)
        if (portfolio := self.no_convergence) is not None:
            data["no_convergence"] = portfolio.to_dict()
        return data

    def to_yaml(self) -> str:
        """`to_dict` as YAML."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=100)

    def to_json_dict(self) -> dict[str, Any]:
        """The report plus how it was made (``--json`` output)."""
        data = self.to_dict()
        data.setdefault("validation_warnings", [])
        data.setdefault("no_convergence", None)
        data["grouping"] = {
            "method": self.grouping.method,
            "trigger": self.grouping.trigger.value if self.grouping.trigger else None,
            "reason": self.grouping.reason,
            "attempts": len(self.grouping.attempts),
        }
        data["partial"] = self.partial
        data["perspectives"] = [
            {
                "archetype": p.archetype,
                "status": p.status,
                "confidence": p.insight.confidence if p.insight else None,
                "raw_confidence": p.raw_confidence,
                "research_backed": p.insight.research_backed if p.insight else None,
                "notes": list(p.notes),
                "error": p.error,
            }
            for p in self.perspectives
        ]
        data["usage"] = {
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
            "requests": self.usage.requests,
        }
        return data

    def to_markdown(self) -> str:
        """A readable report for the terminal or a ``.md`` file."""
        lines = [f"# Synthesis: {self.prompt}" if self.prompt else "# Synthesis", ""]
        done = len(self.insights)
        method: str = self.grouping.method
        if self.grouping.reason:
            method += f" ({self.grouping.reason})"
        lines += [f"{done} of {len(self.requested)} perspectives · grouping: {method}", ""]
        if self.partial:
            lines += [_partial_line(self.perspectives), ""]
        portfolio = self.no_convergence
        if portfolio is None:
            lines += ["## Convergent insights", ""]
            for rank, theme in enumerate(self.convergent, start=1):
                lines += _convergent_markdown(rank, theme)
            if self.divergent:
                lines += ["## Divergent insights", ""]
        else:
            lines += ["## Portfolio of Options", "", _PORTFOLIO_INTRO, ""]
            noun = "distinct perspectives" if portfolio.perspectives != 1 else "perspective"
            verb = "are" if portfolio.perspectives != 1 else "is"
            lines += [
                f"Below {verb} {portfolio.perspectives} {noun}, "
                "each offering a different path forward.",
                "",
            ]
        for theme in self.divergent:
            lines += _divergent_markdown(theme.members[0])
        if portfolio is not None:
            lines += [f"**Diagnosis:** {portfolio.diagnosis.explanation}", "", "What next?", ""]
            lines += [f"{n}. {choice}" for n, choice in enumerate(portfolio.choices, 1)] + [""]
        lines += _notes_markdown(self)
        return "\n".join(lines).rstrip() + "\n"


def _convergent_entry(theme: ScoredTheme) -> dict[str, Any]:
    members = _ranked_members(theme)
    return {
        "theme": theme.theme.description,
        "score": theme.score,
        "convergence_count": theme.convergence_count,
        "contributing_archetypes": [m.archetype for m in theme.members],
        "synthesized_insight": " ".join(_unique([_sentence(m.key_insight) for m in members])),
        "evidence": _unique([e for m in members for e in m.evidence]),
    }


def _divergent_entry(insight: Insight) -> dict[str, Any]:
    return {
        "archetype": insight.archetype,
        "insight": insight.key_insight,
        "confidence": insight.confidence,
        "evidence": list(insight.evidence),
        "note": DIVERGENT_NOTE,
    }


def _partial_line(perspectives: Sequence[PerspectiveResult]) -> str:
    missing = [f"{p.archetype} ({p.status})" for p in perspectives if p.insight is None]
    return (
        f"Partial run: missing {', '.join(missing)}; "
        "reduced convergence multipliers applied (3+ -> 2.0, 2 -> 1.3)."
    )


def _convergent_markdown(rank: int, theme: ScoredTheme) -> list[str]:
    entry = _convergent_entry(theme)
    who = ", ".join(entry["contributing_archetypes"])
    lines = [
        f"{rank}. **{entry['theme']}** (score {entry['score']:g}, "
        f"{entry['convergence_count']} archetypes: {who})",
        f"   {entry['synthesized_insight']}",
    ]
    lines += [f"   - {e}" for e in entry["evidence"]]
    return [*lines, ""]


def _divergent_markdown(insight: Insight) -> list[str]:
    lines = [f"- **{insight.archetype}** (confidence {insight.confidence}): {insight.key_insight}"]
    lines += [f"  - {e}" for e in insight.evidence]
    return [*lines, ""]


def _notes_markdown(report: SynthesisReport) -> list[str]:
    lines: list[str] = []
    if report.validation_warnings:
        lines += ["## Validation warnings", ""]
        lines += [f"- {w}" for w in report.validation_warnings] + [""]
    notes = [(p.archetype, n) for p in report.perspectives for n in p.notes]
    failures = [p for p in report.perspectives if p.error]
    if notes or failures:
        lines += ["## Perspective notes", ""]
        lines += [f"- {archetype}: {note}" for archetype, note in notes]
        lines += [f"- {p.archetype}: {p.status}: {p.error}" for p in failures] + [""]
    return lines
