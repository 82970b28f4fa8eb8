"""Every resumable stop reason continues from its checkpoint, in a fresh agent."""

from __future__ import annotations

from collections.abc import Sequence

from convergent import (
    Agent,
    Limits,
    ModelError,
    ModelResponse,
    NeedsUserInput,
    ScriptedModel,
    StopPolicy,
    ToolError,
    Usage,
    calculator,
    tool,
)
from convergent.builtin_tools import fail
from convergent.durability.sqlite import DatabaseSteering, RunStore
from convergent.messages import Message, ToolResultMessage, ToolSpec, UserMessage
from convergent.steering import SteeringQueue
from convergent.stop import StopReason
from convergent.testing import answer, call, step


@tool
def favourite_colour() -> str:
    """Ask the user for their favourite colour."""
    raise NeedsUserInput("What is your favourite colour?")


@tool
def save(n: int) -> str:
    """Save part n; the disk is full.

    Args:
        n: The part.
    """
    raise ToolError("disk full")


TOOLS = [calculator, fail, favourite_colour, save]


USED = Usage(input_tokens=10, output_tokens=10, requests=1)
"""What every scripted response reports."""


def results(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def agent(store: RunStore, model: ScriptedModel, limits: Limits | None = None) -> Agent:
    return Agent(
        model,
        TOOLS,
        limits=limits or Limits(max_cycles=10),
        policy=StopPolicy(max_repeated_calls=2),
        store=store,
    )


async def stop_and_resume(
    store: RunStore,
    first: ScriptedModel,
    expected: StopReason,
    *,
    limits: Limits | None = None,
    steering: SteeringQueue | None = None,
    resume_limits: Limits | None = None,
) -> list[Message]:
    stopped = await agent(store, first, limits).run("task", run_id="r", steering=steering)
    assert stopped.stop_reason is expected
    summary = store.get_run("r")
    assert summary.stop_reason is expected and summary.resumable
    state = store.load("r")
    assert state.messages == list(stopped.messages)

    def finish(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        return answer("finished after " + " | ".join(results(messages)), usage=USED)

    answers = {q.call_id: "blue" for q in store.pending_questions("r")}
    resumed = await agent(store, ScriptedModel(finish), resume_limits).run(
        state=state, answers=answers, steering=DatabaseSteering(store, "r")
    )
    assert resumed.stop_reason is StopReason.COMPLETED
    assert resumed.cycles == stopped.cycles + 1
    final = store.load("r")
    assert final.stop_reason is StopReason.COMPLETED
    assert final.messages == list(resumed.messages)
    assert final.messages[: len(stopped.messages)] == list(stopped.messages)
    return final.messages


async def test_resume_after_stopped(store: RunStore) -> None:
    queue = SteeringQueue()

    def first(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        queue.stop("user pressed stop")
        return step(call("calculator", "c1", expression="6*7"), usage=USED)

    messages = await stop_and_resume(
        store, ScriptedModel(first), StopReason.STOPPED, steering=queue
    )
    assert messages[-1].content == "finished after 42"


async def test_resume_after_tool_error(store: RunStore) -> None:
    # failing whatever the arguments: a note after the last failing step the policy
    # allows, a stop at the next
    steps = (StopPolicy().max_failing_steps or 0) + 1
    model = ScriptedModel([step(call("save", f"f{i}", n=i), usage=USED) for i in range(steps)])
    room = Limits(max_cycles=steps + 5)
    stopped = await agent(store, model, room).run("task", run_id="first")
    assert stopped.stop_reason is StopReason.TOOL_ERROR
    assert store.load("first").monitor.failing_steps == steps
    messages = await stop_and_resume(
        store,
        ScriptedModel([step(call("save", f"f{i}", n=i), usage=USED) for i in range(steps)]),
        StopReason.TOOL_ERROR,
        limits=room,
        resume_limits=room,
    )
    assert "save failed: disk full" in messages[-1].content
    # resuming after tool_error is a fresh chance: the streak counts from there
    assert store.load("r").monitor.failing_steps == 0


async def test_resume_after_stalled(store: RunStore) -> None:
    model = ScriptedModel(
        [step(call("calculator", f"c{i}", expression="1+1"), usage=USED) for i in range(3)]
    )
    messages = await stop_and_resume(store, model, StopReason.STALLED)
    # the reads ran (a read is judged on its result); the resumed run saw every result
    assert messages[-1].content == "finished after 2 | 2 | 2"


async def test_stalled_run_receives_a_message_queued_while_stopped(store: RunStore) -> None:
    model = ScriptedModel(
        [step(call("calculator", f"c{i}", expression="1+1"), usage=USED) for i in range(3)]
    )
    await agent(store, model).run("task", run_id="r")
    store.send_steering("r", "message", "use a different expression")
    seen: list[str] = []

    def react(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        seen.append(messages[-1].content)
        return answer("ok", usage=USED)

    result = await agent(store, ScriptedModel(react)).run(
        state=store.load("r"), steering=DatabaseSteering(store, "r")
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert seen == ["use a different expression"]
    assert isinstance(result.messages[-2], UserMessage)


async def test_resume_after_max_cycles(store: RunStore) -> None:
    model = ScriptedModel([step(call("calculator", "c1", expression="2+3"), usage=USED)])
    messages = await stop_and_resume(
        store, model, StopReason.MAX_CYCLES, limits=Limits(max_cycles=1)
    )
    assert messages[-1].content == "finished after 5"


async def test_resume_after_budget_exhausted(store: RunStore) -> None:
    model = ScriptedModel([step(call("calculator", "c1", expression="2+3"), usage=USED)])
    messages = await stop_and_resume(
        store, model, StopReason.BUDGET_EXHAUSTED, limits=Limits(max_total_tokens=60)
    )
    assert store.load("r").usage.total_tokens == 40
    assert messages[-1].content == "finished after 5"


async def test_resume_after_model_error(store: RunStore) -> None:
    def broken(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        if len(messages) > 1:
            raise ModelError("HTTP 503: overloaded")
        return step(call("calculator", "c1", expression="9-1"), usage=USED)

    messages = await stop_and_resume(store, ScriptedModel(broken), StopReason.MODEL_ERROR)
    assert messages[-1].content == "finished after 8"


async def test_resume_after_needs_user_with_an_answer(store: RunStore) -> None:
    model = ScriptedModel([step(call("favourite_colour", "q1"), usage=USED)])
    stopped = await agent(store, model).run("task", run_id="r")
    assert stopped.stop_reason is StopReason.NEEDS_USER
    questions = store.pending_questions("r")
    assert [(q.call_id, q.question) for q in questions] == [
        ("q1", "What is your favourite colour?")
    ]

    def finish(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        return answer("colour is " + results(messages)[-1], usage=USED)

    resumed = await agent(store, ScriptedModel(finish)).run(
        state=store.load("r"), answers={"q1": "blue"}
    )
    assert resumed.output == "colour is blue"
    assert store.pending_questions("r") == []


async def test_completed_runs_are_not_resumable(store: RunStore) -> None:
    await agent(store, ScriptedModel([answer("done", usage=USED)])).run("task", run_id="r")
    assert not store.get_run("r").resumable
