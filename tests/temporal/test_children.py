"""Agents called as tools in Temporal runs: each call a child workflow, budgets nested."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from convergent import AgentSpec, Limits, StopPolicy, StopReason, Usage
from convergent.messages import CallOutcome, ModelResponse, ToolCall
from convergent.spec import AgentToolSpec
from convergent.testing import answer, call, step, write_script
from convergent.testing.chat_server import ChatServer, completion

from .conftest import replayer, scripted_spec

if TYPE_CHECKING:
    from convergent.temporal import DevServer, TemporalRunner

pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal, pytest.mark.slow]


def ask(call_id: str, task: str, usage: int = 0) -> ModelResponse:
    """A parent's response that calls the ``researcher`` agent, with a fixed call id."""
    return step(call("researcher", call_id=call_id, task=task), usage=Usage(input_tokens=usage))


def researcher(folder: Path, responses: list[Any], **limits: Any) -> AgentToolSpec:
    """The child agent: the test tools, its own script."""
    return AgentToolSpec(
        name="researcher",
        description="Researches with the step tool.",
        agent=AgentSpec(
            model=write_script(folder / "child.json", *responses),
            tools=("fx:step",),
            limits=Limits(**limits),
            policy=StopPolicy(max_repeated_calls=5),
        ),
    )


def effects_in(log: Path) -> list[str]:
    return log.read_text().splitlines()


def runs_on(server: DevServer, db: Path, *options: str) -> str:
    """``convergent runs --temporal`` for the two latest runs: what it prints."""
    command = [str(Path(sys.executable).with_name("convergent")), "runs", "--limit", "2"]
    target = ["--temporal", server.address, "--db", str(db)]
    proc = subprocess.run(
        [*command, *target, *options], capture_output=True, text=True, timeout=60, check=True
    )
    return proc.stdout


async def test_a_child_agent_is_a_child_workflow_within_the_parents_budget(
    tmp_path: Path,
    runner: TemporalRunner,
    worker: None,
    effects: Path,
    temporal_server: DevServer,
    payload_db: Path,
) -> None:
    child = researcher(
        tmp_path,
        [call("step", n=1), answer("found: 41", usage=Usage(input_tokens=100))],
    )
    parent = scripted_spec(
        tmp_path,
        [ask("c1", "find the number", usage=10), answer("41", usage=Usage(input_tokens=20))],
        agents=(child,),
        limits=Limits(max_cycles=6, max_total_tokens=1000),
        policy=StopPolicy(max_repeated_calls=5),
    )
    run = await runner.start(parent, "delegate", run_id="kids")
    result = await run.result()
    assert result.stop_reason is StopReason.COMPLETED
    (record,) = result.tool_calls
    assert record.ok and record.result == "found: 41"
    assert result.usage.input_tokens == 10 + 100 + 20
    assert result.cycles == 2
    assert effects_in(effects) == ["step 1"]
    # the child ran as a child workflow, named after its caller's run, cycle and call
    handle = runner.client.get_workflow_handle("kids.1.c1")
    described = await handle.describe()
    assert described.parent_id == "kids"
    memo = await described.memo()
    assert (memo["parent_run_id"], memo["parent_call_id"]) == ("kids", "c1")
    assert memo["stop_reason"] == "completed"
    # with what the parent had left: 6 - 1 cycles, 1000 - 10 tokens
    done = await handle.result()
    assert done["recipe"]["limits"]["max_cycles"] == 5
    assert done["recipe"]["limits"]["max_total_tokens"] == 990
    assert done["recipe"]["workspace"] == str(tmp_path)
    # ``runs --temporal`` shows the child under its parent
    listed = json.loads(runs_on(temporal_server, payload_db, "--json"))
    assert sorted((run["run_id"], run["parent_run_id"] or "") for run in listed) == [
        ("kids", ""),
        ("kids.1.c1", "kids"),
    ]
    lines = runs_on(temporal_server, payload_db).splitlines()
    assert lines[1].startswith("kids ")
    assert lines[2].startswith("  kids.1.c1 ")
    # replaying the parent's history reaches the same decisions
    history = await run.handle.fetch_history()
    outcome = await replayer(runner).replay_workflow(history, raise_on_replay_failure=False)
    assert outcome.replay_failure is None


async def test_a_child_that_runs_out_of_cycles_is_a_failed_call_with_its_answer(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    child = researcher(
        tmp_path,
        [call("step", n=1), call("step", n=2), "best so far: step 2"],
    )
    parent = scripted_spec(
        tmp_path,
        [ask("c1", "count"), "the parent's answer after its stop"],
        agents=(child,),
        limits=Limits(max_cycles=3),
        policy=StopPolicy(max_repeated_calls=5),
    )
    run = await runner.start(parent, "delegate", run_id="kids-short")
    result = await run.result()
    (record,) = result.tool_calls
    # 3 - 1 = 2 cycles for the child: it stopped max_cycles, its answer came along
    assert record.outcome == CallOutcome.FAILED
    assert "stopped max_cycles" in record.result
    assert "best so far: step 2" in record.result
    # 1 own cycle + the child's 2 spend the parent's budget
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "the parent's answer after its stop"


async def test_a_child_an_earlier_attempt_finished_is_not_run_again(
    tmp_path: Path, runner: TemporalRunner, worker: None, effects: Path
) -> None:
    child = researcher(tmp_path, [call("step", n=1), "found: 41"])
    # the child of call c1 in cycle 1 of run "again" finished before its caller went on
    earlier = await runner.start(child.agent, "find the number", run_id="again.1.c1")
    assert (await earlier.result()).output == "found: 41"
    assert effects_in(effects) == ["step 1"]
    parent = scripted_spec(tmp_path, [ask("c1", "find the number"), "41"], agents=(child,))
    result = await (await runner.start(parent, "delegate", run_id="again")).result()
    assert result.stop_reason is StopReason.COMPLETED
    (record,) = result.tool_calls
    assert record.ok and record.result == "found: 41"
    # its step was not done a second time
    assert effects_in(effects) == ["step 1"]


async def test_a_child_an_earlier_attempt_started_is_waited_for_not_run_again(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    from convergent.temporal._children import CHILD_RESULT

    # the child asks a question, so it runs until the test answers it
    asking = researcher(tmp_path, [call("ask_user", question="which number?"), "found: 41"])
    child = asking.model_copy(
        update={"agent": asking.agent.model_copy(update={"tools": ("fx:step", "ask_user")})}
    )
    earlier = await runner.start(child.agent, "find the number", run_id="wait.1.c1")
    parent = scripted_spec(tmp_path, [ask("c1", "find the number"), "41"], agents=(child,))
    run = await runner.start(parent, "delegate", run_id="wait")
    # the parent's call found the child running: it waits for it in an activity
    async with asyncio.timeout(60):
        while True:
            if CHILD_RESULT in await scheduled_activities(run.handle):
                break
            await asyncio.sleep(0.1)
    await earlier.answer("the one after 40")
    result = await run.result()
    (record,) = result.tool_calls
    assert record.ok and record.result == "found: 41"
    # the child asked once: it was not started a second time
    child_run = await earlier.result()
    assert [r.name for r in child_run.tool_calls] == ["ask_user"]


async def scheduled_activities(handle: Any) -> list[str]:
    """The names of the activities a workflow has scheduled so far."""
    history = await handle.fetch_history()
    return [
        event.activity_task_scheduled_event_attributes.activity_type.name
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
    ]


async def test_a_child_that_did_not_finish_is_started_again(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    child = researcher(tmp_path, [call("step", n=1), "found: 41"])
    # an earlier attempt's child was terminated while it waited for an answer
    asking = child.agent.model_copy(
        update={
            "tools": ("ask_user",),
            "model": write_script(tmp_path / "asking.json", call("ask_user", question="?")),
        }
    )
    earlier = await runner.start(asking, "find the number", run_id="gone.1.c1")
    await earlier.handle.terminate("the parent was reset")
    parent = scripted_spec(tmp_path, [ask("c1", "find the number"), "41"], agents=(child,))
    result = await (await runner.start(parent, "delegate", run_id="gone")).result()
    (record,) = result.tool_calls
    assert record.ok and record.result == "found: 41"


def echoing(n: int, body: dict[str, Any]) -> bytes:
    """A child model that answers with its task."""
    return completion(f"did {body['messages'][-1]['content']}")


@pytest.mark.parametrize("ids", [("call/1", "call-1"), ("same", "same")], ids=["alike", "equal"])
async def test_two_calls_whose_ids_collide_run_two_child_workflows(
    tmp_path: Path, runner: TemporalRunner, worker: None, ids: tuple[str, str]
) -> None:
    with ChatServer(echoing) as server:
        child = AgentToolSpec(
            name="researcher",
            description="Does a task.",
            agent=AgentSpec(model="openai:stub", base_url=f"{server.url}/v1"),
        )
        calls = tuple(
            ToolCall(id=call_id, name="researcher", arguments={"task": task})
            for call_id, task in zip(ids, ("north", "south"), strict=True)
        )
        parent = scripted_spec(
            tmp_path, [ModelResponse(tool_calls=calls), "both done"], agents=(child,)
        )
        result = await (await runner.start(parent, "split", run_id=f"collide-{ids[0]}")).result()
        tasks = sorted(body["messages"][-1]["content"] for body in server.requests)
    # the second call once took the first child's answer as its own, never running
    assert tasks == ["north", "south"]
    assert [(r.ok, r.result) for r in result.tool_calls] == [
        (True, "did north"),
        (True, "did south"),
    ]


async def test_a_child_whose_call_times_out_stops_and_its_spend_counts(
    tmp_path: Path, runner: TemporalRunner, worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVERGENT_TEST_STEP_SECONDS", "20")
    slow = researcher(
        tmp_path, [step(call("step", n=1), usage=Usage(input_tokens=700)), "never requested"]
    )
    child = slow.model_copy(update={"timeout": 2.0})
    parent = scripted_spec(
        tmp_path, [ask("c1", "find the number", usage=10), "it timed out"], agents=(child,)
    )
    result = await (await runner.start(parent, "delegate", run_id="slow-child")).result()
    (record,) = result.tool_calls
    # the call's timeout asked the child to stop and interrupted its step
    assert record.result == (
        "researcher failed: the agent was stopped (its caller's timeout of 2s for this "
        "call); its final answer: (none)"
    )
    assert result.usage.input_tokens == 710
    assert result.stop_reason is StopReason.COMPLETED


async def test_max_cycles_holds_for_three_levels_of_child_workflows(
    tmp_path: Path, runner: TemporalRunner, worker: None, effects: Path
) -> None:
    grandchild = AgentToolSpec(
        name="counter",
        description="Counts with the step tool.",
        agent=AgentSpec(
            model=write_script(
                tmp_path / "grandchild.json", *[call("step", n=n) for n in range(9)], "counted"
            ),
            tools=("fx:step",),
            policy=StopPolicy(max_repeated_calls=5),
        ),
    )
    child = AgentToolSpec(
        name="researcher",
        description="Asks the counter.",
        agent=AgentSpec(
            model=write_script(
                tmp_path / "child.json", call("counter", call_id="g1", task="count"), "found"
            ),
            agents=(grandchild,),
            policy=StopPolicy(max_repeated_calls=5),
        ),
    )
    parent = scripted_spec(
        tmp_path,
        [ask("c1", "find"), ask("c2", "find again"), "done"],
        agents=(child,),
        limits=Limits(max_cycles=6),
    )
    result = await (await runner.start(parent, "delegate", run_id="tree")).result()
    # 1 cycle of the parent's, 1 of the child's, 4 of the grandchild's: the budget is
    # spent after the first call (each level used to report its own cycles alone)
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.cycles == 1
    assert len(effects_in(effects)) == 4
    grandchild_run = await runner.run("tree.1.c1.1.g1").outcome()
    assert grandchild_run[0].cycles == 4
