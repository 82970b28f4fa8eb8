"""Agents called as tools (`Agent.as_tool`): nested budgets, failures, parallel children."""

from __future__ import annotations

import asyncio
from typing import Any

from convergent import (
    Agent,
    Limits,
    ModelResponse,
    ScriptedModel,
    StopReason,
    Usage,
    calculator,
    tool,
)
from convergent.budget import shared
from convergent.messages import CallOutcome
from convergent.testing import answer, call, scripted, step


def ask(task: str, usage: int = 0) -> ModelResponse:
    return step(call("helper", task=task), usage=Usage(input_tokens=usage, requests=1))


def calculating(n: int) -> list[ModelResponse]:
    """Responses that call the calculator ``n`` times with different expressions."""
    return [step(call("calculator", expression=f"{i}+1")) for i in range(n)]


async def test_child_gets_the_remaining_cycles_and_they_count_against_the_parent() -> None:
    child = Agent(ScriptedModel([*calculating(4), "best so far: 4"]), [calculator])
    parent = Agent(
        ScriptedModel([ask("count"), "the parent's answer after its stop"]),
        [child.as_tool("helper", "Counts.")],
        limits=Limits(max_cycles=5),
    )
    result = await parent.run("delegate")
    (record,) = result.tool_calls
    # the child had 5 - 1 = 4 cycles: it stopped max_cycles and its answer came along
    assert record.outcome == CallOutcome.FAILED
    assert "stopped max_cycles" in record.result
    assert "best so far: 4" in record.result
    # 1 own cycle + 4 of the child's: the parent's cycle budget is spent
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.cycles == 1
    assert result.output == "the parent's answer after its stop"


async def test_parent_stops_on_its_token_budget_after_the_childs_usage() -> None:
    child = Agent(ScriptedModel([{"content": "42", "usage": {"input_tokens": 995}}]))
    parent = Agent(
        ScriptedModel([ask("answer", usage=10), "never requested"]),
        [child.as_tool("helper", "Answers.")],
        limits=Limits(max_total_tokens=1000),
        final_answer=False,
    )
    result = await parent.run("delegate")
    (record,) = result.tool_calls
    assert record.ok and record.result == "42"
    assert result.usage.total_tokens == 1005
    assert result.usage.requests == 2
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert result.cycles == 1


async def test_child_token_budget_is_what_the_parent_has_left() -> None:
    # 1000 - 10 = 990 tokens left: the child's first response (995) uses them up
    child = Agent(
        ScriptedModel(
            [
                step(
                    call("calculator", expression="1+1"),
                    usage=Usage(input_tokens=995, requests=1),
                ),
                "never requested",
            ]
        ),
        [calculator],
        final_answer=False,
    )
    parent = Agent(
        ScriptedModel([ask("answer", usage=10)]),
        [child.as_tool("helper", "Answers.")],
        limits=Limits(max_total_tokens=1000),
        final_answer=False,
    )
    result = await parent.run("delegate")
    (record,) = result.tool_calls
    assert not record.ok
    assert "stopped budget_exhausted" in record.result
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED


async def test_a_failed_child_is_a_tool_failure_the_parent_recovers_from() -> None:
    looping = [step(call("calculator", expression="1+1")) for _ in range(4)]
    child = Agent(ScriptedModel([*looping, "2, probably"]), [calculator])
    parent = Agent(
        ScriptedModel([ask("add"), "the helper got stuck; 1+1 is 2"]),
        [child.as_tool("helper", "Adds.")],
    )
    result = await parent.run("delegate")
    (record,) = result.tool_calls
    assert record.outcome == CallOutcome.FAILED and not record.fatal
    assert record.result.startswith("helper failed: the agent stopped stalled")
    assert record.result.endswith("its final answer: 2, probably")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "the helper got stuck; 1+1 is 2"


async def test_children_of_one_response_run_in_parallel_and_their_usage_adds_up() -> None:
    arrived = asyncio.Barrier(2)

    @tool(timeout=5)
    async def meet(who: str) -> str:
        """Wait until the other child arrives.

        Args:
            who: Who arrives.
        """
        await arrived.wait()
        return f"{who} met"

    def child_model(messages: Any, tools: Any) -> ModelResponse:
        task = messages[0].content
        if messages[-1].role == "tool":
            return answer(f"{task}: {messages[-1].content}", usage=Usage(input_tokens=7))
        return step(call("meet", who=task), usage=Usage(input_tokens=5))

    child = Agent(ScriptedModel(child_model), [meet])
    helper = child.as_tool("helper", "Meets.")
    parent = Agent(
        scripted(step(call("helper", task="a"), call("helper", task="b")), "both met"),
        [helper],
    )
    result = await parent.run("delegate", run_id="p")
    assert [(r.ok, r.result) for r in result.tool_calls] == [
        (True, "a: a met"),
        (True, "b: b met"),
    ]
    assert result.usage.total_tokens == 24
    assert result.stop_reason is StopReason.COMPLETED


async def test_the_optional_context_reaches_the_child() -> None:
    seen: list[str] = []

    def child_model(messages: Any, tools: Any) -> ModelResponse:
        seen.append(messages[-1].content)
        return answer("done")

    child = Agent(ScriptedModel(child_model))
    helper = child.as_tool("helper", "Helps.")
    assert set(helper.parameters["properties"]) == {"task", "context"}
    assert helper.parameters["required"] == ["task"]
    assert await helper.call({"task": "sum it", "context": "the numbers are 1 and 2"}) == "done"
    assert seen == ["sum it\n\nContext:\nthe numbers are 1 and 2"]


async def test_children_of_one_response_share_what_is_left_and_never_overspend_it() -> None:
    counted: list[str] = []

    def child_model(messages: Any, tools: Any) -> ModelResponse:
        task = messages[0].content
        counted.append(task)
        return step(
            call("calculator", expression=f"{len(counted)}+1"), usage=Usage(input_tokens=10)
        )

    child = Agent(ScriptedModel(child_model), [calculator], final_answer=False)
    parent = Agent(
        scripted(step(call("helper", task="a"), call("helper", task="b")), "both stopped"),
        [child.as_tool("helper", "Calculates.")],
        limits=Limits(max_cycles=7, max_total_tokens=400),
        final_answer=False,
    )
    result = await parent.run("delegate")
    # 7 - 1 = 6 cycles and 400 tokens were left; each child had half: 3 cycles, 200 tokens
    assert sorted(counted) == ["a"] * 3 + ["b"] * 3
    assert [r.ok for r in result.tool_calls] == [False, False]
    assert all("stopped max_cycles" in r.result for r in result.tool_calls)
    assert result.usage.total_tokens == 60 <= 400
    assert result.stop_reason is StopReason.MAX_CYCLES


def test_a_share_divides_cycles_tokens_and_cost_but_not_time() -> None:
    left = Limits(max_cycles=7, max_total_tokens=125, max_seconds=30.0, max_cost=0.9)
    assert shared(left, 2) == Limits(
        max_cycles=3, max_total_tokens=62, max_seconds=30.0, max_cost=0.45
    )
    assert shared(left, 1) == left
    assert shared(Limits(max_cycles=None), 3).max_cycles is None
