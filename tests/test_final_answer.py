"""An answer at every stop: one last request without tools, within the budgets."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convergent import (
    Agent,
    Limits,
    Model,
    ModelError,
    ModelResponse,
    ModelSettings,
    NeedsUserInput,
    ScriptedModel,
    StopPolicy,
    StopReason,
    ToolCall,
    Usage,
    UserError,
    calculator,
    tool,
)
from convergent.builtin_tools import fail
from convergent.durability.sqlite import RunStore
from convergent.events import Nudged, RunStopped
from convergent.loop.driver import CycleDriver
from convergent.messages import Message, ToolSpec, UserMessage
from convergent.models import TokenPrice
from convergent.resuming import resume
from convergent.steering import SteeringQueue
from convergent.testing import answer, call, scripted, step


def counting(n: int) -> list[ToolCall]:
    return [call("calculator", expression=f"{i}+1") for i in range(n)]


@tool(terminal=True)
def transfer(summary: str) -> str:
    """Hand the conversation to a person.

    Args:
        summary: What they need to know.
    """
    return f"transferred: {summary}"


@tool
def ask_colour() -> str:
    """Ask the user for a colour."""
    raise NeedsUserInput("Which colour?")


# --- which stops get one ------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "options", "reason"),
    [
        (counting(2), {"limits": Limits(max_cycles=2)}, StopReason.MAX_CYCLES),
        ([call("calculator", expression="1+1")] * 4, {}, StopReason.STALLED),
        (
            [call("fail", message="no")],
            {"policy": StopPolicy(on_tool_error="stop")},
            StopReason.TOOL_ERROR,
        ),
        (
            [
                step(
                    call("calculator", expression="1"),
                    usage=Usage(input_tokens=100, output_tokens=10, requests=1, cost=0.05),
                )
            ],
            {"limits": Limits(max_cost=0.3)},
            StopReason.BUDGET_EXHAUSTED,
        ),
    ],
)
async def test_these_stops_end_with_the_best_answer_so_far(
    script: list[Any], options: dict[str, Any], reason: StopReason
) -> None:
    model = scripted(*script, "my best answer: 2, unverified")
    seen: list[RunStopped] = []
    result = await Agent(model, [calculator, fail], **options).run(
        "task", on_event=lambda e: seen.append(e) if isinstance(e, RunStopped) else None
    )
    assert result.stop_reason is reason
    assert result.output == "my best answer: 2, unverified"
    assert result.output_after_stop and seen[0].output_after_stop
    assert result.to_dict()["output_after_stop"] is True
    last = model.requests[-1]
    assert last.tools == ()
    prompt = last.messages[-1]
    assert isinstance(prompt, UserMessage) and result.stop_detail in prompt.content
    # not a cycle, and not part of the conversation
    assert result.cycles == len(model.requests) - 1
    assert result.messages[-1] != prompt
    model.assert_consumed()


async def test_its_usage_counts() -> None:
    best = answer("best", usage=Usage(input_tokens=50, output_tokens=5, requests=1))
    first = step(
        call("calculator", expression="1"),
        usage=Usage(input_tokens=40, output_tokens=10, requests=1),
    )
    result = await Agent(scripted(first, best), [calculator], limits=Limits(max_cycles=1)).run("x")
    assert result.usage == Usage(input_tokens=90, output_tokens=15, requests=2)


async def test_other_stops_make_no_extra_request() -> None:
    steering = SteeringQueue()

    def stop_now(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        steering.stop("enough")
        return step(call("calculator", expression="1"))

    def broken(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        raise ModelError("HTTP 503")

    handoff = call("transfer", summary="s")
    question = call("ask_colour")
    cases = [
        (ScriptedModel(stop_now), StopReason.STOPPED),
        (ScriptedModel(broken), StopReason.MODEL_ERROR),
        (scripted(handoff), StopReason.HANDED_OFF),
        (scripted(question), StopReason.NEEDS_USER),
        (scripted("done"), StopReason.COMPLETED),
    ]
    for model, reason in cases:
        agent = Agent(model, [calculator, transfer, ask_colour])
        result = await agent.run("x", steering=steering if reason is StopReason.STOPPED else None)
        assert result.stop_reason is reason
        assert not result.output_after_stop
        assert all(request.tools for request in model.requests), reason


async def test_it_can_be_switched_off() -> None:
    model = scripted(*counting(2))
    result = await Agent(
        model, [calculator], limits=Limits(max_cycles=2), policy=StopPolicy(final_answer=False)
    ).run("x")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "" and not result.output_after_stop
    assert len(model.requests) == 2


async def test_the_earlier_keyword_still_switches_it_off_and_warns() -> None:
    model = scripted(*counting(2))
    with pytest.warns(DeprecationWarning, match=r"final_answer moved to StopPolicy"):
        agent = Agent(model, [calculator], limits=Limits(max_cycles=2), final_answer=False)
    assert agent.policy == StopPolicy(final_answer=False) and not agent.final_answer
    result = await agent.run("x")
    assert result.stop_reason is StopReason.MAX_CYCLES and not result.output_after_stop
    assert len(model.requests) == 2


def test_a_driver_takes_it_from_the_policy() -> None:
    assert CycleDriver(policy=StopPolicy(final_answer=False)).final_answer is False
    assert CycleDriver().final_answer is True
    with pytest.warns(DeprecationWarning, match=r"final_answer moved to StopPolicy"):
        driver = CycleDriver(final_answer=False)
    assert driver.policy.final_answer is False


async def test_a_failing_final_request_keeps_the_last_text() -> None:
    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        if not tools:
            raise ModelError("HTTP 500")
        return step(call("calculator", expression="1"), content="still counting")

    result = await Agent(ScriptedModel(script), [calculator], limits=Limits(max_cycles=1)).run("x")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "still counting" and not result.output_after_stop


async def test_a_script_without_a_final_response_gives_no_final_answer() -> None:
    model = scripted(*counting(1))
    result = await Agent(model, [calculator], limits=Limits(max_cycles=1)).run("x")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert not result.output_after_stop and len(model.requests) == 2


# --- within the budgets ----------------------------------------------------------------

FREE = TokenPrice(0.0, 0.0)


class Meter(Model):
    """A provider double: counts 4 characters (and 4 more tokens per message) as a token,
    a tool's schema as 60 tokens, and honours ``max_tokens``. It reports each response's
    cost (its price is `FREE` per token unless ``declared``: the cost is its own)."""

    def __init__(
        self,
        steps: int,
        price_in: float = 0.0,
        price_out: float = 0.0,
        declared: TokenPrice = FREE,
    ) -> None:
        self.steps = steps
        self.price_in, self.price_out = price_in, price_out
        self.declared = declared
        self.requests: list[tuple[int, int | None]] = []
        self._counted: list[Message] = []
        self._text = 0

    @property
    def name(self) -> str:
        return "meter"

    @property
    def price(self) -> TokenPrice:
        return self.declared

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        prompt = self._characters(messages) // 4 + 4 * len(messages) + 60 * len(tools)
        limit = settings.max_tokens if settings is not None else None
        self.requests.append((prompt, limit))
        n = len(self.requests)
        if tools and n <= self.steps:
            call = ToolCall(id=f"c{n}", name="calculator", arguments={"expression": f"{n}*{n}"})
            content, calls, out = f"step {n}: " + "thinking " * 20, (call,), 80
        else:
            # distinct words: an answer that repeats itself is not used
            content, calls, out = "final: " + " ".join(f"w{i:05}" for i in range(230)), (), 400
        if limit is not None:
            out = min(out, limit)
            content = content[: out * 4]
        usage = Usage(
            input_tokens=prompt,
            output_tokens=out,
            requests=1,
            cost=prompt * self.price_in + out * self.price_out,
        )
        return ModelResponse(content=content, tool_calls=calls, usage=usage)

    def _characters(self, messages: Sequence[Message]) -> int:
        """The characters of the messages, counting only those added since the last request
        while the conversation only grows (a run of 100 cycles would count 5,000 twice)."""
        counted = self._counted
        if (
            not counted
            or len(messages) < len(counted)
            or messages[len(counted) - 1] is not counted[-1]
        ):
            counted.clear()
            self._text = 0
        for message in messages[len(counted) :]:
            self._text += len(message.content) + len(str(getattr(message, "tool_calls", "")))
            counted.append(message)
        return self._text


def run_meter(model: Meter, limits: Limits) -> Any:
    return asyncio.run(Agent(model, [calculator], limits=limits).run("count " * 50))


@settings(max_examples=60, deadline=None)
@given(budget=st.integers(min_value=200, max_value=20_000))
def test_the_final_answer_never_takes_the_run_over_its_token_budget(budget: int) -> None:
    model = Meter(steps=100)
    result = run_meter(model, Limits(max_cycles=None, max_total_tokens=budget))
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    if result.output_after_stop:
        assert result.usage.total_tokens <= budget
        _, limit = model.requests[-1]
        assert limit is not None and limit >= 32
    else:
        assert len(model.requests) == result.cycles  # no room: not requested
    if budget >= 1000:  # room for a cycle like the first and an answer
        assert result.output_after_stop


@settings(max_examples=60, deadline=None)
@given(budget=st.floats(min_value=0.002, max_value=0.2))
def test_the_final_answer_never_takes_the_run_over_its_cost_budget(budget: float) -> None:
    # output tokens cost four times as much as input tokens
    model = Meter(steps=100, price_in=1e-6, price_out=4e-6)
    result = run_meter(model, Limits(max_cycles=None, max_cost=budget))
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert result.output_after_stop
    assert result.usage.cost <= budget


@settings(max_examples=60, deadline=None)
@given(budget=st.floats(min_value=0.002, max_value=0.2))
def test_a_known_price_keeps_the_final_answer_within_the_cost_budget(budget: float) -> None:
    # the same prices, declared: room is kept at them rather than at a blended guess
    price = TokenPrice(1.0, 4.0)
    model = Meter(steps=100, price_in=1e-6, price_out=4e-6, declared=price)
    result = run_meter(model, Limits(max_cycles=None, max_cost=budget))
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert result.output_after_stop
    assert result.usage.cost <= budget


def test_a_known_price_leaves_more_of_the_budget_to_work_with() -> None:
    # the blended guess takes every output token as 8 times the average token: it
    # stops earlier than the model's real prices require
    limits = Limits(max_cycles=None, max_cost=0.05)
    guessed = run_meter(Meter(steps=100, price_in=1e-6, price_out=4e-6), limits)
    known = run_meter(
        Meter(steps=100, price_in=1e-6, price_out=4e-6, declared=TokenPrice(1.0, 4.0)), limits
    )
    assert known.output_after_stop and known.usage.cost <= 0.05
    assert known.cycles > guessed.cycles


def test_a_model_without_a_price_is_refused_under_a_cost_limit() -> None:
    class Unpriced(Meter):
        @property
        def price(self) -> None:
            return None

    with pytest.raises(UserError, match="max_cost needs a price for meter"):
        run_meter(Unpriced(steps=1), Limits(max_cost=1.0))
    # without a cost limit it runs
    assert run_meter(Unpriced(steps=1), Limits()).stop_reason is StopReason.COMPLETED


def test_a_budget_stop_keeps_room_for_the_answer() -> None:
    model = Meter(steps=100)
    result = run_meter(model, Limits(max_cycles=None, max_total_tokens=8000))
    assert result.output_after_stop and result.output.startswith("final: ")
    assert result.usage.total_tokens <= 8000
    assert "kept for the next request and the final answer" in result.stop_detail
    # without final answers the same budget runs more cycles, and never spends past it
    plain = Meter(steps=100)
    spent = asyncio.run(
        Agent(
            plain,
            [calculator],
            limits=Limits(max_cycles=None, max_total_tokens=8000),
            policy=StopPolicy(final_answer=False),
        ).run("count " * 50)
    )
    assert spent.cycles > result.cycles and spent.usage.total_tokens <= 8000


def test_no_room_no_final_request() -> None:
    model = Meter(steps=100)
    result = run_meter(model, Limits(max_cycles=None, max_total_tokens=200))
    assert result.cycles == 1  # the first request is made: it shows what one costs
    assert not result.output_after_stop
    assert len(model.requests) == 1


# --- resuming a stopped run ---------------------------------------------------------------


async def test_a_resumed_run_that_stops_again_at_once_does_not_ask_again(tmp_path: Any) -> None:
    store = RunStore(tmp_path / "runs.db")
    first = scripted(*counting(2), "answer after two")
    agent = Agent(first, [calculator], limits=Limits(max_cycles=2), store=store)
    stopped = await agent.run("count", run_id="r")
    assert stopped.output == "answer after two" and stopped.output_after_stop
    summary = store.get_run("r")
    assert summary.output == "answer after two" and summary.output_after_stop
    again = scripted("never asked")
    resumed = await resume(
        "r", store=store, agent=Agent(again, [calculator], limits=Limits(max_cycles=2))
    )
    assert resumed.stop_reason is StopReason.MAX_CYCLES
    assert resumed.output == "answer after two" and resumed.output_after_stop
    assert again.requests == []
    assert store.load("r").messages == list(stopped.messages)
    # with more cycles the run goes on, and a new stop gets a new answer
    more = scripted(call("calculator", expression="9+1"), "answer after three")
    later = await resume(
        "r", store=store, agent=Agent(more, [calculator], limits=Limits(max_cycles=3))
    )
    assert later.output == "answer after three" and later.output_after_stop
    assert later.cycles == 3
    store.close()


# --- budget in sight -------------------------------------------------------------------


async def test_at_80_percent_of_a_budget_the_model_sees_what_remains_once() -> None:
    model = scripted(*counting(4), "done within budget")
    result = await Agent(model, [calculator], limits=Limits(max_cycles=5)).run("x")
    assert result.stop_reason is StopReason.COMPLETED
    notes = [
        (n, m.content)
        for n, request in enumerate(model.requests)
        for m in request.messages
        if isinstance(m, UserMessage) and m.content.startswith("Budget note")
    ]
    # 4 of 5 cycles used before the fifth request: the note comes then, and only once
    assert [n for n, _ in notes] == [4]
    assert "Left: 1 of 5 cycles" in notes[0][1]
    nudged = [e for e in result.events if isinstance(e, Nudged)]
    assert [(e.about, e.cycle) for e in nudged] == [("budget", 4)]
