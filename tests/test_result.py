"""`RunResult.from_state`: the one way a result is made, by the loop and from a stored state."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from convergent import (
    Agent,
    Limits,
    RunResult,
    RunState,
    ScriptedModel,
    StopReason,
    UserError,
    calculator,
)
from convergent.durability.sqlite import RunStore
from convergent.events import RunStopped
from convergent.testing import call, scripted


class Reading(BaseModel):
    model_config = ConfigDict(strict=True)

    taken: datetime
    values: tuple[int, ...]


READING = '{"taken": "2024-05-01T12:00:00Z", "values": [1, 2]}'


def without_times(result: RunResult) -> RunResult:
    """The result with what differs from process to process set aside: tool durations."""
    calls = tuple(dataclasses.replace(record, duration=0.0) for record in result.tool_calls)
    return dataclasses.replace(result, tool_calls=calls, events=())


async def test_the_loops_result_is_the_one_its_stored_state_gives(tmp_path: Path) -> None:
    agent = Agent(
        scripted(call("calculator", expression="2*3"), "not json", READING),
        [calculator],
        output_type=Reading,
    )
    with RunStore(tmp_path / "runs.db") as store:
        ran = await agent.run("read", run_id="r", store=store)
        state = store.load("r")
    assert ran.stop_reason is StopReason.COMPLETED and ran.cycles == 3
    assert [record.result for record in ran.tool_calls] == ["6"]
    assert isinstance(ran.output_data, Reading) and ran.output_data.values == (1, 2)
    assert state.output_json == {"taken": "2024-05-01T12:00:00Z", "values": [1, 2]}
    rebuilt = RunResult.from_state(state, output=agent.output)
    assert ran.messages and rebuilt.messages == ran.messages
    assert without_times(rebuilt) == without_times(ran)


async def test_without_an_output_type_the_data_is_the_json() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    agent = Agent(ScriptedModel(['{"n": 3}']), output_schema=schema)
    state = agent.new_state("count")
    ran = await agent.run(state=state)
    assert ran.output_data == {"n": 3} == state.output_json
    assert RunResult.from_state(state) == dataclasses.replace(ran, events=())


async def test_a_stop_other_than_completed_has_no_data() -> None:
    agent = Agent(ScriptedModel(["nope"]), output_type=Reading, limits=Limits(max_cycles=1))
    state = agent.new_state("read")
    ran = await agent.run(state=state)
    assert ran.stop_reason is StopReason.MAX_CYCLES
    assert ran.output_data is None and state.output_json is None
    assert RunResult.from_state(state, output=agent.output).output_data is None


def test_a_state_that_has_not_stopped_has_no_result() -> None:
    with pytest.raises(UserError, match="no stop reason"):
        RunResult.from_state(RunState(run_id="r", task="t"))


@pytest.mark.parametrize(
    ("script", "limits", "rule"),
    [
        (["done"], Limits(), "answered"),
        ([call("calculator", expression="1+1")] * 5, Limits(), "max_repeated_calls"),
        (
            [call("calculator", expression=f"{n}+1") for n in range(5)],
            Limits(max_cycles=3),
            "max_cycles",
        ),
        (
            [call("calculator", expression=f"{n}+1") for n in range(5)],
            Limits(max_tool_calls=2),
            "max_tool_calls",
        ),
    ],
)
async def test_the_result_and_its_stop_event_name_the_rule_that_stopped_the_run(
    script: list[object], limits: Limits, rule: str
) -> None:
    result = await Agent(scripted(*script), [calculator], limits=limits).run("add")
    stopped = result.events[-1]
    assert isinstance(stopped, RunStopped)
    assert result.stop_rule == stopped.rule == result.to_dict()["stop_rule"] == rule
