"""Step 2: group insights into themes, by LLM when it behaves, else by keyword overlap.

The LLM is sent the seed's refined prompt and JSON schema. Its reply must name every
insight id (``{archetype}_insight``) exactly once. A reply with wrong ids is retried
once with an explicit id instruction; invalid JSON and backend errors are retried once
after a delay (the seed's escalation chain: primary, one retry, then Jaccard). The
deterministic Jaccard fallback takes over on each of the seed's triggers:

- ``invalid_json``: no parseable reply under the schema after both attempts;
- ``collapsed``: zero themes, or every insight in one theme;
- ``latency_exceeded``: one response took longer than the latency limit (30 s);
- ``model_unavailable``: the backend raised `ModelError` on both attempts;
- ``fragmented``: every theme is a singleton;

plus ``invalid_ids`` (ids still wrong after the retry), ``no_model`` (none configured)
and ``too_few_insights`` (fewer than two, nothing to group).

Jaccard grouping: two insights are linked when the Jaccard similarity of their keyword
sets is strictly greater than 0.3; groups are the connected components of those links
(single linkage, so A~B and B~C put A, B and C together even if A and C share little).
Components and their members keep the insights' input order, so the result is
deterministic.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from convergent.exceptions import ModelBehaviorError, ModelError
from convergent.messages import Usage, UserMessage
from convergent.models.base import Model, ModelSettings
from convergent.synthesis._jsonreply import loads_object
from convergent.synthesis.insights import Insight

__all__ = [
    "DEFAULT_LATENCY_LIMIT",
    "DEFAULT_RETRY_DELAY",
    "GROUPING_PROMPT",
    "GROUPING_SCHEMA",
    "JACCARD_THRESHOLD",
    "FallbackTrigger",
    "GroupingAttempt",
    "GroupingMethod",
    "GroupingResult",
    "Theme",
    "extract_keywords",
    "format_insights",
    "grouping_prompt",
    "group_insights",
    "jaccard_groups",
    "keyword_overlap_jaccard",
]

JACCARD_THRESHOLD = 0.3
"""Two insights are linked when their keyword Jaccard similarity is greater than this."""
DEFAULT_LATENCY_LIMIT = 30.0
"""Seconds one grouping response may take before the fallback takes over."""
DEFAULT_RETRY_DELAY = 5.0
"""Seconds between the first grouping attempt and its retry."""
DEFAULT_ATTEMPTS = 2
"""The primary request and one retry."""

GROUPING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "themes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "theme_id": {"type": "string"},
                    "theme_description": {"type": "string"},
                    "insight_ids": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["theme_id", "theme_description", "insight_ids"],
            },
        }
    },
    "required": ["themes"],
}
"""The seed's JSON schema for the grouping output, verbatim."""

GROUPING_PROMPT = """Analyze these {N} insights and group them by thematic similarity.
Return ONLY valid JSON matching the schema below. No preamble or explanation.

Schema: {json_schema}

Rules:
- Each insight must appear in exactly one theme
- Insights with no thematic overlap should be in a single-member theme
- Use the exact insight_ids provided

Insights:
{formatted_insights}"""
"""The seed's refined prompt template."""

_ID_RETRY = """

Your previous reply did not use the insight ids correctly ({detail}).
Every insight_id has the form {{archetype}}_insight. Use exactly these ids, each exactly \
once across all themes: {ids}"""

_JSON_RETRY = """

Your previous reply was not valid JSON matching the schema ({detail}). \
Return ONLY the JSON object."""

GroupingMethod = Literal["llm", "jaccard_fallback"]
"""How the final themes were formed; recorded as ``stage_3.grouping_method``."""


class FallbackTrigger(StrEnum):
    """Why grouping fell back to Jaccard (or why one LLM attempt failed)."""

    INVALID_JSON = "invalid_json"
    """The reply was not JSON under the schema."""
    INVALID_IDS = "invalid_ids"
    """An id was unknown, repeated or missing."""
    COLLAPSED = "collapsed"
    """Zero themes, or all insights in a single theme."""
    FRAGMENTED = "fragmented"
    """Every theme held exactly one insight."""
    LATENCY_EXCEEDED = "latency_exceeded"
    """The response took longer than the latency limit."""
    MODEL_UNAVAILABLE = "model_unavailable"
    """The backend raised an error."""
    NO_MODEL = "no_model"
    """No model was configured (offline ``--insights`` mode)."""
    TOO_FEW_INSIGHTS = "too_few_insights"
    """Fewer than two insights: nothing to group."""


_RETRIED = {
    FallbackTrigger.INVALID_JSON,
    FallbackTrigger.INVALID_IDS,
    FallbackTrigger.MODEL_UNAVAILABLE,
}


@dataclass(frozen=True, slots=True)
class Theme:
    """A group of insights that share a theme."""

    theme_id: str
    """Identifier (the LLM's, or ``theme_N`` for Jaccard groups)."""
    description: str
    """One-sentence description of the theme."""
    archetypes: tuple[str, ...]
    """The archetypes whose insights belong here, in input order."""


@dataclass(frozen=True, slots=True)
class GroupingAttempt:
    """One LLM grouping request and what became of it."""

    number: int
    """1 for the primary request, 2 for the retry."""
    outcome: str
    """``ok`` or the `FallbackTrigger` value that rejected the reply."""
    detail: str
    """What was wrong, in a few words."""
    latency: float
    """Seconds the request took."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupingResult:
    """The themes, and how they were obtained."""

    themes: tuple[Theme, ...]
    """Every insight in exactly one theme."""
    method: GroupingMethod
    """``llm`` or ``jaccard_fallback``."""
    trigger: FallbackTrigger | None = None
    """Why the fallback was used; None for ``llm``."""
    reason: str | None = None
    """Human-readable detail of the trigger."""
    attempts: tuple[GroupingAttempt, ...] = ()
    """Every LLM request made, in order."""
    usage: Usage = Usage()
    """Tokens spent on grouping requests."""


class _ThemeOut(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    theme_id: str
    theme_description: str
    insight_ids: list[str]


class _GroupingOut(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    themes: list[_ThemeOut]


@dataclass(frozen=True, slots=True)
class _Rejected:
    trigger: FallbackTrigger
    detail: str


def format_insights(insights: Sequence[Insight]) -> str:
    """The ``{formatted_insights}`` block: one ``- id: insight`` line each."""
    return "\n".join(f"- {i.insight_id}: {i.key_insight}" for i in insights)


def grouping_prompt(insights: Sequence[Insight]) -> str:
    """The seed's refined prompt filled in for ``insights``."""
    return GROUPING_PROMPT.format(
        N=len(insights),
        json_schema=json.dumps(GROUPING_SCHEMA),
        formatted_insights=format_insights(insights),
    )


def _id_problems(themes: Sequence[_ThemeOut], expected: Sequence[str]) -> str | None:
    counts = Counter(i for theme in themes for i in theme.insight_ids)
    unknown = sorted(i for i in counts if i not in expected)
    repeated = sorted(i for i, n in counts.items() if n > 1 and i in expected)
    missing = [i for i in expected if i not in counts]
    problems = [
        f"{label}: {', '.join(ids)}"
        for label, ids in (("unknown", unknown), ("repeated", repeated), ("missing", missing))
        if ids
    ]
    return "; ".join(problems) or None


def _check_grouping(content: str, expected_ids: Sequence[str]) -> list[Theme] | _Rejected:
    """Validate one grouping reply against the schema, the ids and degeneracy.

    Checks run in order: JSON under the schema, zero themes (collapsed), every id
    exactly once, all insights in one theme (collapsed), all singletons (fragmented).
    Themes with an empty ``insight_ids`` list are ignored.
    """
    try:
        parsed = _GroupingOut.model_validate(loads_object(content))
    except ValueError as exc:  # ValidationError is a ValueError
        detail = str(exc) if not isinstance(exc, ValidationError) else _schema_detail(exc)
        return _Rejected(FallbackTrigger.INVALID_JSON, detail)
    themes = [t for t in parsed.themes if t.insight_ids]
    if not themes:
        return _Rejected(FallbackTrigger.COLLAPSED, "0 themes returned")
    problems = _id_problems(themes, expected_ids)
    if problems:
        return _Rejected(FallbackTrigger.INVALID_IDS, problems)
    if len(themes) == 1:
        return _Rejected(
            FallbackTrigger.COLLAPSED, f"all {len(expected_ids)} insights in a single theme"
        )
    if all(len(t.insight_ids) == 1 for t in themes):
        return _Rejected(FallbackTrigger.FRAGMENTED, f"all {len(themes)} themes are singletons")
    order = {insight_id: n for n, insight_id in enumerate(expected_ids)}
    return [
        Theme(
            theme_id=t.theme_id,
            description=t.theme_description.strip(),
            archetypes=tuple(
                i.removesuffix("_insight") for i in sorted(t.insight_ids, key=order.__getitem__)
            ),
        )
        for t in themes
    ]


def _schema_detail(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or "reply"
    return f"does not match the schema at {where}: {err['msg']}"


async def _request(
    model: Model, prompt: str, settings: ModelSettings, latency_limit: float
) -> tuple[str | _Rejected, float, Usage]:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(latency_limit):
            response = await model.request([UserMessage(content=prompt)], (), settings)
    except TimeoutError:
        elapsed = time.perf_counter() - started
        rejected = _Rejected(
            FallbackTrigger.LATENCY_EXCEEDED, f"no response within {latency_limit:g} s"
        )
        return rejected, elapsed, Usage()
    except (ModelError, ModelBehaviorError) as exc:
        rejected = _Rejected(FallbackTrigger.MODEL_UNAVAILABLE, str(exc) or type(exc).__name__)
        return rejected, time.perf_counter() - started, Usage()
    elapsed = time.perf_counter() - started
    if elapsed > latency_limit:  # a backend that blocks the event loop cannot be cancelled
        rejected = _Rejected(
            FallbackTrigger.LATENCY_EXCEEDED,
            f"response took {elapsed:.1f} s, more than {latency_limit:g} s",
        )
        return rejected, elapsed, response.usage
    return response.content, elapsed, response.usage


async def group_insights(
    insights: Sequence[Insight],
    model: Model | None = None,
    *,
    latency_limit: float = DEFAULT_LATENCY_LIMIT,
    retry_delay: float = DEFAULT_RETRY_DELAY,
    attempts: int = DEFAULT_ATTEMPTS,
    settings: ModelSettings | None = None,
    threshold: float = JACCARD_THRESHOLD,
) -> GroupingResult:
    """Group insights by theme: the LLM first, Jaccard keyword overlap as the fallback.

    Args:
        insights: One insight per archetype.
        model: The grouping model; None goes straight to Jaccard (offline, deterministic).
        latency_limit: Seconds one response may take (the seed's 30 s).
        retry_delay: Seconds before the retry (the seed's 5 s).
        attempts: LLM requests at most (the primary and one retry).
        settings: Model settings; the grouping schema is added, temperature defaults to 0.
        threshold: Jaccard linking threshold for the fallback.
    """
    if len(insights) < 2:
        return _fallback(insights, threshold, FallbackTrigger.TOO_FEW_INSIGHTS, "nothing to group")
    if model is None:
        return _fallback(insights, threshold, FallbackTrigger.NO_MODEL, "no model configured")
    base = settings or ModelSettings()
    request_settings = replace(
        base,
        temperature=0.0 if base.temperature is None else base.temperature,
        json_schema=GROUPING_SCHEMA,
        json_schema_name="theme_grouping",
    )
    expected = [i.insight_id for i in insights]
    prompt = grouping_prompt(insights)
    suffix = ""
    log: list[GroupingAttempt] = []
    usage = Usage()
    rejected = _Rejected(FallbackTrigger.MODEL_UNAVAILABLE, "no attempt made")
    for number in range(1, max(1, attempts) + 1):
        if number > 1:
            await asyncio.sleep(retry_delay)
        reply, latency, spent = await _request(
            model, prompt + suffix, request_settings, latency_limit
        )
        usage = usage + spent
        outcome = _check_grouping(reply, expected) if isinstance(reply, str) else reply
        if not isinstance(outcome, _Rejected):
            log.append(GroupingAttempt(number, "ok", "", latency))
            return GroupingResult(
                themes=tuple(outcome), method="llm", attempts=tuple(log), usage=usage
            )
        rejected = outcome
        log.append(GroupingAttempt(number, outcome.trigger.value, outcome.detail, latency))
        if outcome.trigger not in _RETRIED:
            break
        if outcome.trigger is FallbackTrigger.INVALID_IDS:
            suffix = _ID_RETRY.format(detail=outcome.detail, ids=", ".join(expected))
        elif outcome.trigger is FallbackTrigger.INVALID_JSON:
            suffix = _JSON_RETRY.format(detail=outcome.detail)
    return _fallback(insights, threshold, rejected.trigger, rejected.detail, tuple(log), usage)


def _fallback(
    insights: Sequence[Insight],
    threshold: float,
    trigger: FallbackTrigger,
    detail: str,
    attempts: tuple[GroupingAttempt, ...] = (),
    usage: Usage | None = None,
) -> GroupingResult:
    return GroupingResult(
        themes=jaccard_groups(insights, threshold),
        method="jaccard_fallback",
        trigger=trigger,
        reason=f"{trigger.value}: {detail}",
        attempts=attempts,
        usage=usage or Usage(),
    )


_STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers him his how i if in into is
    it its itself just may me might more most must my no nor not now of off on once only or
    other our ours out over own same she should so some such than that the their theirs
    them then there these they this those through to too under until up upon us very was
    we were what when where which while who whom why will with would you your yours
    """.split()
)
_WORD = re.compile(r"[a-z0-9]+")


def _normalise(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def extract_keywords(text: str) -> frozenset[str]:
    """Keywords of a text: lower-cased words of 3+ characters, minus stop words.

    Simple plurals are folded (``risks`` -> ``risk``, ``opportunities`` ->
    ``opportunity``) so that the same idea in singular and plural still overlaps.
    """
    words = (_normalise(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS)
    return frozenset(w for w in words if len(w) >= 3 and w not in _STOPWORDS)


def keyword_overlap_jaccard(insight_a: Insight | str, insight_b: Insight | str) -> float:
    """The seed's keyword Jaccard similarity of two insights (0 when both have no keywords)."""
    keywords_a = extract_keywords(_text(insight_a))
    keywords_b = extract_keywords(_text(insight_b))
    intersection = len(keywords_a & keywords_b)
    union = len(keywords_a | keywords_b)
    return intersection / union if union > 0 else 0


def _text(item: Insight | str) -> str:
    return item if isinstance(item, str) else item.key_insight


def jaccard_groups(
    insights: Sequence[Insight], threshold: float = JACCARD_THRESHOLD
) -> tuple[Theme, ...]:
    """Group insights whose key insights share keywords (connected components, see module doc).

    A multi-member group is described by the keywords most of its members share; a
    singleton by its own insight.
    """
    parent = list(range(len(insights)))

    def root(n: int) -> int:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a in range(len(insights)):
        for b in range(a + 1, len(insights)):
            if keyword_overlap_jaccard(insights[a], insights[b]) > threshold:
                parent[max(root(a), root(b))] = min(root(a), root(b))
    components: dict[int, list[Insight]] = {}
    for n, insight in enumerate(insights):
        components.setdefault(root(n), []).append(insight)
    return tuple(
        Theme(
            theme_id=f"theme_{number}",
            description=_describe(members),
            archetypes=tuple(m.archetype for m in members),
        )
        for number, members in enumerate(components.values(), start=1)
    )


def _describe(members: Sequence[Insight]) -> str:
    if len(members) == 1:
        return members[0].key_insight
    counts = Counter(word for m in members for word in extract_keywords(m.key_insight))
    shared = sorted((w for w, n in counts.items() if n > 1), key=lambda w: (-counts[w], w))
    return "Shared keywords: " + ", ".join(shared[:5])
