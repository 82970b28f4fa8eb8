"""The baseline policies of the convergence suite: hand-written loops, never the library's.

- ``subjective``: seed 000's naive rule: stop when ``action == "finish"`` or
  ``confidence >= 0.7``, checked on each response before its tool calls run (as the
  seed's ``_check_convergence`` did).
- ``counting``: the library's stop rules before stops became progress-aware, kept here
  to measure the change: the same call (same name, same canonical arguments) requested
  ``max_repeated_calls`` (3) times anywhere in the run stops it ``stalled`` at once,
  before any call of that response runs, with no note to the model; tool failures count
  per call, and 3 in a row (a success resets the count; a call the model got wrong
  counts neither way) stop it ``tool_error``; no answer is asked for after a stop.

Both check the limits before each model request as the library did then: the cycle
limit, and a token or cost budget once what was used reaches it (there were no caps on
tool calls). Both deliver the messages of the user's harness before the next request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from convergent.bench._tasks import Task, scripted_model
from convergent.bench._world import World
from convergent.exceptions import ToolError
from convergent.messages import (
    CallOutcome,
    Message,
    ModelResponse,
    ToolResultMessage,
    UserMessage,
)
from convergent.stop import StopReason, canonical_call_key
from convergent.tools import Tool, ToolArgumentsError

__all__ = [
    "CONFIDENCE_THRESHOLD",
    "MAX_CONSECUTIVE_TOOL_ERRORS",
    "MAX_REPEATED_CALLS",
    "RunEnd",
    "run_counting",
    "run_subjective",
    "subjective_converged",
]

CONFIDENCE_THRESHOLD = 0.7
"""Seed 000's threshold: the subjective baseline stops at or above this confidence."""
MAX_REPEATED_CALLS = 3
"""``counting``: identical requests per run that stall it."""
MAX_CONSECUTIVE_TOOL_ERRORS = 3
"""``counting``: failed calls in a row that stop the run."""


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How a run ended, under any policy."""

    stop: str
    """A `StopReason` value, or the subjective baseline's own reason."""
    cycles: int
    """Model requests made (a final answer after a stop is not one)."""
    output: str = ""
    """The run's output: its answer, the best text it has, or the answer after a stop."""
    after_stop: bool = False
    """The output was asked for after the stop."""
    tokens: int = 0
    """Tokens used, the answer after a stop included."""
    cost: float = 0.0
    """What the responses cost, the answer after a stop included."""
    nudges: int = 0
    """Notes the model got instead of a stop (stall or tool-error nudges)."""
    budget_notes: int = 0
    """Notes the model got on what is left of its budgets."""
    detail: str = ""
    """The stop in words, with its numbers."""


def subjective_converged(metadata: Mapping[str, Any]) -> str | None:
    """Seed 000's naive convergence check; the reason it fires, or None.

    This is the baseline under measurement, never used by the library's loop.
    """
    if metadata.get("action") == "finish":
        return "finish"
    confidence = metadata.get("confidence", 0)
    if isinstance(confidence, int | float) and confidence >= CONFIDENCE_THRESHOLD:
        return "confidence"
    return None


async def _call_tool(
    tools: Mapping[str, Tool], name: str, arguments: dict[str, Any]
) -> tuple[CallOutcome, str]:
    selected = tools.get(name)
    if selected is None:
        return CallOutcome.INVALID, f"unknown tool {name!r}"
    try:
        return CallOutcome.OK, await selected.call(arguments)
    except ToolArgumentsError as exc:
        return CallOutcome.INVALID, f"error: {exc}"
    except ToolError as exc:
        return CallOutcome.FAILED, f"error: {exc}"


class _Loop:
    """A hand-written agent loop over one task: the model, the tools, the limits."""

    def __init__(self, task: Task, world: World, max_cycles: int) -> None:
        self.task = task
        self.model = scripted_model(task, clock=world.clock, harness=self)
        self.tools = {t.name: t for t in world.tools(task.tools, task.declared)}
        self.specs = [t.spec for t in self.tools.values()]
        self.messages: list[Message] = [UserMessage(content=task.prompt)]
        self.waiting: list[str] = []
        self.max_cycles = max_cycles
        self.cycles = 0
        self.tokens = 0
        self.cost = 0.0

    def send(self, message: str) -> None:
        """A message of the user's harness, delivered before the next request."""
        self.waiting.append(message)

    def limit(self) -> str | None:
        """The limit that forbids another request, checked on what was used so far."""
        if self.cycles >= self.max_cycles:
            return StopReason.MAX_CYCLES.value
        tokens, cost = self.task.max_total_tokens, self.task.max_cost
        if (tokens is not None and self.tokens >= tokens) or (
            cost is not None and self.cost >= cost
        ):
            return StopReason.BUDGET_EXHAUSTED.value
        return None

    async def request(self) -> ModelResponse:
        self.messages.extend(UserMessage(content=text) for text in self.waiting)
        self.waiting.clear()
        response = await self.model.request(self.messages, self.specs)
        self.cycles += 1
        self.tokens += response.usage.total_tokens
        self.cost += response.usage.cost
        self.messages.append(response.to_message())
        return response

    async def run_calls(self, response: ModelResponse) -> list[CallOutcome]:
        """Run the response's calls in order, append their results, return their outcomes."""
        outcomes: list[CallOutcome] = []
        for call in response.tool_calls:
            outcome, text = await _call_tool(self.tools, call.name, call.arguments)
            self.messages.append(
                ToolResultMessage(tool_call_id=call.id, name=call.name, content=text)
            )
            outcomes.append(outcome)
        return outcomes

    def end(self, stop: str, output: str = "") -> RunEnd:
        return RunEnd(
            stop=stop, cycles=self.cycles, output=output, tokens=self.tokens, cost=self.cost
        )


async def run_subjective(task: Task, world: World, max_cycles: int) -> RunEnd:
    """The naive loop: stop on a finish action or high confidence, else run the calls."""
    loop = _Loop(task, world, max_cycles)
    while (limit := loop.limit()) is None:
        response = await loop.request()
        reason = subjective_converged(response.metadata)
        if reason is not None:
            return loop.end(reason, response.content)
        await loop.run_calls(response)
    return loop.end(limit)


async def run_counting(task: Task, world: World, max_cycles: int) -> RunEnd:
    """The stop rules before progress-aware stopping: counts per run, errors per call."""
    loop = _Loop(task, world, max_cycles)
    requested: Counter[str] = Counter()
    streak = 0
    while (limit := loop.limit()) is None:
        response = await loop.request()
        if not response.tool_calls:
            return loop.end(StopReason.COMPLETED.value, response.content)
        stalled = False
        for call in response.tool_calls:
            key = canonical_call_key(call.name, call.arguments)
            requested[key] += 1
            stalled = stalled or requested[key] >= MAX_REPEATED_CALLS
        if stalled:
            return loop.end(StopReason.STALLED.value)
        failed = False
        for outcome in await loop.run_calls(response):
            if outcome == CallOutcome.OK:
                streak = 0
            elif outcome == CallOutcome.FAILED:
                streak, failed = streak + 1, True
        if failed and (task.on_tool_error == "stop" or streak >= MAX_CONSECUTIVE_TOOL_ERRORS):
            return loop.end(StopReason.TOOL_ERROR.value)
    return loop.end(limit)
