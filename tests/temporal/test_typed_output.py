"""Typed output on Temporal: the workflow validates answers as the local loop does."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from convergent import Limits, RunResult, StopReason, build_agent
from convergent.stop import OUTPUT_FEEDBACK
from convergent.testing import call

from .conftest import replayer, scripted_spec

if TYPE_CHECKING:
    from convergent.temporal import TemporalRunner

pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal]

SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "integer"}},
    "required": ["total"],
}


def comparable(result: Any) -> dict[str, Any]:
    data = result.to_dict()
    data.pop("run_id")
    return data


def trajectory(result: RunResult) -> RunResult:
    """The result without what differs from run to run: its id, durations, events."""
    calls = tuple(dataclasses.replace(record, duration=0.0) for record in result.tool_calls)
    return dataclasses.replace(result, run_id="", tool_calls=calls, events=())


async def test_a_typed_run_on_temporal_validates_and_ends_as_in_process(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    responses = [call("calculator", expression="6*7"), "42", '{"total": "42"}', '{"total": 42}']
    made = scripted_spec(tmp_path, responses, output_schema=SCHEMA)
    local = await build_agent(made).run("calc", run_id="typed")
    run = await runner.start(made, "calc", run_id="typed-temporal")
    remote = await run.result()
    assert remote.stop_reason is StopReason.COMPLETED and remote.cycles == 4
    assert remote.output_data == {"total": 42}
    assert comparable(remote) == comparable(local)
    assert remote.messages and trajectory(remote) == trajectory(local)
    progress = await run.progress()
    verdicts = [e["passed"] for e in progress["events"] if e["type"] == "verified"]
    assert verdicts == [False, False]
    history = await run.handle.fetch_history()
    outcome = await replayer(runner).replay_workflow(history, raise_on_replay_failure=False)
    assert outcome.replay_failure is None


async def test_a_typed_run_on_temporal_that_stays_invalid_stops_at_its_limit(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    made = scripted_spec(
        tmp_path,
        ["42", "forty-two", "my best answer: 42"],
        output_schema=SCHEMA,
        limits=Limits(max_cycles=2),
    )
    run = await runner.start(made, "calc", run_id="typed-limit")
    remote, state, stored = await run.outcome()
    assert remote.stop_reason is StopReason.MAX_CYCLES
    assert remote.output == "my best answer: 42" and remote.output_after_stop
    assert remote.output_data is None and state.output_json is None
    assert stored.output_schema == SCHEMA
    notes = [m.content for m in state.messages if m.role == "user"][1:]
    assert notes == [
        OUTPUT_FEEDBACK.format(errors="(answer): 42 is not of type 'object'"),
        "Budget note: this run is near the end of its budget. Left: 1 of 2 cycles. Plan to "
        "finish: give your best answer before the budget runs out.",
        OUTPUT_FEEDBACK.format(
            errors="the answer is not valid JSON (line 1, column 1: Expecting value)"
        ),
    ]
