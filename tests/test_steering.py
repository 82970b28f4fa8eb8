"""Steering semantics at the loop's boundaries: nothing sent is lost or ignored."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

import convergent
from convergent import Agent, ModelResponse, ScriptedModel, StopReason, calculator
from convergent.durability.sqlite import RunStore
from convergent.events import Redirected
from convergent.messages import Message, ToolSpec, UserMessage
from convergent.steering import SteeringCommand, SteeringKind, SteeringQueue
from convergent.testing import answer, call, step


def test_every_kind_is_applied_by_put() -> None:
    queue = SteeringQueue()
    queue.put(SteeringCommand(SteeringKind.PAUSE))
    assert queue.paused
    queue.put(SteeringCommand(SteeringKind.RESUME))
    assert not queue.paused
    queue.pause()
    queue.put(SteeringCommand(SteeringKind.MESSAGE, "a"))
    queue.put(SteeringCommand(SteeringKind.STOP, "enough"))
    assert not queue.paused, "a stop ends a pause"
    taken = queue.take()
    assert [c.text for c in taken.messages] == ["a"]
    assert taken.stop is not None and taken.stop.text == "enough"
    assert queue.take().stop is None


async def test_a_message_taken_with_a_stop_is_kept_for_later() -> None:
    queue = SteeringQueue()

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        queue.send("also check the totals")
        queue.stop("the user stopped it")
        return step(call("calculator", expression="1+1"))

    result = await Agent(ScriptedModel(reply), [calculator]).run("t", steering=queue)
    assert result.stop_reason is StopReason.STOPPED
    assert result.stop_detail == "the user stopped it"
    kept = queue.take()
    assert [c.text for c in kept.messages] == ["also check the totals"] and kept.stop is None


async def test_a_stored_message_taken_with_a_stop_is_delivered_on_resume(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    seen: list[list[str]] = []

    def first(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        store.send_steering("r", "message", "also check the totals")
        store.send_steering("r", "stop")
        return step(call("calculator", expression="1+1"))

    stopped = await Agent(ScriptedModel(first), [calculator], store=store).run("t", run_id="r")
    assert stopped.stop_reason is StopReason.STOPPED

    def second(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        seen.append([m.content for m in messages if isinstance(m, UserMessage)])
        return answer("totals checked")

    events: list[object] = []
    resumed = await convergent.resume(
        "r", store=store, agent=Agent(ScriptedModel(second), [calculator]), on_event=events.append
    )
    assert resumed.stop_reason is StopReason.COMPLETED
    assert seen == [["t", "also check the totals"]]
    assert [e.message for e in events if isinstance(e, Redirected)] == ["also check the totals"]
    assert store.stored_steering("r", 0) == []
    store.close()


async def test_a_stop_sent_during_the_final_cycle_is_honoured() -> None:
    queue = SteeringQueue()

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        queue.stop("/stop typed while it answered")
        return answer("all done")

    result = await Agent(ScriptedModel(reply)).run("t", steering=queue)
    assert result.stop_reason is StopReason.STOPPED
    assert result.stop_detail == "/stop typed while it answered"


async def test_a_message_sent_during_the_final_cycle_is_delivered_not_dropped() -> None:
    queue = SteeringQueue()
    answers = iter(["first answer", "answer with the correction"])
    requests: list[int] = []

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        requests.append(len(messages))
        if len(requests) == 1:
            queue.send("use metric units")
        return answer(next(answers))

    result = await Agent(ScriptedModel(reply)).run("t", steering=queue)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "answer with the correction"
    assert [m.content for m in result.messages if isinstance(m, UserMessage)] == [
        "t",
        "use metric units",
    ]


@pytest.mark.parametrize("kind", ["message", "stop", "pause", "resume"])
def test_stored_kinds_are_the_enum(tmp_path: Path, kind: str) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        with store.transaction() as conn:
            conn.execute(
                "INSERT INTO runs (run_id, task, model, status, cycles, usage, elapsed, "
                "started_at, updated_at, epoch, message_count, state_version) "
                "VALUES ('r', 't', 'm', 'stopped', 0, '{}', 0, 0, 0, 1, 0, 2)"
            )
        store.send_steering("r", kind, "x")
        assert store.stored_steering("r", 0)[0][1] == SteeringKind(kind).value


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_a_stop_sent_while_a_slow_reply_comes_in_ends_the_run_at_once(
    tmp_path: Path, streamed: bool
) -> None:
    """From another process (the run store), as ``convergent steer --stop`` sends it: the
    request is ended, and the run is ``stopped`` (it used to run on until the request's
    own timeout, and end ``model_error``)."""
    from convergent.models import AnthropicModel
    from convergent.testing.chat_server import SSE, ChatServer, anthropic_message, anthropic_stream

    message = anthropic_message("a long answer " * 50, input_tokens=10, output_tokens=100)
    trickle = SSE(anthropic_stream(message).events, done=False, pace=0.5)
    store = RunStore(tmp_path / "runs.db")
    other = RunStore(tmp_path / "runs.db")  # the steering process's connection
    with ChatServer(lambda n, body: trickle) as server:
        model = AnthropicModel(
            "claude-sonnet-5-5", api_key="test", base_url=server.url, max_retries=0, timeout=60
        )
        loop = asyncio.get_running_loop()
        loop.call_later(1.0, other.send_steering, "slow", "stop", "enough")
        started = loop.time()
        result = await Agent(model, store=store).run(
            "write it", run_id="slow", on_event=(lambda event: None) if streamed else None
        )
        took = loop.time() - started
        assert await asyncio.to_thread(server.dropped.wait, 30)  # the request was ended
    assert (result.stop_reason, result.stop_detail) == (StopReason.STOPPED, "enough")
    assert took < 10
    store.close()
    other.close()


@pytest.mark.parametrize(
    ("waiting_on", "waits"),
    [("model", ["model"]), ("tool", ["tool 0"]), ("tools", ["tool 0", "tool 1"])],
)
async def test_a_run_dropped_while_it_waits_closes_without_waiting(
    waiting_on: str, waits: list[str]
) -> None:
    """A run whose owner drops it mid-request or mid-batch, as a Temporal worker drops a
    workflow it could not evict cleanly, is closed by Python: it cancels what it waits for
    and does not wait for it to end, since a closing coroutine may not wait (it used to raise
    "coroutine ignored GeneratorExit", which fails the worker's cleanup)."""
    started = asyncio.Event()
    never: asyncio.Future[ModelResponse] = asyncio.get_running_loop().create_future()
    ended: list[str] = []

    async def wait(n: int) -> str:
        """Wait."""
        started.set()
        try:
            await never
        finally:
            ended.append(f"tool {n}")
        return "never"

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        if waiting_on != "model":
            return step(*[call("wait", n=n) for n in range(1 if waiting_on == "tool" else 2)])
        started.set()
        try:
            return await never
        finally:
            ended.append("model")

    agent = Agent(ScriptedModel(reply), tools=[convergent.tool(wait)])
    running = agent.run("wait", steering=SteeringQueue())
    # stepped by hand, as an event loop steps a task, until it waits
    awaited = running.send(None)
    noticed = asyncio.ensure_future(started.wait())
    while not started.is_set():
        await asyncio.wait((awaited, noticed), return_when=asyncio.FIRST_COMPLETED)
        if awaited.done():
            awaited = running.send(None)
    await asyncio.sleep(0)
    running.close()
    for _ in range(3):
        await asyncio.sleep(0)
    assert sorted(ended) == waits  # each wait was ended


@pytest.mark.parametrize("hops", range(8))
async def test_a_cancellation_that_comes_as_the_stop_watcher_ends_is_not_lost(hops: int) -> None:
    """The run is cancelled ``hops`` turns of the event loop after its model replied, as the
    race between the request and the watch for a stop ends: a cancellation that reached the
    run ends it (it used to be swallowed while the loop waited for the watcher to end, and
    the run went on to complete)."""
    outer: asyncio.Task[object] | None = None
    delivered: list[bool] = []
    tried = asyncio.Event()

    def cancel_after(left: int) -> None:
        if left:
            asyncio.get_running_loop().call_soon(cancel_after, left - 1)
        else:
            assert outer is not None
            delivered.append(outer.cancel())
            tried.set()

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        asyncio.get_running_loop().call_soon(cancel_after, hops)
        return answer("done")

    outer = asyncio.ensure_future(Agent(ScriptedModel(reply)).run("t", steering=SteeringQueue()))
    try:
        await outer
    except asyncio.CancelledError:
        assert delivered == [True]
    else:
        await tried.wait()
        assert delivered == [False]  # it came after the run had ended


class _BrokenSteering(SteeringQueue):
    """Steering whose watch for a stop fails, as a damaged run database would."""

    async def wait_for_stop(self, poll: float = 0.1) -> None:
        raise OSError("the steering store is unreadable")


async def test_a_failure_watching_for_a_stop_ends_the_run_with_it_not_as_stopped() -> None:
    """It used to end the run as ``stopped``, without a word of the failure."""

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        await asyncio.sleep(0.01)
        return answer("done")

    with pytest.raises(OSError, match="unreadable"):
        await Agent(ScriptedModel(reply)).run("t", steering=_BrokenSteering())
