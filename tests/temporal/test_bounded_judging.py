"""Judging large results and typed answers inside the workflow ends, well within the
deadlock detector's 2 seconds: no workflow task fails, no run is left running."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from convergent import Limits, StopReason
from convergent.messages import ModelResponse
from convergent.testing import call, step

from .conftest import replayer, scripted_spec

if TYPE_CHECKING:
    from convergent.temporal import TemporalRun, TemporalRunner

pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal, pytest.mark.slow]

TOOLS = ("fx:log", "fx:digits")


async def ended(run: TemporalRun, runner: TemporalRunner) -> Any:
    """The run's result, once it ended; no workflow task failed, and its history replays."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowExecutionStatus

    result = await asyncio.wait_for(run.result(), 180)
    description = await run.handle.describe()
    assert description.status is WorkflowExecutionStatus.COMPLETED
    history = await run.handle.fetch_history()
    failed = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert failed == []
    replayed = await replayer(runner).replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None
    return result


def batch(name: str, count: int, kb: int) -> ModelResponse:
    return step(*(call(name, call_id=f"{name}-{n}", n=n, kb=kb) for n in range(count)))


async def test_thirty_parallel_reads_of_large_logs_end(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    # then four of the logs read again, every line stamped anew: compared with their
    # previous result up to the step's bound on the differences examined
    responses = [batch("log", 30, 300), batch("log", 4, 300), "read them all"]
    made = scripted_spec(tmp_path, responses, tools=TOOLS, limits=Limits(max_cycles=5))
    run = await runner.start(made, "read the logs", run_id="thirty-logs")
    result = await ended(run, runner)
    assert result.stop_reason is StopReason.COMPLETED, result.stop_detail
    assert len(result.tool_calls) == 34


async def test_reads_of_large_results_of_digits_end(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    responses = [call("digits", n=1, kb=262)] * 3 + [batch("digits", 10, 262), "counted"]
    made = scripted_spec(tmp_path, responses, tools=TOOLS, limits=Limits(max_cycles=6))
    run = await runner.start(made, "count the sevens", run_id="digits")
    result = await ended(run, runner)
    assert result.stop_reason is StopReason.COMPLETED, result.stop_detail
    assert len(result.tool_calls) == 13


MULTIPLYING: dict[str, Any] = {
    "$defs": {
        **{f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}] * 2} for i in range(30)},
        "a30": {"type": "string"},
    },
    "$ref": "#/$defs/a0",
}


async def test_a_typed_answer_whose_check_takes_too_long_is_refused_in_time(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    made = scripted_spec(
        tmp_path,
        ["1", "2", "my best answer"],
        tools=TOOLS,
        output_schema=MULTIPLYING,
        limits=Limits(max_cycles=2),
    )
    run = await runner.start(made, "answer", run_id="typed-slow")
    result = await ended(run, runner)
    assert result.stop_reason is StopReason.MAX_CYCLES
    progress = await run.progress()
    feedback = [e["feedback"] for e in progress["events"] if e["type"] == "verified"]
    assert feedback and all("cannot be checked" in text for text in feedback), feedback
