"""Events kept compactly when nothing observes a run equal the ones observers get."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from convergent import (
    Agent,
    Event,
    Limits,
    ModelError,
    ModelResponded,
    ModelResponse,
    ModelSettings,
    RunState,
    ScriptedModel,
    TextDelta,
    Verification,
    tool,
)
from convergent.clock import Clock, use_clock
from convergent.events import ToolCallDelta, event_to_dict
from convergent.messages import Message, ToolSpec
from convergent.steering import SteeringQueue
from convergent.testing import answer, call, step


@tool
async def slow(n: int) -> str:
    """Answer after a while.

    Args:
        n: A number.
    """
    await asyncio.sleep(0.02 * n)
    return f"slow {n}"


@tool
async def quick(n: int) -> str:
    """Answer at once.

    Args:
        n: A number.
    """
    return f"quick {n}"


def scenario() -> tuple[Agent, SteeringQueue]:
    queue = SteeringQueue()
    turns = iter(range(100))

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        turn = next(turns)
        if turn == 0:
            calls = (call("slow", n=2), call("quick", n=1), call("slow", n=1))
            return step(*calls, content="three at once")
        if turn == 1:
            queue.send("mind the units")
            return step(call("nope"))
        if turn == 2:
            raise ModelError("HTTP 503: overloaded")
        return answer(f"answer {turn}")

    verdicts = iter([Verification(False, "too short"), Verification(True)])
    agent = Agent(
        ScriptedModel(reply),
        [slow, quick],
        verifier=lambda _: next(verdicts),
        limits=Limits(max_cycles=10),
        settings=ModelSettings(temperature=0.2),
    )
    return agent, queue


def without_time(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [{k: v for k, v in event_to_dict(e).items() if k != "time"} for e in events]


class Ticks(Clock):
    """Durations count readings of the monotonic clock, so both runs measure the same."""

    def __init__(self) -> None:
        self.readings = 0

    def monotonic(self) -> float:
        self.readings += 1
        return float(self.readings)


class Collect:
    """An observer that keeps every event but the streaming deltas (so nothing streams)."""

    receives_deltas = False

    def __init__(self) -> None:
        self.seen: list[Event] = []

    def on_event(self, event: Event, state: RunState) -> None:
        self.seen.append(event)


async def test_compact_events_equal_the_observed_ones() -> None:
    agent, queue = scenario()
    collect = Collect()
    agent.observers.append(collect)
    with use_clock(Ticks()):
        observed = await agent.run("t", run_id="r", steering=queue)
    seen = collect.seen
    assert list(observed.events) == seen

    agent, queue = scenario()
    with use_clock(Ticks()):
        kept = await agent.run("t", run_id="r", steering=queue)
    assert without_time(kept.events) == without_time(seen)
    kinds = [e.type for e in kept.events]
    assert kinds.count("tool_started") == 4 and kinds.count("tool_finished") == 4
    replies = [e for e in kept.events if isinstance(e, ModelResponded)]
    assert replies and all(e.settings == {"temperature": 0.2} for e in replies)
    assert kinds[-1] == "run_stopped"
    times = [e.time for e in kept.events]
    starts = {e.call_id: e.time for e in kept.events if e.type == "tool_started"}  # type: ignore[attr-defined]
    ends = {e.call_id: e.time for e in kept.events if e.type == "tool_finished"}  # type: ignore[attr-defined]
    assert all(ends[call] >= starts[call] for call in starts)
    assert times[0] <= times[-1]


async def test_a_run_that_records_nothing_keeps_no_events() -> None:
    agent = Agent(ScriptedModel(["done"]), record_events=False)
    result = await agent.run("t")
    assert list(result.events) == [] and repr(result).startswith("RunResult(")


async def test_a_streamed_run_keeps_every_event_but_the_deltas() -> None:
    agent, queue = scenario()
    seen: list[Event] = []
    observed = await agent.run("t", run_id="r", steering=queue, on_event=seen.append)
    deltas = [e for e in seen if isinstance(e, TextDelta | ToolCallDelta)]
    assert [e.text for e in deltas if isinstance(e, TextDelta)][:1] == ["three at once"]
    assert list(observed.events) == [e for e in seen if e not in deltas]
    responded = [e for e in observed.events if isinstance(e, ModelResponded)]
    assert responded and all(e.first_delta is not None for e in responded)
