"""Child runs of agents called as tools, in the run store: linked, and not run twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import convergent
from convergent import Agent, ModelResponse, RunResult, ScriptedModel, StopReason, tool
from convergent.durability.sqlite import RunStore
from convergent.events import Event, RunStopped
from convergent.messages import ToolCall, Usage
from convergent.state import RunState
from convergent.testing import answer, call, step

USED = Usage(input_tokens=10, requests=1)
"""What each scripted response reports, so usage rolls up from the child to its parent."""


class Crash(BaseException):
    """The process dies (raised past every handler of the loop)."""


class CrashOnceAtStop:
    """Kills the process right after the child run stored its stop, the first time."""

    def __init__(self) -> None:
        self.armed = True

    def on_event(self, event: Event, state: RunState) -> None:
        if isinstance(event, RunStopped) and self.armed:
            self.armed = False
            raise Crash


def counted_child(invocations: list[str], observers: Any = ()) -> Agent:
    @tool
    def count(what: str) -> str:
        """Count something.

        Args:
            what: What to count.
        """
        invocations.append(what)
        return "3"

    return Agent(
        ScriptedModel(
            [step(call("count", what="apples"), usage=USED), answer("3 apples", usage=USED)]
        ),
        [count],
        observers=observers,
    )


async def resume(parent: Agent, store: RunStore, claimed: bool) -> RunResult:
    """Continue the run ``parent`` with the store, or under a claim taken on it first."""
    if not claimed:
        return await convergent.resume("parent", store=store, agent=parent)
    claim = store.claim("parent")
    try:
        return await parent.run(state=claim.load("parent"), store=claim)
    finally:
        claim.release()


async def test_a_child_run_is_stored_linked_to_its_parent_call(tmp_path: Path) -> None:
    invocations: list[str] = []
    parent = Agent(
        ScriptedModel(
            [
                step(call("counter", task="count apples"), usage=USED),
                answer("there are 3 apples", usage=USED),
            ]
        ),
        [counted_child(invocations).as_tool("counter", "Counts things.")],
    )
    with RunStore(tmp_path / "runs.db") as store:
        result = await parent.run("how many apples?", run_id="parent", store=store)
        (child,) = store.children("parent")
        top = [run.run_id for run in store.iter_runs(top_only=True)]
        stored_parent = store.get_run("parent")
    assert result.stop_reason is StopReason.COMPLETED
    (record,) = result.tool_calls
    assert (child.run_id, child.parent_run_id, child.parent_call_id) == (
        f"parent.1.{record.id}",
        "parent",
        record.id,
    )
    assert child.stop_reason is StopReason.COMPLETED and child.output == "3 apples"
    assert child.task == "count apples"
    assert top == ["parent"] and stored_parent.parent_run_id is None
    assert stored_parent.usage.total_tokens == 40  # the parent's two requests and the child's two


@pytest.mark.parametrize("claimed", [False, True], ids=["store", "claim"])
async def test_a_resumed_parent_reuses_the_result_of_a_child_that_had_finished(
    tmp_path: Path, claimed: bool
) -> None:
    invocations: list[str] = []
    child = counted_child(invocations, observers=[CrashOnceAtStop()])
    counting = call("counter", task="count apples")
    model = ScriptedModel(
        [
            step(counting, usage=USED),
            answer("there are 3 apples", usage=USED),
        ]
    )
    parent = Agent(model, [child.as_tool("counter", "Counts things.")])
    with RunStore(tmp_path / "runs.db") as store:
        with pytest.raises(Crash):
            await parent.run("how many apples?", run_id="parent", store=store)
        # the child had stored its stop; the parent had not recorded the call's result
        assert store.get_run("parent").stop_reason is None
        assert [c.id for c in store.load("parent").pending_calls()] == [counting.id]
        assert store.children("parent")[0].stop_reason is StopReason.COMPLETED
        result = await resume(parent, store, claimed)
        children = store.children("parent")
    assert invocations == ["apples"]  # the child's tool ran once
    assert result.stop_reason is StopReason.COMPLETED
    assert [(r.ok, r.result) for r in result.tool_calls] == [(True, "3 apples")]
    assert result.output == "there are 3 apples"
    assert len(children) == 1
    assert result.usage.total_tokens == 40


@pytest.mark.parametrize("claimed", [False, True], ids=["store", "claim"])
async def test_a_resumed_parent_continues_a_child_that_had_not_finished(
    tmp_path: Path, claimed: bool
) -> None:
    invocations: list[str] = []

    @tool
    def count(what: str) -> str:
        """Count something.

        Args:
            what: What to count.
        """
        invocations.append(what)
        if len(invocations) == 1:
            raise Crash
        return "3"

    child_model = ScriptedModel(
        [
            step(call("count", what="apples"), usage=USED),
            step(call("count", what="pears"), usage=USED),
            "3 apples, 3 pears",
        ]
    )
    child = Agent(child_model, [count])
    parent = Agent(
        ScriptedModel([step(call("counter", task="count fruit"), usage=USED), "3 and 3"]),
        [child.as_tool("counter", "Counts things.")],
    )
    with RunStore(tmp_path / "runs.db") as store:
        with pytest.raises(Crash):
            await parent.run("how much fruit?", run_id="parent", store=store)
        assert store.children("parent")[0].stop_reason is None
        result = await resume(parent, store, claimed)
        (stored_child,) = store.children("parent")
    # the interrupted call was not retried (its tool is not idempotent); the child went on
    assert invocations == ["apples", "pears"]
    assert stored_child.stop_reason is StopReason.COMPLETED
    assert [(r.ok, r.result) for r in result.tool_calls] == [(True, "3 apples, 3 pears")]


def echoing_child(ran: list[str]) -> Agent:
    """A child that answers with its task, noting each task it ran."""

    def reply(messages: Any, tools: Any) -> ModelResponse:
        task = messages[-1].content
        ran.append(task)
        return answer(f"did {task}", usage=USED)

    return Agent(ScriptedModel(reply))


@pytest.mark.parametrize(
    "ids", [("call/1", "call-1"), ("same", "same"), ("", "")], ids=["alike", "equal", "empty"]
)
async def test_two_calls_whose_ids_collide_run_two_children(
    tmp_path: Path, ids: tuple[str, str]
) -> None:
    ran: list[str] = []
    calls = tuple(
        ToolCall(id=call_id, name="helper", arguments={"task": task})
        for call_id, task in zip(ids, ("north", "south"), strict=True)
    )
    parent = Agent(
        ScriptedModel([ModelResponse(tool_calls=calls, usage=USED), "both done"]),
        [echoing_child(ran).as_tool("helper", "Does a task.")],
    )
    with RunStore(tmp_path / "runs.db") as store:
        result = await parent.run("split", run_id="parent", store=store)
        children = sorted((c.task, c.output) for c in store.children("parent"))
    # the second call once took the first child's answer as its own, never running
    assert sorted(ran) == ["north", "south"]
    assert [(r.ok, r.result) for r in result.tool_calls] == [
        (True, "did north"),
        (True, "did south"),
    ]
    assert children == [("north", "did north"), ("south", "did south")]
    assert len({r.id for r in result.tool_calls}) == 2


async def test_a_resumed_parent_counts_a_child_it_had_recorded_but_not_stored(
    tmp_path: Path,
) -> None:
    @tool
    def crash() -> str:
        """Crash the process."""
        raise Crash

    invocations: list[str] = []
    child = counted_child(invocations)  # two requests of 10 tokens, then "3 apples"
    parent = Agent(
        ScriptedModel(
            [
                step(call("counter", task="count apples"), call("crash"), usage=USED),
                answer("there are 3 apples", usage=USED),
            ]
        ),
        [child.as_tool("counter", "Counts things."), crash],
        parallel_tool_calls=False,
    )
    with RunStore(tmp_path / "runs.db") as store:
        with pytest.raises(Crash):
            await parent.run("how many apples?", run_id="parent", store=store)
        # the child's call was recorded, then the process died before its next boundary
        stored = store.load("parent")
        result = await convergent.resume("parent", store=store, agent=parent)
    assert stored.usage.total_tokens == 30  # the parent's request and the child's two
    assert stored.monitor.budget.child_cycles == 2
    assert invocations == ["apples"]
    assert [(r.name, r.ok) for r in result.tool_calls] == [("counter", True), ("crash", False)]
    assert result.usage.total_tokens == 40  # 10 of them were lost
