"""Big conversations and big items on Temporal: the history stays small, a too-big item
ends the run with a stop that names the limit, and nothing wedges a workflow."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from convergent import Limits, StopReason
from convergent.exceptions import UserError
from convergent.testing import call

from .conftest import replayer, scripted_spec

if TYPE_CHECKING:
    from temporalio.client import WorkflowHistory

    from convergent.temporal import DevServer, TemporalRunner

pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal]

LIMIT_TEXT = "over the 2 MB limit on one item of a Temporal run"


def bytes_per_cycle(history: WorkflowHistory) -> list[int]:
    """Bytes of history each cycle adds, from one model request to the next."""
    cycles: list[int] = []
    for event in history.events:
        scheduled = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and (
            scheduled.activity_type.name == "convergent.model_request"
        ):
            cycles.append(0)
        if cycles:
            cycles[-1] += event.ByteSize()
    return cycles


def collect(cycles: int, kb: int) -> list[object]:
    return [call("bulk", n=n, kb=kb) for n in range(cycles)] + ["collected"]


async def test_history_bytes_per_cycle_do_not_grow_with_the_conversation(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    made = scripted_spec(tmp_path, collect(12, 50))
    run = await runner.start(made, "collect the items", run_id="flat")
    result = await asyncio.wait_for(run.result(), 120)
    assert result.stop_reason is StopReason.COMPLETED, result.stop_detail
    history = await run.handle.fetch_history()
    per_cycle = bytes_per_cycle(history)
    assert len(per_cycle) == 13
    # the conversation grows by 50 KB a cycle (600 KB at the end); what each cycle
    # writes to the history does not: ids and times differ by a few bytes, no more
    steady = per_cycle[1:-1]
    assert max(steady) - min(steady) <= 256, per_cycle
    assert max(steady) < 50 * 1024, per_cycle
    # the whole history is smaller than the conversation
    assert sum(per_cycle) < 600 * 1024
    replaying = replayer(runner)
    replayed = await replaying.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_history_size_grows_by_the_same_bytes_per_cycle_at_any_length(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    sizes = {}
    for cycles in (4, 8, 16):
        made = scripted_spec(tmp_path, collect(cycles, 40), limits=Limits(max_cycles=40))
        run = await runner.start(made, "collect the items", run_id=f"length-{cycles}")
        assert (await asyncio.wait_for(run.result(), 120)).cycles == cycles + 1
        history = await run.handle.fetch_history()
        sizes[cycles] = sum(event.ByteSize() for event in history.events)
    # each of the 4 cycles from 4 to 8 adds what each of the 8 from 8 to 16 adds,
    # though the conversation at 16 cycles is twice that at 8
    early = (sizes[8] - sizes[4]) / 4
    late = (sizes[16] - sizes[8]) / 8
    assert abs(late - early) <= 64, sizes


@pytest.mark.slow
async def test_a_run_whose_conversation_passes_the_payload_limit_completes(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    # 40 results of 300 KB: a 12 MB conversation, six times Temporal's limit on one payload
    made = scripted_spec(tmp_path, collect(40, 300), limits=Limits(max_cycles=50))
    run = await runner.start(made, "collect the items", run_id="twelve-mb")
    await run.steer("message", "take your time")
    result = await asyncio.wait_for(run.result(), 240)
    assert result.stop_reason is StopReason.COMPLETED, result.stop_detail
    assert (result.cycles, result.output) == (41, "collected")
    assert [len(c.result) for c in result.tool_calls] == [
        len(f"item {n}: ") + 300 * 1024 for n in range(40)
    ]
    history = await run.handle.fetch_history()
    # a few KB a cycle (references and small payloads), where the conversation is 12 MB
    assert sum(event.ByteSize() for event in history.events) < 41 * 8 * 1024
    events = (await run.progress())["events"]
    finished = [e for e in events if e["type"] == "tool_finished"]
    assert len(finished) == 40
    assert all(len(e["result"]) < 2100 for e in finished)  # previews in the query


async def test_a_tool_result_over_the_item_limit_ends_the_run_tool_error(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    made = scripted_spec(tmp_path, [call("bulk", n=1, kb=3 * 1024), "unused"])
    run = await runner.start(made, "fetch it", run_id="big-result")
    result = await asyncio.wait_for(run.result(), 120)
    assert result.stop_reason is StopReason.TOOL_ERROR
    assert result.stop_detail == f"the result of bulk is 3.0 MB, {LIMIT_TEXT}; it was dropped"
    assert [(c.name, c.outcome) for c in result.tool_calls] == [("bulk", "failed")]


async def test_a_model_reply_over_the_item_limit_ends_the_run_model_error(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    made = scripted_spec(tmp_path, ["y" * (3 * 1024 * 1024)])
    run = await runner.start(made, "write a lot", run_id="big-reply")
    result = await asyncio.wait_for(run.result(), 120)
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert result.stop_detail == f"the model's reply is 3.0 MB, {LIMIT_TEXT}"


async def test_a_task_message_or_answer_over_the_item_limit_is_refused(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    from convergent.temporal import ITEM_LIMIT

    huge = "z" * (ITEM_LIMIT + 1)
    made = scripted_spec(tmp_path, [call("ask_user", question="Which?"), "done"], ask_timeout=60.0)
    with pytest.raises(UserError, match=f"^the task is 2.0 MB, {LIMIT_TEXT}$"):
        await runner.start(made, huge, run_id="huge-task")
    run = await runner.start(made, "ask", run_id="huge-signals")
    with pytest.raises(UserError, match=f"^the steering message is 2.0 MB, {LIMIT_TEXT}$"):
        await run.steer("message", huge)
    with pytest.raises(UserError, match=f"^the answer is 2.0 MB, {LIMIT_TEXT}$"):
        await run.answer(huge)
    # a big one under the limit goes through the store and reaches the run whole
    await run.answer("a" * (ITEM_LIMIT - 1024))
    result = await asyncio.wait_for(run.result(), 120)
    assert result.stop_reason is StopReason.COMPLETED
    assert len(result.tool_calls[0].result) == ITEM_LIMIT - 1024


async def test_a_client_with_another_payload_store_fails_the_run_saying_so(
    tmp_path: Path,
    runner: TemporalRunner,
    worker: None,
    temporal_server: DevServer,
    payload_db: Path,
) -> None:
    from convergent.temporal import PayloadStore, TemporalRunner

    elsewhere = await TemporalRunner.connect(
        temporal_server.address,
        task_queue=runner.task_queue,
        payloads=PayloadStore(tmp_path / "elsewhere.db"),
    )
    run = await elsewhere.start(scripted_spec(tmp_path, ["hi"]), "t", run_id="other-store")
    with pytest.raises(UserError) as raised:
        await asyncio.wait_for(run.result(), 60)
    message = str(raised.value)
    assert message.startswith(f"the payload store {payload_db} does not hold payload ")
    assert message.endswith(": every worker and client of a cluster must use the same store (--db)")


async def test_a_long_run_hands_a_state_over_the_payload_limit_to_its_next_workflow_run(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    made = scripted_spec(tmp_path, collect(9, 400))
    run = await runner.start(made, "collect the items", run_id="handover", cycles_per_run=4)
    result = await asyncio.wait_for(run.result(), 120)
    assert result.stop_reason is StopReason.COMPLETED, result.stop_detail
    assert (result.cycles, len(result.tool_calls)) == (10, 9)
    executions = [e async for e in runner.client.list_workflows("WorkflowId = 'handover'")]
    assert len(executions) == 3  # cycles 1-4, 5-8 and 9-10: 3.6 MB of state handed over
