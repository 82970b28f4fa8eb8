"""Runs one response's batch of tool calls concurrently and returns results in call order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from convergent.exceptions import NeedsUserInput, ToolError
from convergent.messages import ToolCall, ToolResultMessage
from convergent.tools import Tool, ToolArgumentsError

__all__ = ["Outcome", "ToolOutcome", "execute_batch"]


class Outcome(StrEnum):
    """How one tool call ended."""

    OK = "ok"
    """The tool returned a result."""
    INVALID = "invalid"
    """The model's mistake: unknown tool, unparsable or invalid arguments. Fed back."""
    FAILED = "failed"
    """The tool raised or timed out: a tool failure, subject to the tool-error policy."""
    NEEDS_USER = "needs_user"
    """The tool must ask the user and no channel can answer now."""
    INTERRUPTED = "interrupted"
    """The run died while the call was in flight and the tool is not safe to re-run."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The result of one call, ready to be sent back to the model."""

    call: ToolCall
    kind: Outcome
    text: str
    duration: float

    @property
    def ok(self) -> bool:
        """Whether the call succeeded."""
        return self.kind is Outcome.OK

    def to_message(self) -> ToolResultMessage:
        """The observation for the model."""
        return ToolResultMessage(
            tool_call_id=self.call.id, name=self.call.name, content=self.text, is_error=not self.ok
        )


async def _invoke(call: ToolCall, tools: Mapping[str, Tool]) -> tuple[Outcome, str]:
    if call.parse_error is not None:
        return Outcome.INVALID, f"arguments for {call.name} are not valid JSON: {call.parse_error}"
    selected = tools.get(call.name)
    if selected is None:
        available = ", ".join(sorted(tools)) or "none"
        return Outcome.INVALID, f"unknown tool {call.name!r}; available tools: {available}"
    try:
        if selected.timeout is None:
            return Outcome.OK, await selected.call(call.arguments)
        async with asyncio.timeout(selected.timeout):
            return Outcome.OK, await selected.call(call.arguments)
    except ToolArgumentsError as exc:
        return Outcome.INVALID, str(exc)
    except NeedsUserInput as exc:
        return Outcome.NEEDS_USER, exc.question
    except TimeoutError:
        return Outcome.FAILED, f"{call.name} timed out after {selected.timeout:g}s"
    except ToolError as exc:
        return Outcome.FAILED, f"{call.name} failed: {exc}"
    except Exception as exc:  # a tool's own bug is its failure, reported to policy, not a crash
        return Outcome.FAILED, f"{call.name} raised {type(exc).__name__}: {exc}"


async def execute_batch(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    *,
    on_start: Callable[[ToolCall], None],
    on_finish: Callable[[ToolOutcome], None],
    concurrent: bool = True,
) -> list[ToolOutcome]:
    """Run all calls of one response concurrently; return their outcomes in call order.

    Each call has its tool's timeout. A failing call does not cancel its siblings:
    every call of the batch gets a result, so no request goes unanswered. With
    ``concurrent=False`` the calls run one after another, in call order.
    """

    async def run(call: ToolCall) -> ToolOutcome:
        on_start(call)
        started = time.perf_counter()
        kind, text = await _invoke(call, tools)
        outcome = ToolOutcome(call, kind, text, time.perf_counter() - started)
        on_finish(outcome)
        return outcome

    if len(calls) == 1 or not concurrent:
        return [await run(call) for call in calls]
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(run(call)) for call in calls]
    return [task.result() for task in tasks]
