"""Runs as Temporal workflows on a real dev server: same loop, same stops, durable."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chat_stub import ChatStub, completion
from convergent import Limits, StopReason, Usage, build_agent
from convergent.spec import GateSpec
from convergent.testing import answer, call, step, write_script

from .conftest import WorkerProcess, replayer, scripted_spec, wait_for

if TYPE_CHECKING:
    from convergent.temporal import TemporalRunner

pytestmark = [pytest.mark.usefixtures("effects"), pytest.mark.temporal]


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def comparable(result: Any) -> dict[str, Any]:
    data = result.to_dict()
    data.pop("run_id")
    return data


async def test_a_run_on_temporal_ends_as_the_same_run_in_process(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    responses = [
        call("calculator", expression="6*7"),
        [call("look", n=1), call("calculator", expression="2**")],
        "42, and item 1 looks fine",
    ]
    made = scripted_spec(tmp_path, responses)
    local = await build_agent(made).run("calc", run_id="same")
    run = await runner.start(made, "calc", run_id="same-temporal")
    remote = await run.result()
    assert remote.stop_reason is StopReason.COMPLETED
    assert comparable(remote) == comparable(local)
    progress = await run.progress()
    kinds = [event["type"] for event in progress["events"]]
    assert kinds[0] == "run_started" and kinds[-1] == "run_stopped"
    assert kinds.count("tool_finished") == 3


async def test_a_priced_run_on_temporal_stops_on_its_cost_as_in_process(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    # the worker builds the model and tells the workflow its price: the cost limit holds;
    # $0.02 at $0.0038 a request keeps room for three cycles and the final answer
    tokens = Usage(input_tokens=3000, output_tokens=200)
    steps = [step(call("calculator", expression=f"{n}+1"), usage=tokens) for n in range(3)]
    made = scripted_spec(
        tmp_path,
        [*steps, answer("best so far", usage=tokens)],
        price=(1.0, 4.0),
        limits=Limits(max_cycles=30, max_cost=0.02),
    )
    local = await build_agent(made).run("count", run_id="priced")
    remote = await (await runner.start(made, "count", run_id="priced-temporal")).result()
    assert remote.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert comparable(remote) == comparable(local)
    assert remote.usage.cost == pytest.approx(remote.usage.requests * 3800 / 1e6)
    assert remote.usage.cost <= 0.02 and remote.output_after_stop and remote.cycles == 3


async def test_a_model_that_fails_ends_model_error_after_its_retries(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    run = await runner.start(
        scripted_spec(tmp_path, [call("calculator", expression="1")]), "t", run_id="me"
    )
    result = await run.result()
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "holds only 1 response" in result.stop_detail


@pytest.mark.slow
async def test_a_killed_worker_is_replaced_and_no_finished_call_runs_twice(
    tmp_path: Path,
    runner: TemporalRunner,
    temporal_server: Any,
    effects: Path,
    payload_db: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVERGENT_TEST_STEP_SECONDS", "0.4")
    steps = 8
    responses = [call("step", n=n) for n in range(steps)] + ["all steps done"]
    first = WorkerProcess(temporal_server.address, runner.task_queue, payload_db)
    try:
        run = await runner.start(scripted_spec(tmp_path, responses), "do the steps", run_id="kill")
        await wait_for(run, lambda p: p["cycles"] >= 3)
        first.kill()
        done_before = read_lines(effects)
        second = WorkerProcess(temporal_server.address, runner.task_queue, payload_db)
        try:
            result = await asyncio.wait_for(run.result(), 120)
        finally:
            second.stop()
    finally:
        first.kill()
    lines = read_lines(effects)
    assert result.stop_reason is StopReason.COMPLETED, result.stop_detail
    assert max(Counter(lines).values()) == 1, lines  # no step ran twice
    assert set(done_before) <= set(lines)
    outcomes = [record.outcome for record in result.tool_calls]
    assert outcomes.count("ok") == len(lines)
    # at most the call in flight when the worker died was left interrupted, never re-run
    assert outcomes.count("interrupted") <= 1 and len(outcomes) == steps


@pytest.mark.slow
async def test_a_worker_killed_during_a_model_request_is_replaced_in_seconds(
    tmp_path: Path, runner: TemporalRunner, temporal_server: Any, payload_db: Path
) -> None:
    # the first request is never answered: its worker is killed while it waits
    with ChatStub(lambda n, body: None if n == 1 else completion("answered")) as stub:
        made = scripted_spec(tmp_path, ["unused"]).model_copy(
            update={"model": "openai:stub", "base_url": f"{stub.url}/v1"}
        )
        first = WorkerProcess(temporal_server.address, runner.task_queue, payload_db)
        try:
            run = await runner.start(made, "answer", run_id="killed-mid-request")
            assert await asyncio.to_thread(stub.arrived.wait, 60)
            first.kill()
            second = WorkerProcess(temporal_server.address, runner.task_queue, payload_db)
            try:
                # the request's start-to-close timeout is 10 minutes: only its heartbeat
                # timeout can hand it to the second worker before this safety net
                result = await asyncio.wait_for(run.result(), 120)
            finally:
                second.stop()
        finally:
            first.kill()
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "answered"
    assert len(stub.requests) == 2


@pytest.mark.slow
async def test_two_hundred_runs_at_once(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    made = scripted_spec(tmp_path, [call("calculator", expression="20*10"), "200"])
    runs = await asyncio.gather(*(runner.start(made, "t", run_id=f"many-{n}") for n in range(200)))
    results = await asyncio.wait_for(asyncio.gather(*(run.result() for run in runs)), 240)
    assert Counter(result.stop_reason for result in results) == {StopReason.COMPLETED: 200}
    assert {result.output for result in results} == {"200"}


async def test_recorded_histories_replay_deterministically(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    from temporalio.client import WorkflowHistory

    clear = json.dumps({"clarity": 0.9, "certainty": 0.9, "reason": "fine"})
    scorer = write_script(tmp_path / "scorer.json", clear, clear, clear)
    responses = [
        call("calculator", expression="1+1"),
        call("look", n=2),
        call("step", n=3),
        "done",
    ]
    made = scripted_spec(tmp_path, responses, gate=GateSpec(threshold=0.5, model=scorer))
    run = await runner.start(made, "t", run_id="replay")
    assert (await run.result()).stop_reason is StopReason.COMPLETED
    history = await run.handle.fetch_history()
    replaying = replayer(runner)
    outcome = await replaying.replay_workflow(history, raise_on_replay_failure=False)
    assert outcome.replay_failure is None
    # a history whose events do not match what the code decides is rejected
    tampered = json.loads(history.to_json())
    events = tampered["events"]
    scheduled = [e for e in events if "activityTaskScheduledEventAttributes" in e]
    scheduled[1]["activityTaskScheduledEventAttributes"]["activityType"]["name"] = "other"
    bad = WorkflowHistory.from_json("replay", tampered)
    outcome = await replaying.replay_workflow(bad, raise_on_replay_failure=False)
    assert outcome.replay_failure is not None


async def test_signals_steer_and_stop_a_live_run(
    tmp_path: Path, runner: TemporalRunner, worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVERGENT_TEST_STEP_SECONDS", "0.2")
    responses = [call("step", n=n) for n in range(40)]
    run = await runner.start(scripted_spec(tmp_path, responses), "t", run_id="steer")
    await wait_for(run, lambda p: p["cycles"] >= 2)
    await run.steer("message", "hurry up")
    await wait_for(run, lambda p: any(e["type"] == "redirected" for e in p["events"]))
    await run.steer("stop", "enough")
    result = await run.result()
    assert result.stop_reason is StopReason.STOPPED and result.stop_detail == "enough"
    assert result.cycles < 40


async def test_a_pause_holds_the_run_until_resumed(
    tmp_path: Path, runner: TemporalRunner, worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVERGENT_TEST_STEP_SECONDS", "0.1")
    responses = [call("step", n=n) for n in range(6)] + ["done"]
    run = await runner.start(scripted_spec(tmp_path, responses), "t", run_id="pause")
    await wait_for(run, lambda p: p["cycles"] >= 1)
    await run.steer("pause")
    held = await wait_for(run, lambda p: p["cycles"] >= 1)
    await asyncio.sleep(1.5)
    assert (await run.progress())["cycles"] <= held["cycles"] + 1
    await run.steer("resume")
    assert (await run.result()).stop_reason is StopReason.COMPLETED


async def test_ask_user_waits_durably_for_an_answer_signal(
    tmp_path: Path, runner: TemporalRunner
) -> None:
    from convergent.temporal import make_worker

    responses = [call("ask_user", question="Which colour?"), "painting it blue"]
    made = scripted_spec(tmp_path, responses, ask_timeout=3600.0)
    async with make_worker(runner.client, runner.task_queue):
        run = await runner.start(made, "paint", run_id="ask")
        await wait_for(run, lambda p: p["question"] == "Which colour?")
    # no worker runs now; the question waits on the server, with an hour-long timer
    await run.answer("blue")
    async with make_worker(runner.client, runner.task_queue):
        result = await asyncio.wait_for(run.result(), 60)
    assert result.stop_reason is StopReason.COMPLETED
    assert [(c.name, c.result) for c in result.tool_calls] == [("ask_user", "blue")]
    history = await run.handle.fetch_history()
    timers = [
        event.timer_started_event_attributes.start_to_fire_timeout.ToSeconds()
        for event in history.events
        if event.HasField("timer_started_event_attributes")
    ]
    assert timers == [3600]


async def test_an_unanswered_question_stops_needs_user_and_resumes_with_the_answer(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    responses = [call("ask_user", question="Which colour?"), "painting it green"]
    made = scripted_spec(tmp_path, responses, ask_timeout=1.0)
    run = await runner.start(made, "paint", run_id="late")
    first = await run.result()
    assert first.stop_reason is StopReason.NEEDS_USER
    assert first.stop_detail == "Which colour?"
    continued = await runner.continue_run("late", answer="green")
    result = await continued.result()
    assert result.stop_reason is StopReason.COMPLETED and result.output == "painting it green"
    assert result.tool_calls[-1].result == "green"


async def test_a_long_run_continues_in_fresh_workflow_runs(
    tmp_path: Path, runner: TemporalRunner, worker: None
) -> None:
    responses = [call("calculator", expression=f"{n}+1") for n in range(8)] + ["done"]
    made = scripted_spec(tmp_path, responses)
    local = await build_agent(made).run("count", run_id="long-local")
    run = await runner.start(made, "count", run_id="long", cycles_per_run=3)
    result = await run.result()
    assert comparable(result) == comparable(local)
    executions = [
        execution async for execution in runner.client.list_workflows("WorkflowId = 'long'")
    ]
    assert len(executions) == 3  # cycles 1-3, 4-6 and 7-9
