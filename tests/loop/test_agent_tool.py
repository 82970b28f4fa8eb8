"""Agents called as tools (`Agent.as_tool`): nested budgets, failures, parallel children."""

from __future__ import annotations

import asyncio
from typing import Any

from convergent import (
    Agent,
    Limits,
    ModelResponse,
    ScriptedModel,
    StopPolicy,
    StopReason,
    Usage,
    calculator,
    tool,
)
from convergent.events import CycleStarted, Event
from convergent.limits import shared
from convergent.messages import CallOutcome
from convergent.state import RunState
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
        policy=StopPolicy(final_answer=False),
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
        policy=StopPolicy(final_answer=False),
    )
    parent = Agent(
        ScriptedModel([ask("answer", usage=10)]),
        [child.as_tool("helper", "Answers.")],
        limits=Limits(max_total_tokens=1000),
        policy=StopPolicy(final_answer=False),
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

    child = Agent(ScriptedModel(child_model), [calculator], policy=StopPolicy(final_answer=False))
    parent = Agent(
        scripted(step(call("helper", task="a"), call("helper", task="b")), "both stopped"),
        [child.as_tool("helper", "Calculates.")],
        limits=Limits(max_cycles=7, max_total_tokens=400),
        policy=StopPolicy(final_answer=False),
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


# -- budgets hold for the whole tree of runs ------------------------------------------


class Cycles:
    """Counts every cycle of the runs it observes (a parent's observers reach its children)."""

    def __init__(self) -> None:
        self.count = 0

    def on_event(self, event: Event, state: RunState) -> None:
        if isinstance(event, CycleStarted):
            self.count += 1


def delegating(tool_name: str) -> ScriptedModel:
    """A model that calls ``tool_name`` at every request, or answers when it has none."""

    def reply(messages: Any, tools: Any) -> ModelResponse:
        if not tools:
            return answer("the best so far", usage=Usage(input_tokens=1, requests=1))
        return step(call(tool_name, task="go deeper"), usage=Usage(input_tokens=1, requests=1))

    return ScriptedModel(reply)


async def test_max_cycles_holds_for_three_levels_of_agents() -> None:
    cycles = Cycles()
    grandchild = Agent(delegating("calculator"), [calculator], observers=[cycles])
    child = Agent(delegating("grandchild"), [grandchild.as_tool("grandchild", "Goes.")])
    child.observers.append(cycles)
    parent = Agent(
        delegating("child"),
        [child.as_tool("child", "Goes.")],
        limits=Limits(max_cycles=10),
        observers=[cycles],
    )
    result = await parent.run("go")
    # the grandchild's cycles count toward its parent and its grandparent: 10 in all
    # (when each level reported only its own cycles, these 3 levels made 23)
    assert cycles.count == 10
    assert result.stop_reason is StopReason.MAX_CYCLES


async def test_a_self_calling_agent_stops_within_its_budget_and_its_depth() -> None:
    requests: list[int] = []
    cycles = Cycles()

    def reply(messages: Any, tools: Any) -> ModelResponse:
        requests.append(len(messages))
        if not tools:
            return answer("the best so far")
        return step(call("me", task="again"))

    agent = Agent(ScriptedModel(reply), limits=Limits(max_cycles=20), observers=[cycles])
    agent.tools["me"] = agent.as_tool("me", "Calls itself.", max_depth=3)
    agent.tool_specs = tuple(t.spec for t in agent.tools.values())
    result = await agent.run("go")
    assert cycles.count == 20  # 6,613 requests at max_cycles=25 when each level counted its own
    # a run that stops on a budget asks once more for its answer, and each child run
    # starts from a cycle of its parent: 20 cycles and 21 runs at most
    assert len(requests) <= 20 + 21
    assert result.stop_reason is StopReason.MAX_CYCLES


async def test_a_call_past_the_depth_limit_fails_without_running() -> None:
    ran: list[str] = []

    @tool
    def leaf(task: str) -> str:
        """Do it.

        Args:
            task: What.
        """
        ran.append(task)
        return "done"

    deepest = Agent(scripted(step(call("leaf", task="x")), "leaf done"), [leaf])
    middle = Agent(
        scripted(step(call("deepest", task="x")), "deepest did not run"),
        [deepest.as_tool("deepest", "Goes.", max_depth=1)],
    )
    top = Agent(
        scripted(step(call("middle", task="x")), "middle answered"),
        [middle.as_tool("middle", "Goes.", max_depth=1)],
    )
    result = await top.run("go")
    assert result.tool_calls[0].result == "deepest did not run"
    # the middle run is 1 level down: its call of `deepest` was refused
    assert ran == []
    assert result.stop_reason is StopReason.COMPLETED


async def test_the_depth_limit_is_said_to_the_model() -> None:
    model = ScriptedModel([step(call("me", task="again")), "fine, alone"])
    agent = Agent(model)
    made = agent.as_tool("me", "Calls itself.", max_depth=0)
    agent.tools["me"] = made
    agent.tool_specs = (made.spec,)
    result = await agent.run("go")
    (record,) = result.tool_calls
    assert record.outcome == CallOutcome.FAILED and not record.fatal
    assert record.result == (
        "me failed: not run: agents called as tools nest at most 0 levels deep (max_depth), "
        "and this run is 0 levels down; answer without it"
    )


# -- what a child spends counts, whether it ends or not -------------------------------


async def test_a_child_whose_call_times_out_counts_what_it_spent() -> None:
    @tool
    async def wait(seconds: float) -> str:
        """Wait.

        Args:
            seconds: How long.
        """
        await asyncio.sleep(seconds)
        return "waited"

    child = Agent(
        ScriptedModel([step(call("wait", seconds=60), usage=Usage(input_tokens=700))]),
        [wait],
    )
    parent = Agent(
        scripted(ask("wait", usage=10), "it timed out"),
        [child.as_tool("helper", "Waits.", timeout=0.5)],
    )
    result = await parent.run("delegate")
    (record,) = result.tool_calls
    assert record.result == "helper timed out after 0.5s"
    assert result.usage.total_tokens == 710  # the child's 700 were lost
    assert result.stop_reason is StopReason.COMPLETED


async def test_a_child_that_crashes_counts_what_it_spent() -> None:
    def child_model(messages: Any, tools: Any) -> ModelResponse:
        if messages[-1].role == "tool":
            raise RuntimeError("the child's model crashed")
        return step(call("calculator", expression="1+1"), usage=Usage(input_tokens=700))

    child = Agent(ScriptedModel(child_model), [calculator])
    parent = Agent(
        scripted(ask("add", usage=10), "it crashed"),
        [child.as_tool("helper", "Adds.")],
        limits=Limits(max_cycles=10),
    )
    result = await parent.run("delegate")
    (record,) = result.tool_calls
    assert record.result == "helper raised RuntimeError: the child's model crashed"
    assert result.usage.total_tokens == 710
    assert result.stop_reason is StopReason.COMPLETED


async def test_max_tool_calls_holds_for_the_tree_of_agents() -> None:
    ran: list[str] = []

    @tool
    def counted(n: int) -> str:
        """Count one call.

        Args:
            n: The call's number.
        """
        ran.append(f"counted {n}")
        return f"call {n} counted"

    def working(messages: Any, tools: Any) -> ModelResponse:
        done = sum(1 for m in messages if m.role == "tool")
        if not tools or done >= 5:
            return answer(f"{done} calls done")
        return step(call("counted", n=len(ran)))

    child = Agent(ScriptedModel(working), [counted])
    helper = child.as_tool("helper", "Does work.")

    def delegated(messages: Any, tools: Any) -> ModelResponse:
        ran.append("helper")
        return answer("done") if not tools else step(call("helper", task=f"work {len(ran)}"))

    parent = Agent(ScriptedModel(delegated), [helper], limits=Limits(max_tool_calls=10))
    result = await parent.run("work")
    # the parent's calls of its helper and the helpers' own calls: 10 in all (49 when
    # each run counted only its own)
    assert (
        len([entry for entry in ran if entry.startswith("counted")]) + len(result.tool_calls) == 10
    )
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert "max_tool_calls=10" in result.stop_detail
