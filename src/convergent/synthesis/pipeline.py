"""The public synthesis API: perspectives, validation, grouping, scoring, report.

`synthesize` runs the archetypes on a question; `synthesize_insights` starts from
Step 1 records you already have (the CLI's ``--insights`` mode) and, with no model,
is fully offline and deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from convergent.exceptions import ModelError, UserError
from convergent.limits import Limits
from convergent.messages import Usage
from convergent.models.base import Model, ModelSettings
from convergent.synthesis.archetypes import Archetype, resolve_archetypes
from convergent.synthesis.grouping import (
    DEFAULT_LATENCY_LIMIT,
    DEFAULT_RETRY_DELAY,
    group_insights,
)
from convergent.synthesis.insights import Insight, InsightRecord, records_from, validate_insight
from convergent.synthesis.perspectives import PerspectiveResult, ResearchSource, run_perspectives
from convergent.synthesis.report import SynthesisReport
from convergent.synthesis.scoring import score_themes
from convergent.synthesis.state import write_state

__all__ = ["synthesize", "synthesize_insights"]

_UNSET: Any = object()


async def synthesize(
    prompt: str,
    model: Model,
    *,
    archetypes: Iterable[str | Archetype] | None = None,
    research: ResearchSource | None = None,
    perspective_timeout: float | None = 300.0,
    limits: Limits | None = None,
    settings: ModelSettings | None = None,
    grouping_model: Model | None = _UNSET,
    latency_limit: float = DEFAULT_LATENCY_LIMIT,
    retry_delay: float = DEFAULT_RETRY_DELAY,
    state_path: str | Path | None = None,
) -> SynthesisReport:
    """Ask every archetype, then converge their insights into a ranked report.

    The steps, in order:

    1. Run each archetype as its own agent run, concurrently (with the research tool
       when given), and extract its insight as structured output.
    2. Clamp each confidence to 1..5 (with the seed's warnings) and adjust it from what
       the research tool actually returned.
    3. Group the insights by theme with the LLM, falling back to Jaccard keyword
       overlap on any of the seed's triggers.
    4. Score each theme (mean confidence x convergence multiplier x research bonus),
       with the reduced multipliers if any perspective failed or timed out.
    5. Build the report; write ``workflow-state.yaml`` if ``state_path`` is given.

    Args:
        prompt: The question every perspective answers.
        model: The backend for the perspectives (and, by default, for grouping).
        archetypes: Names of default archetypes or `Archetype` objects (default: five).
        research: Optional research tool (a `Tool` or a typed function). It signals
            "no results" by returning an empty value and "unavailable" by raising.
        perspective_timeout: Seconds per perspective; None for no limit.
        limits: Budgets of each perspective's agent run (default: 6 cycles).
        settings: Model settings for every request.
        grouping_model: Model for theme grouping; default ``model``; None for Jaccard.
        latency_limit: Seconds a grouping response may take (seed: 30).
        retry_delay: Seconds before the grouping retry (seed: 5).
        state_path: Where to write the workflow state, if anywhere.

    Raises:
        UserError: On bad arguments (unknown archetype, untyped research function...).
        ModelError: If every perspective failed.
    """
    if not prompt.strip():
        raise UserError("the prompt is empty")
    chosen = resolve_archetypes(archetypes)
    perspectives = await run_perspectives(
        prompt,
        chosen,
        model,
        research=research,
        time_limit=perspective_timeout,
        limits=limits,
        settings=settings,
    )
    failed = [p for p in perspectives if p.insight is None]
    if len(failed) == len(perspectives):
        first = failed[0]
        raise ModelError(
            f"all {len(perspectives)} perspectives failed; {first.archetype}: {first.error}"
        )
    return await _converge(
        prompt,
        tuple(a.name for a in chosen),
        perspectives,
        model if grouping_model is _UNSET else grouping_model,
        settings=settings,
        latency_limit=latency_limit,
        retry_delay=retry_delay,
        state_path=state_path,
    )


async def synthesize_insights(
    insights: Sequence[InsightRecord | Insight | Mapping[str, Any]],
    model: Model | None = None,
    *,
    prompt: str | None = None,
    archetypes: Iterable[str | Archetype] | None = None,
    settings: ModelSettings | None = None,
    latency_limit: float = DEFAULT_LATENCY_LIMIT,
    retry_delay: float = DEFAULT_RETRY_DELAY,
    state_path: str | Path | None = None,
) -> SynthesisReport:
    """Validate, group, score and report insights you already have (Step 1 records).

    Confidences are clamped with the seed's warnings; ``research_backed`` is taken as
    given. With ``model=None`` grouping uses Jaccard keyword overlap, so the result
    depends on the input alone.

    Args:
        insights: Step 1 records (dicts, `InsightRecord` or `Insight`), one per archetype.
        model: Grouping model, or None for the offline Jaccard method.
        prompt: The question, used as the report's title.
        archetypes: The archetypes that were asked. When given, an archetype without a
            record makes the run partial (Step 4 multipliers); a record for an archetype
            not listed is an error. Default: exactly the archetypes of the records.
        settings: Model settings for the grouping request.
        latency_limit: Seconds a grouping response may take (seed: 30).
        retry_delay: Seconds before the grouping retry (seed: 5).
        state_path: Where to write the workflow state, if anywhere.

    Raises:
        UserError: If a record is malformed, repeated, or not among ``archetypes``.
    """
    records = records_from(insights)
    given = [r.archetype for r in records]
    requested = tuple(a.name for a in resolve_archetypes(archetypes)) if archetypes else ()
    unexpected = [name for name in given if requested and name not in requested]
    if unexpected:
        raise UserError(
            f"insight for archetype {unexpected[0]!r}, which is not among the archetypes"
        )
    by_name = {r.archetype: r for r in records}
    perspectives = tuple(
        _provided(by_name[name]) if name in by_name else _missing(name)
        for name in (requested or tuple(given))
    )
    return await _converge(
        prompt,
        requested or tuple(given),
        perspectives,
        model,
        settings=settings,
        latency_limit=latency_limit,
        retry_delay=retry_delay,
        state_path=state_path,
    )


def _provided(record: InsightRecord) -> PerspectiveResult:
    validated = validate_insight(record)
    return PerspectiveResult(
        archetype=record.archetype,
        status="provided",
        insight=validated.insight,
        raw_confidence=validated.raw_confidence,
        validation_warnings=validated.warnings,
    )


def _missing(name: str) -> PerspectiveResult:
    return PerspectiveResult(archetype=name, status="failed", error="no insight was given")


async def _converge(
    prompt: str | None,
    requested: tuple[str, ...],
    perspectives: tuple[PerspectiveResult, ...],
    model: Model | None,
    *,
    settings: ModelSettings | None,
    latency_limit: float,
    retry_delay: float,
    state_path: str | Path | None,
) -> SynthesisReport:
    insights = {p.archetype: p.insight for p in perspectives if p.insight is not None}
    grouping = await group_insights(
        list(insights.values()),
        model,
        latency_limit=latency_limit,
        retry_delay=retry_delay,
        settings=settings,
    )
    partial = len(insights) < len(requested)
    usage = sum((p.usage for p in perspectives), Usage()) + grouping.usage
    report = SynthesisReport(
        prompt=prompt,
        requested=requested,
        perspectives=perspectives,
        grouping=grouping,
        themes=score_themes(grouping.themes, insights, partial=partial),
        partial=partial,
        usage=usage,
    )
    if state_path is not None:
        write_state(state_path, report)
    return report
