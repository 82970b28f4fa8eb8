"""The stateless parts of a run's cycle: what a run needs of its agent, and helpers.

`convergent.loop.cycle.Run` does each step of a cycle; what it needs of its agent
(`LoopAgent`), how it bounds a request by the time left (`within`, `bounded`) and ends
it when a stop comes (`unless_stopped`), reads
steering as facts (`outside_facts`) and records a call (`record_of`) live here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from convergent.effects import Effect
from convergent.extensions import ActionGate, ContextPolicy, FollowUpGate, RunObserver, Verifier
from convergent.limits import Limits
from convergent.messages import Message, ToolCall, ToolSpec
from convergent.models.base import Model, ModelSettings
from convergent.output import OutputSpec
from convergent.policy import StopPolicy
from convergent.state import new_record
from convergent.steering import SteeringQueue, Taken
from convergent.stop import Facts
from convergent.tools import Tool

__all__ = [
    "STOPPED",
    "LoopAgent",
    "Stopped",
    "bounded",
    "last_text",
    "outside_facts",
    "record_of",
    "settings_fields",
    "spending_calls",
    "unless_stopped",
    "within",
]

T = TypeVar("T")


class LoopAgent(Protocol):
    """The agent as a run of the loop sees it: what `Run` reads of `convergent.Agent`.

    The run's machinery depends on this protocol rather than on `convergent.Agent`, which
    imports it, so that the loop's parts import no agent.
    """

    model: Model
    tools: dict[str, Tool]
    tool_specs: tuple[ToolSpec, ...]
    tool_names: tuple[str, ...]
    terminal_tools: frozenset[str]
    read_only_tools: dict[str, bool | None]
    tool_effects: dict[str, Effect]
    settings: ModelSettings | None
    limits: Limits
    policy: StopPolicy
    verifier: Verifier | None
    output: OutputSpec | None
    context_policy: ContextPolicy | None
    gate: ActionGate | None
    follow_up: FollowUpGate | None
    observers: list[RunObserver]
    record_events: bool
    parallel_tool_calls: bool


async def within(seconds: float | None, work: Awaitable[T]) -> T | None:
    """``work``'s result, or None when it did not finish within ``seconds`` (cancelled)."""
    if seconds is None:
        return await work
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            return await work
    except TimeoutError:
        if scope.expired():
            return None
        raise


class Stopped:
    """A stop came before the work was done (see `unless_stopped`)."""

    __slots__ = ()


STOPPED = Stopped()
"""What `unless_stopped` returns when a stop came first."""


async def unless_stopped(steering: SteeringQueue | None, work: Awaitable[T]) -> T | Stopped:
    """``work``'s result, or `STOPPED` (the work cancelled) when a stop comes first.

    Raises:
        Exception: What watching for a stop raised (a steering store that fails), when
            the work had not finished.
    """
    if steering is None:
        return await work
    doing = asyncio.ensure_future(work)
    watching = asyncio.ensure_future(steering.wait_for_stop())
    try:
        await asyncio.wait((doing, watching), return_when=asyncio.FIRST_COMPLETED)
    except GeneratorExit:
        # dropped by its owner and closed: a closing coroutine may not wait, only cancel
        doing.cancel()
        watching.cancel()
        raise
    except BaseException:
        await _cancelled(watching, doing)
        raise
    if doing.done():
        watching.cancel()  # a poll between sleeps: nothing to wait for
    else:
        await _cancelled(doing)  # a stop, or a failure to watch for one, came first
    failure = watching.exception() if watching.done() and not watching.cancelled() else None
    if doing.done() and not doing.cancelled():
        return doing.result()
    if failure is not None:
        raise failure
    return STOPPED


async def _cancelled(*tasks: asyncio.Future[Any]) -> None:
    """Cancel the unfinished ``tasks`` and wait until they end.

    Whatever they end with is theirs (the caller reads what it needs); a cancellation of
    the caller that comes meanwhile is raised once they ended, never lost.
    """
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return
    ended = asyncio.gather(*pending, return_exceptions=True)
    try:
        await asyncio.shield(ended)
    except asyncio.CancelledError:
        await asyncio.wait([ended])
        raise


def bounded(settings: ModelSettings | None, seconds: float | None) -> ModelSettings | None:
    """``settings`` with the request bounded by ``seconds`` (None: unbounded)."""
    if seconds is None:
        return settings
    given = settings.timeout if settings is not None else None
    if given is not None and given <= seconds:
        return settings
    return dataclasses.replace(settings or ModelSettings(), timeout=seconds)


def settings_fields(settings: ModelSettings | None) -> dict[str, Any] | None:
    """The settings a request was sent with, those that were set, as plain data.

    A JSON schema is given as its number of characters (the agent's spec keeps it whole).
    None when there are none.
    """
    if settings is None:
        return None
    fields: dict[str, Any] = {}
    for each in dataclasses.fields(settings):
        name, value = each.name, getattr(settings, each.name)
        unset = value is None or value is False or value == {}
        if unset or (name == "json_schema_name" and not settings.json_schema):
            continue
        if name in ("json_schema", "output_schema"):
            value = f"a JSON schema of {len(json.dumps(value))} characters"
        fields[name] = value
    return fields or None


def outside_facts(taken: Taken, paused: bool = False) -> Facts:
    """The steering commands taken (and a pause) as the facts `decide` reads."""
    stop, messages = taken.stop, taken.messages
    return Facts(
        stop_requested=stop is not None,
        stop_text=stop.text if stop is not None else "",
        redirect="\n\n".join(command.text for command in messages) if messages else None,
        paused=paused,
        roll_over=taken.roll_over,
    )


record_of = new_record
"""The record of one call that ended with ``outcome`` and ``text`` (`new_record`)."""


def last_text(messages: Sequence[Message]) -> str:
    """The model's last text in the conversation ("" if it wrote none)."""
    for message in reversed(messages):
        if message.role == "assistant" and message.content:
            return message.content
    return ""


def spending_calls(
    calls: Sequence[ToolCall], tools: Mapping[str, Tool], skipped: Mapping[int, str]
) -> int:
    """How many of the calls that run spend the run's budgets (at least one)."""
    spending = 0
    for position, call in enumerate(calls):
        tool = tools.get(call.name)
        if position not in skipped and tool is not None and tool.spends_budget:
            spending += 1
    return max(spending, 1)
