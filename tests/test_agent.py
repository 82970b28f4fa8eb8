"""The objective loop, driven by ScriptedModel."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from convergent import (
    Agent,
    Limits,
    ModelError,
    ModelResponse,
    ScriptedModel,
    StopPolicy,
    StopReason,
    ToolCall,
    ToolFinished,
    ToolStarted,
    Usage,
    UserError,
    Verification,
    calculator,
    tool,
)
from convergent.builtin_tools import fail
from convergent.events import (
    Event,
    ModelResponded,
    Nudged,
    Redirected,
    RunStarted,
    RunStopped,
    TextDelta,
    ToolCallDelta,
    Verified,
)
from convergent.exceptions import ScriptExhaustedError
from convergent.messages import ToolResultMessage, UserMessage
from convergent.steering import SteeringQueue
from convergent.testing import answer, call, step


def calc(expression: str) -> ToolCall:
    return call("calculator", expression=expression)


# --- seed 000's validation table -------------------------------------------------


async def test_task_needing_three_tool_calls_runs_three_tool_cycles_then_completes() -> None:
    model = ScriptedModel(
        [
            step(calc("1+1")),
            step(calc("2+2")),
            step(calc("3+3")),
            "done: 2, 4, 6",
        ]
    )
    result = await Agent(model, [calculator]).run("add things")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.result for r in result.tool_calls] == ["2", "4", "6"]
    assert result.cycles == 4
    assert result.output == "done: 2, 4, 6"
    model.assert_consumed()


async def test_task_done_after_two_cycles_stops_at_two() -> None:
    model = ScriptedModel([step(calc("6*7")), "42", "never requested"])
    result = await Agent(model, [calculator]).run("what is 6*7")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.cycles == 2
    assert len(model.unconsumed) == 1


async def test_failing_tool_stops_at_once_under_the_stop_policy() -> None:
    model = ScriptedModel([step(call("fail", message="disk on fire")), "unreachable"])
    result = await Agent(model, [fail], policy=StopPolicy(on_tool_error="stop")).run("try")
    assert result.stop_reason is StopReason.TOOL_ERROR
    assert "disk on fire" in result.stop_detail
    assert result.cycles == 1
    assert result.tool_calls[0].ok is False
    assert result.tool_calls[0].outcome == "failed"


async def test_no_tools_available_stops_after_one_model_call() -> None:
    model = ScriptedModel(["Paris is the capital of France."])
    result = await Agent(model).run("capital of France?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.cycles == 1
    assert model.requests[0][1] == ()


# --- self-reported confidence is metadata, never a stop signal --------------------


async def test_finish_action_with_high_confidence_and_a_tool_call_continues() -> None:
    model = ScriptedModel(
        [
            dataclasses.replace(
                step(calc("2+3"), content="I'm done"),
                metadata={"confidence": 0.99, "action": "finish"},
            ),
            "5",
        ]
    )
    result = await Agent(model, [calculator]).run("2+3")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.cycles == 2
    assert [r.name for r in result.tool_calls] == ["calculator"]
    responded = [e for e in result.events if isinstance(e, ModelResponded)]
    assert responded[0].metadata == {"confidence": 0.99, "action": "finish"}


async def test_low_confidence_without_tool_calls_completes() -> None:
    model = ScriptedModel([{"content": "maybe 5?", "confidence": 0.1}])
    result = await Agent(model, [calculator]).run("2+3")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.cycles == 1
    assert result.output == "maybe 5?"


# --- parallel batches -------------------------------------------------------------


async def test_batched_calls_overlap_and_results_return_in_call_order() -> None:
    gate = asyncio.Event()
    started: list[str] = []

    @tool
    async def slow(label: str) -> str:
        """Wait until every call of the batch has started.

        Args:
            label: Returned unchanged.
        """
        started.append(label)
        if len(started) == 3:
            gate.set()
        await asyncio.wait_for(gate.wait(), timeout=10)
        return label

    model = ScriptedModel([step(*(call("slow", label=x) for x in ("a", "b", "c"))), "all done"])
    result = await Agent(model, [slow]).run("go")
    assert result.stop_reason is StopReason.COMPLETED
    kinds = [(type(e).__name__) for e in result.events if isinstance(e, ToolStarted | ToolFinished)]
    # every call started before any finished: the calls overlapped
    assert kinds[:3] == ["ToolStarted"] * 3
    assert kinds[3:] == ["ToolFinished"] * 3
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.content for m in results] == ["a", "b", "c"]


async def test_sync_tools_of_one_batch_run_in_threads_concurrently() -> None:
    import threading

    barrier = threading.Barrier(2, timeout=10)

    @tool
    def meet(who: str) -> str:
        """Wait at a barrier that needs two threads.

        Args:
            who: Echoed.
        """
        barrier.wait()
        return who

    model = ScriptedModel([step(call("meet", who="x"), call("meet", who="y")), "ok"])
    result = await Agent(model, [meet]).run("go")
    assert [r.result for r in result.tool_calls] == ["x", "y"]
    assert all(r.ok for r in result.tool_calls)


# --- tool errors and model mistakes ------------------------------------------------


async def test_continue_policy_feeds_the_error_back() -> None:
    model = ScriptedModel([step(call("fail", message="nope")), "recovered"])
    result = await Agent(model, [fail], policy=StopPolicy(on_tool_error="continue")).run("try")
    assert result.stop_reason is StopReason.COMPLETED
    sent = model.requests[1][0]
    error = [m for m in sent if isinstance(m, ToolResultMessage)][0]
    assert error.is_error and "nope" in error.content


async def test_unknown_tool_and_invalid_arguments_go_back_to_the_model() -> None:
    model = ScriptedModel(
        [
            step(call("teleport", where="moon")),
            step(call("calculator", expr="1+1")),
            "giving up",
        ]
    )
    result = await Agent(model, [calculator]).run("x")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.outcome for r in result.tool_calls] == ["invalid", "invalid"]
    second = [m for m in model.requests[1][0] if isinstance(m, ToolResultMessage)]
    assert "unknown tool 'teleport'" in second[0].content
    third = [m for m in model.requests[2][0] if isinstance(m, ToolResultMessage)]
    assert "expression" in third[-1].content


async def test_unparsable_arguments_are_the_models_mistake() -> None:
    bad = ModelResponse(tool_calls=(ToolCall(id="c1", name="calculator", parse_error="bad json"),))
    model = ScriptedModel([bad, "ok"])
    result = await Agent(model, [calculator]).run("x")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[0].outcome == "invalid"


async def test_tool_timeout_is_a_tool_failure() -> None:
    @tool(timeout=0.05)
    async def hang() -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "unreachable"

    model = ScriptedModel([step(call("hang"))])
    result = await Agent(model, [hang], policy=StopPolicy(on_tool_error="stop")).run("x")
    assert result.stop_reason is StopReason.TOOL_ERROR
    assert "timed out" in result.stop_detail


# --- stall and limits ---------------------------------------------------------------


async def test_the_same_read_gets_a_note_after_the_third_and_stalls_at_the_fourth() -> None:
    model = ScriptedModel([step(calc("1+1"))] * 4 + ["2, as far as I can tell"])
    result = await Agent(model, [calculator]).run("loop")
    assert result.stop_reason is StopReason.STALLED
    assert result.cycles == 4
    # a read runs and is judged on its result: all four ran, the note came after the third
    assert len(result.tool_calls) == 4
    notes = [m for m in result.messages if isinstance(m, UserMessage)][1:]
    assert 'Note: you have requested calculator(expression="1+1") 3 times' in notes[0].content
    nudges = [e for e in result.events if isinstance(e, Nudged)]
    assert [(e.about, e.cycle) for e in nudges] == [("stalled", 3)]
    # the answer after the stop: one last request, without tools
    assert result.output == "2, as far as I can tell" and result.output_after_stop
    assert model.requests[-1].tools == ()


async def test_an_undeclared_call_runs_its_third_time_then_gets_the_note() -> None:
    @tool
    def charge(amount: int) -> str:
        """Charge the card.

        Args:
            amount: Amount.
        """
        return "charged"

    model = ScriptedModel([step(call("charge", amount=5))] * 4 + ["charged three times"])
    result = await Agent(model, [charge]).run("charge 5")
    assert result.stop_reason is StopReason.STALLED and result.cycles == 4
    # undeclared: it runs and is judged on its result; after the note it may be a write,
    # so the fourth does not run
    assert len(result.tool_calls) == 3
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results[:3]] == ["charged"] * 3
    assert results[3].is_error and results[3].content.startswith("not executed: ")
    notes = [m for m in result.messages if isinstance(m, UserMessage)]
    assert "requested charge(amount=5) 3 times" in notes[-1].content


async def test_no_notes_stall_at_the_third_request() -> None:
    model = ScriptedModel([step(calc("1+1"))] * 3)
    policy = StopPolicy(notes=0, final_answer=False)
    result = await Agent(model, [calculator], policy=policy).run("loop")
    assert result.stop_reason is StopReason.STALLED
    assert result.cycles == 3 and len(result.tool_calls) == 3
    assert result.output == "" and not result.output_after_stop
    model.assert_consumed()


async def test_argument_order_does_not_hide_a_repeat() -> None:
    @tool
    def pair(a: int, b: int) -> int:
        """Add.

        Args:
            a: First.
            b: Second.
        """
        return a + b

    script = [
        step(call("pair", a=1, b=2)),
        step(call("pair", b=2, a=1)),
    ]
    policy = StopPolicy(max_repeated_calls=2, notes=0, final_answer=False)
    result = await Agent(ScriptedModel(script), [pair], policy=policy).run("x")
    assert result.stop_reason is StopReason.STALLED


async def test_max_cycles() -> None:
    model = ScriptedModel([step(calc(f"{i}+1")) for i in range(4)] + ["1..4 + 1"])
    result = await Agent(model, [calculator], limits=Limits(max_cycles=4)).run("x")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.cycles == 4
    assert len(model.requests) == 5  # the last one asks for the answer, without tools
    assert result.output == "1..4 + 1" and result.output_after_stop
    model.assert_consumed()


async def test_token_budget() -> None:
    heavy = [
        step(
            call("calculator", expression=f"{i}*2"),
            usage=Usage(input_tokens=600, output_tokens=100, requests=1),
        )
        for i in range(5)
    ]
    # without a final answer room is still kept for the next request: it would not fit
    result = await Agent(
        ScriptedModel(heavy),
        [calculator],
        limits=Limits(max_total_tokens=1000),
        policy=StopPolicy(final_answer=False),
    ).run("x")
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert result.cycles == 1
    assert result.usage.total_tokens == 700


async def test_wall_time_budget() -> None:
    @tool
    async def nap() -> str:
        """Sleep a little."""
        await asyncio.sleep(0.02)
        return "z"

    model = ScriptedModel([step(call("nap"))] * 2 + ["late"])
    limits, policy = Limits(max_seconds=0.01), StopPolicy(max_repeated_calls=100)
    result = await Agent(model, [nap], limits=limits, policy=policy).run("x")
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert result.cycles == 1


async def test_cost_budget() -> None:
    priced = step(call("calculator", expression="1"), usage=Usage(requests=1, cost=0.6))
    model = ScriptedModel([priced, priced, "x"])
    limits, policy = Limits(max_cost=1.0), StopPolicy(max_repeated_calls=10)
    result = await Agent(model, [calculator], limits=limits, policy=policy).run("x")
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert result.cycles == 2


def test_negative_or_nan_limits_are_user_errors() -> None:
    with pytest.raises(UserError, match="max_cycles"):
        Limits(max_cycles=-1)
    with pytest.raises(UserError, match="max_seconds must be a number"):
        Limits(max_seconds=float("nan"))


# --- model errors and misuse ----------------------------------------------------------


async def test_backend_failure_stops_with_model_error() -> None:
    def broken(messages: Any, tools: Any) -> ModelResponse:
        raise ModelError("connection refused")

    result = await Agent(ScriptedModel(broken)).run("x")
    assert result.stop_reason is StopReason.MODEL_ERROR
    assert "connection refused" in result.stop_detail


async def test_exhausted_script_fails_loudly() -> None:
    model = ScriptedModel([step(calc("1"))])
    with pytest.raises(ScriptExhaustedError, match="holds only 1"):
        await Agent(model, [calculator]).run("x")


def test_duplicate_tool_names_and_non_tools_are_user_errors() -> None:
    with pytest.raises(UserError, match="two tools"):
        Agent(ScriptedModel([]), [calculator, calculator])
    with pytest.raises(UserError, match="not a Tool"):
        Agent(ScriptedModel([]), [print])  # type: ignore[list-item]


# --- verifier, steering, events -------------------------------------------------------


async def test_verifier_failure_sends_feedback_and_continues() -> None:
    model = ScriptedModel(["41", step(calc("6*7")), "42"])
    result = await Agent(
        model,
        [calculator],
        verifier=lambda answer: Verification(answer.strip() == "42", "expected the product"),
    ).run("6*7")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "42"
    feedback = model.requests[1][0][-1]
    assert isinstance(feedback, UserMessage) and "expected the product" in feedback.content
    verdicts = [(e.passed, e.feedback) for e in result.events if isinstance(e, Verified)]
    assert verdicts == [(False, "expected the product"), (True, "")]
    assert not any(isinstance(e, Redirected) for e in result.events)


async def test_stop_request_ends_the_run_stopped() -> None:
    steering = SteeringQueue()

    def script(messages: Any, tools: Any) -> ModelResponse:
        steering.stop("user pressed stop")
        return ModelResponse(
            tool_calls=(ToolCall(id="c", name="calculator", arguments={"expression": "1"}),)
        )

    result = await Agent(ScriptedModel(script), [calculator]).run("x", steering=steering)
    assert result.stop_reason is StopReason.STOPPED
    assert result.cycles == 1
    assert result.stop_detail == "user pressed stop"


async def test_redirect_is_delivered_as_a_user_message_not_a_stop() -> None:
    steering = SteeringQueue()
    replies = iter([step(calc("1+1")), answer("redirected answer")])

    def script(messages: Any, tools: Any) -> ModelResponse:
        if len(messages) == 1:
            steering.send("actually, compute 3+3")
        return next(replies)

    model = ScriptedModel(script)
    result = await Agent(model, [calculator]).run("1+1", steering=steering)
    assert result.stop_reason is StopReason.COMPLETED
    assert any(isinstance(e, Redirected) for e in result.events)
    second_request = model.requests[1][0]
    assert isinstance(second_request[-1], UserMessage)
    assert second_request[-1].content == "actually, compute 3+3"


async def test_event_stream_order_and_single_stop() -> None:
    seen: list[Event] = []
    model = ScriptedModel([step(calc("1+1")), "2"])
    result = await Agent(model, [calculator]).run("x", on_event=seen.append)
    # the streaming deltas reach the listener as they come, and are not kept
    assert list(result.events) == [e for e in seen if not isinstance(e, TextDelta | ToolCallDelta)]
    names = [type(e).__name__ for e in seen]
    assert names == [
        "RunStarted",
        "CycleStarted",
        "ToolCallDelta",
        "ModelResponded",
        "ToolStarted",
        "ToolFinished",
        "CycleStarted",
        "TextDelta",
        "ModelResponded",
        "RunStopped",
    ]
    assert isinstance(seen[0], RunStarted)
    assert sum(isinstance(e, RunStopped) for e in seen) == 1


async def test_stream_yields_events_and_result() -> None:
    agent = Agent(ScriptedModel([step(calc("2*2")), "4"]), [calculator])
    run = agent.stream("2*2")
    events = [event async for event in run]
    assert isinstance(events[-1], RunStopped)
    assert run.result is not None and run.result.output == "4"


def test_run_sync() -> None:
    result = Agent(ScriptedModel(["hi"])).run_sync("hello")
    assert result.stop_reason is StopReason.COMPLETED


# --- resume ------------------------------------------------------------------------------


async def test_resume_reruns_idempotent_pending_calls_and_interrupts_the_rest() -> None:
    executed: list[str] = []

    @tool(idempotent=False)
    def charge(amount: int) -> str:
        """Charge a card (not safe to repeat).

        Args:
            amount: Amount.
        """
        executed.append(f"charge {amount}")
        return "charged"

    first = ScriptedModel([step(calc("1+1"), call("charge", amount=5))])
    agent = Agent(first, [calculator, charge])
    state = agent.new_state("pay")
    # simulate a crash right after the model asked for the calls
    response = await first.request(state.messages, agent.tool_specs)
    state.messages.append(response.to_message())
    state.cycles = 1
    assert [c.name for c in state.pending_calls()] == ["calculator", "charge"]

    agent.model = ScriptedModel(["resumed"])
    result = await agent.run(state=state)
    assert result.stop_reason is StopReason.COMPLETED
    assert executed == []
    results = {m.name: m for m in result.messages if isinstance(m, ToolResultMessage)}
    assert results["calculator"].content == "2" and not results["calculator"].is_error
    assert results["charge"].is_error and "interrupted" in results["charge"].content


async def test_gate_that_drops_every_call_is_rejected() -> None:
    class DropAll:
        async def review(self, response: Any, state: Any, emit: Any) -> tuple[ToolCall, ...]:
            return ()

    agent = Agent(ScriptedModel([step(calc("1"))]), [calculator], gate=DropAll())
    with pytest.raises(UserError, match="never drop"):
        await agent.run("x")


async def test_sequential_batches_run_in_call_order() -> None:
    log: list[str] = []

    @tool(name="step")
    async def record_step(label: str) -> str:
        """Record a step.

        Args:
            label: Step name.
        """
        log.append(f"start {label}")
        await asyncio.sleep(0)
        log.append(f"end {label}")
        return label

    batch = step(call("step", label="cd"), call("step", label="mkdir"))
    agent = Agent(ScriptedModel([batch, "done"]), [record_step], parallel_tool_calls=False)
    result = await agent.run("x")
    assert result.stop_reason is StopReason.COMPLETED
    assert log == ["start cd", "end cd", "start mkdir", "end mkdir"]
