"""Stage 2: each archetype answers the question as its own agent run, concurrently.

A perspective is an `Agent` run (with the research tool when one is given) followed by
one structured-output request that extracts the Step 1 record under `INSIGHT_SCHEMA`.
What the research tool actually returned, counted from the run's tool-call records,
sets ``research_backed`` and the research adjustment. A perspective that fails or
times out is recorded as such; the others still finish (partial completion).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import ValidationError

from convergent.agent import Agent
from convergent.exceptions import ModelBehaviorError, ModelError, UserError
from convergent.limits import Limits
from convergent.messages import AssistantMessage, Message, SystemMessage, Usage, UserMessage
from convergent.models.base import Model, ModelSettings
from convergent.state import ToolCallRecord
from convergent.stop import StopReason
from convergent.synthesis._jsonreply import loads_object
from convergent.synthesis.archetypes import Archetype
from convergent.synthesis.insights import (
    Insight,
    InsightRecord,
    ResearchTally,
    adjust_for_research,
    validate_insight,
)
from convergent.tools import Tool, tool

__all__ = [
    "INSIGHT_SCHEMA",
    "PerspectiveResult",
    "PerspectiveStatus",
    "ResearchSource",
    "as_research_tool",
    "run_perspective",
    "run_perspectives",
]

PerspectiveStatus = Literal["completed", "failed", "timed_out", "provided"]
"""``provided`` marks an insight given directly (``--insights``) rather than generated."""

ResearchSource = Tool | Callable[..., Any]
"""A research tool: a `Tool`, or a typed function that `tool` can wrap."""

INSIGHT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "key_insight": {"type": "string", "maxLength": 300},
        "confidence": {"type": "integer"},
        "evidence": {
            "type": "array",
            "items": {"type": "string", "maxLength": 160},
            "maxItems": 3,
        },
    },
    "required": ["key_insight", "confidence", "evidence"],
}
"""Structured output asked of each perspective; ``research_backed`` is never asked.

The length bounds keep a reply inside a small token budget (one or two sentences, a
few short points); ``confidence`` is deliberately unbounded so that an out-of-range
value is clamped with a warning rather than silently prevented.
"""

DEFAULT_LIMITS = Limits(max_cycles=6)
"""Room for a couple of searches and the answer."""

EXTRACTION_ATTEMPTS = 2
"""Extraction requests per perspective: the first, and one retry naming the problem."""

_TASK = """Question: {prompt}

Answer from your perspective. Give your single most important insight in one or two \
sentences, the evidence for it, and how confident you are on a scale from 1 (low) \
to 5 (high)."""

_RESEARCH_HINT = (
    "\n\nYou can call the `{name}` tool to research facts. Use it for at most two "
    "searches, then answer in plain text without calling tools."
)

_EXTRACT = """Return your answer as JSON only, with exactly these fields:
- key_insight: your single most important insight, one or two sentences
- confidence: an integer from 1 (low) to 5 (high)
- evidence: a list of short supporting points"""


@dataclass(frozen=True, slots=True, kw_only=True)
class PerspectiveResult:
    """How one perspective went, and its insight when it produced one."""

    archetype: str
    """The perspective's name."""
    status: PerspectiveStatus
    """``completed``, ``failed``, ``timed_out`` or ``provided``."""
    insight: Insight | None = None
    """The validated, adjusted insight; None unless the perspective succeeded."""
    raw_confidence: int | None = None
    """Confidence as the model (or file) stated it, before clamping and adjustment."""
    validation_warnings: tuple[str, ...] = ()
    """The seed's clamping warnings."""
    research: ResearchTally | None = None
    """Research calls counted from the run; None when no research tool was given."""
    notes: tuple[str, ...] = ()
    """Adjustments made (e.g. ``limited research``)."""
    error: str | None = None
    """Why the perspective failed."""
    stop_reason: StopReason | None = None
    """How its agent run ended, when it ran."""
    usage: Usage = Usage()
    """Tokens spent by this perspective."""
    duration: float = 0.0
    """Wall seconds."""

    @property
    def ok(self) -> bool:
        """Whether the perspective contributed an insight."""
        return self.insight is not None


class _ExtractionError(ModelBehaviorError):
    """The model did not produce a usable insight record."""

    def __init__(self, message: str, usage: Usage) -> None:
        super().__init__(message)
        self.usage = usage


def as_research_tool(research: ResearchSource | None) -> Tool | None:
    """Wrap a research function as a `Tool` (a `Tool` passes through).

    Raises:
        ToolDefinitionError: If the function cannot become a tool (untyped parameters).
    """
    if research is None or isinstance(research, Tool):
        return research
    return tool(research)


def _record_from_reply(content: str, archetype: str) -> InsightRecord:
    data = loads_object(content)
    fields = {key: data[key] for key in ("key_insight", "confidence", "evidence") if key in data}
    try:
        # research_backed is decided from the tool records, so the model's claim is dropped
        return InsightRecord.model_validate({"archetype": archetype, **fields})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"{where}: {err['msg']}") from None


async def _extract(
    model: Model, archetype: Archetype, task: str, answer: str, settings: ModelSettings
) -> tuple[InsightRecord, Usage]:
    messages: list[Message] = [
        SystemMessage(content=archetype.stance),
        UserMessage(content=task),
        AssistantMessage(content=answer),
        UserMessage(content=_EXTRACT),
    ]
    usage = Usage()
    problem = ""
    for _ in range(EXTRACTION_ATTEMPTS):
        response = await model.request(messages, (), settings)
        usage = usage + response.usage
        try:
            return _record_from_reply(response.content, archetype.name), usage
        except ValueError as exc:
            problem = str(exc)
        messages += [
            AssistantMessage(content=response.content),
            UserMessage(content=f"That reply was unusable ({problem}). {_EXTRACT}"),
        ]
    raise _ExtractionError(
        f"no usable insight after {EXTRACTION_ATTEMPTS} attempts: {problem}", usage
    )


def _completed(
    archetype: Archetype,
    record: InsightRecord,
    research_tool: Tool | None,
    tool_calls: Sequence[ToolCallRecord],
    *,
    stop_reason: StopReason | None,
    usage: Usage,
    duration: float,
) -> PerspectiveResult:
    """The result of a successful perspective: clamp, then adjust for research."""
    validated = validate_insight(record)
    insight = validated.insight
    tally: ResearchTally | None = None
    notes: list[str] = []
    if research_tool is not None:
        tally = ResearchTally.from_tool_calls(tool_calls, research_tool.name)
        confidence, notes = adjust_for_research(insight.confidence, tally)
        insight = insight.model_copy(
            update={"confidence": confidence, "research_backed": tally.backed}
        )
    return PerspectiveResult(
        archetype=archetype.name,
        status="completed",
        insight=insight,
        raw_confidence=validated.raw_confidence,
        validation_warnings=validated.warnings,
        research=tally,
        notes=tuple(notes),
        stop_reason=stop_reason,
        usage=usage,
        duration=duration,
    )


async def run_perspective(
    prompt: str,
    archetype: Archetype,
    model: Model,
    *,
    research: ResearchSource | None = None,
    time_limit: float | None = 300.0,
    limits: Limits | None = None,
    settings: ModelSettings | None = None,
) -> PerspectiveResult:
    """Run one perspective to its insight, never raising for model trouble.

    Steps: an agent run (the research tool, if any, is its only tool; a failing tool
    call is fed back rather than ending the run), then a structured extraction request,
    retried once with the problem named. Confidence is clamped, then adjusted from the
    research calls the run actually made.

    Args:
        prompt: The question.
        archetype: Who answers.
        model: The backend.
        research: Optional research tool.
        time_limit: Seconds for the whole perspective; None for no limit.
        limits: The agent run's budgets (default: 6 cycles).
        settings: Model settings (any ``json_schema`` is replaced where needed).

    Raises:
        UserError: On a caller mistake (a bad tool, an exhausted scripted model).
    """
    research_tool = as_research_tool(research)
    base = replace(settings or ModelSettings(), json_schema=None)
    system = archetype.stance
    if research_tool is not None:
        system += _RESEARCH_HINT.format(name=research_tool.name)
    agent = Agent(
        model,
        [research_tool] if research_tool is not None else [],
        system_prompt=system,
        limits=limits or DEFAULT_LIMITS,
        settings=base,
        record_events=False,
    )
    task = _TASK.format(prompt=prompt)
    started = time.perf_counter()
    usage = Usage()
    stop_reason: StopReason | None = None

    def failed(status: PerspectiveStatus, error: str) -> PerspectiveResult:
        return PerspectiveResult(
            archetype=archetype.name,
            status=status,
            error=error,
            stop_reason=stop_reason,
            usage=usage,
            duration=time.perf_counter() - started,
        )

    try:
        async with asyncio.timeout(time_limit):
            run = await agent.run(task)
            usage, stop_reason = run.usage, run.stop_reason
            if run.stop_reason is not StopReason.COMPLETED:
                return failed("failed", f"agent run ended {run.stop_reason}: {run.stop_detail}")
            extract_settings = replace(base, json_schema=INSIGHT_SCHEMA, json_schema_name="insight")
            record, extra = await _extract(model, archetype, task, run.output, extract_settings)
            usage = usage + extra
    except TimeoutError:
        return failed("timed_out", f"no insight within {time_limit:g} s")
    except _ExtractionError as exc:
        usage = usage + exc.usage
        return failed("failed", str(exc))
    except (ModelError, ModelBehaviorError) as exc:
        return failed("failed", str(exc) or type(exc).__name__)
    return _completed(
        archetype,
        record,
        research_tool,
        run.tool_calls,
        stop_reason=stop_reason,
        usage=usage,
        duration=time.perf_counter() - started,
    )


def _first_leaf(group: BaseExceptionGroup[UserError]) -> UserError:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def run_perspectives(
    prompt: str,
    archetypes: Sequence[Archetype],
    model: Model,
    *,
    research: ResearchSource | None = None,
    time_limit: float | None = 300.0,
    limits: Limits | None = None,
    settings: ModelSettings | None = None,
) -> tuple[PerspectiveResult, ...]:
    """Run every perspective concurrently; results come back in archetype order.

    Args and failure handling are those of `run_perspective`; one perspective failing
    does not cancel the others.

    Raises:
        UserError: On a caller mistake in any perspective.
    """
    research_tool = as_research_tool(research)
    tasks: list[asyncio.Task[PerspectiveResult]] = []
    try:
        async with asyncio.TaskGroup() as group:
            for archetype in archetypes:
                tasks.append(
                    group.create_task(
                        run_perspective(
                            prompt,
                            archetype,
                            model,
                            research=research_tool,
                            time_limit=time_limit,
                            limits=limits,
                            settings=settings,
                        )
                    )
                )
    except* UserError as errors:
        raise _first_leaf(errors) from None
    return tuple(task.result() for task in tasks)
