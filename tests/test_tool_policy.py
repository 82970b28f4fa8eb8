"""The tool-error policy and terminal tools, from the evidence of real trajectories."""

from __future__ import annotations

import pytest

from convergent import (
    Agent,
    Limits,
    ScriptedModel,
    StopPolicy,
    StopReason,
    ToolError,
    UserError,
    calculator,
    tool,
)
from convergent.builtin_tools import fail
from convergent.messages import ToolResultMessage, UserMessage
from convergent.stop import STOP_PRIORITY
from convergent.testing import call, step

FAILING = StopPolicy().max_failing_steps or 0
"""The failing steps in a row that get the note (the next one stops the run)."""


@tool
def book(flight: str) -> str:
    """Book a flight; business rules may refuse it.

    Args:
        flight: Flight number.
    """
    if flight.startswith("X"):
        raise ToolError(f"flight {flight} is not bookable for this fare class")
    return f"booked {flight}"


@tool
def pay(amount: int) -> str:
    """Charge the card; a revoked card cannot be recovered from.

    Args:
        amount: Amount to charge.
    """
    raise ToolError("the card was revoked", fatal=True)


@tool(terminal=True)
def transfer_to_human_agents(summary: str) -> str:
    """Hand the conversation to a human agent.

    Args:
        summary: What the human needs to know.
    """
    return f"transferred: {summary}"


async def test_a_recovered_business_rule_error_does_not_end_the_run() -> None:
    model = ScriptedModel(
        [step(call("book", flight="X1")), step(call("book", flight="A2")), "booked A2"]
    )
    result = await Agent(model, [book]).run("book me a flight")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.ok for r in result.tool_calls] == [False, True]
    assert (
        result.messages[2].content == "book failed: flight X1 is not bookable for this fare class"
    )


@tool
def lookup(customer: str) -> str:
    """Look a customer up; the database is down.

    Args:
        customer: Customer id.
    """
    raise ToolError("database unreachable")


async def test_a_tool_failing_whatever_the_arguments_is_noted_then_stops_with_tool_error() -> None:
    steps = FAILING + 1
    model = ScriptedModel(
        [step(call("lookup", customer=f"c{n}")) for n in range(steps)] + ["could not look it up"]
    )
    result = await Agent(model, [lookup]).run("find the customer")
    assert result.stop_reason is StopReason.TOOL_ERROR
    assert result.cycles == steps
    assert result.stop_detail == (
        f"tool calls failed in {steps} steps in a row; the last: lookup failed: "
        "database unreachable"
    )
    # the note came after the last failing step before the stop, after its results
    last_request = model.requests[steps - 1].messages
    assert isinstance(last_request[-1], UserMessage)
    assert f"failed in {FAILING} steps in a row" in last_request[-1].content
    assert isinstance(last_request[-2], ToolResultMessage)
    assert result.output == "could not look it up" and result.output_after_stop


async def test_a_failing_call_repeated_is_noted_at_its_third_step() -> None:
    script = [
        step(call("lookup", customer="c1")),
        step(call("lookup", customer="c2"), call("lookup", customer="c1")),
        step(call("lookup", customer="c3"), call("lookup", customer="c1")),
        step(call("lookup", customer="c4"), call("lookup", customer="c1")),
        "could not look it up",
    ]
    model = ScriptedModel(script)
    result = await Agent(model, [lookup]).run("find the customer")
    assert result.stop_reason is StopReason.TOOL_ERROR and result.cycles == 4
    assert result.stop_detail.startswith(
        'lookup(customer="c1") failed 4 times in 4 failing steps in a row; the last error:'
    )


async def test_each_call_retried_once_is_a_search_not_a_loop() -> None:
    script = [
        step(call("lookup", customer="c1")),
        step(call("lookup", customer="c2"), call("lookup", customer="c1")),
        step(call("lookup", customer="c3"), call("lookup", customer="c2")),
        step(call("lookup", customer="c4"), call("lookup", customer="c3")),
        "could not look it up",
    ]
    result = await Agent(ScriptedModel(script), [lookup]).run("find the customer")
    # no call failed three times: the failing steps stay below their own limit
    assert result.stop_reason is StopReason.COMPLETED


async def test_failures_of_different_calls_are_the_model_searching_for_a_while() -> None:
    model = ScriptedModel([step(call("book", flight=f"X{n}")) for n in range(4)] + ["none left"])
    result = await Agent(model, [book]).run("book")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.ok for r in result.tool_calls] == [False] * 4
    # but not for ever: the step after the threshold ends the run, after a note
    tries = [step(call("book", flight=f"X{n}")) for n in range(FAILING + 3)]
    model = ScriptedModel([*tries, "none left"])
    result = await Agent(model, [book]).run("book")
    assert result.stop_reason is StopReason.TOOL_ERROR and result.cycles == FAILING + 1


async def test_six_lint_refused_edits_then_one_that_applies_complete() -> None:
    @tool(read_only=False)
    def apply_patch(patch: str) -> str:
        """Apply a patch; the linter refuses all but one.

        Args:
            patch: The change.
        """
        if patch != "p10":
            raise ToolError("lint: E999 SyntaxError: the patch was not applied")
        return "patched"

    # ten refused patches, each a new one (a search), then the eleventh applies
    script = [step(call("apply_patch", patch=f"p{n}")) for n in range(11)] + ["fixed"]
    result = await Agent(ScriptedModel(script), [apply_patch]).run("fix it")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.ok for r in result.tool_calls] == [False] * 10 + [True]


async def test_a_success_resets_the_count_and_model_mistakes_do_not_count() -> None:
    model = ScriptedModel(
        [
            step(call("book", flight="X1")),
            step(call("book", flight="X2")),
            step(call("book", wrong="argument")),  # invalid: the model's mistake
            step(call("book", flight="A1")),  # resets
            step(call("book", flight="X3")),
            step(call("book", flight="X4")),
            "gave up on X",
        ]
    )
    result = await Agent(model, [book]).run("book")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.outcome for r in result.tool_calls] == [
        "failed",
        "failed",
        "invalid",
        "ok",
        "failed",
        "failed",
    ]


async def test_a_batch_of_failures_is_one_step() -> None:
    model = ScriptedModel(
        [step(*(call("book", f"b{n}", flight=f"X{n}") for n in range(3))), "no seats"]
    )
    result = await Agent(model, [book]).run("book three")
    assert result.stop_reason is StopReason.COMPLETED
    assert len(result.tool_calls) == 3


async def test_a_fatal_failure_stops_at_once() -> None:
    model = ScriptedModel([step(call("pay", amount=10)), "unused"])
    result = await Agent(model, [pay]).run("pay")
    assert result.stop_reason is StopReason.TOOL_ERROR
    assert result.stop_detail == "pay failed: the card was revoked"
    assert result.tool_calls[0].fatal and result.cycles == 1


async def test_the_stop_policy_stops_at_the_first_failure() -> None:
    model = ScriptedModel([step(call("fail", message="no")), "unused"])
    result = await Agent(model, [fail], policy=StopPolicy(on_tool_error="stop")).run("x")
    assert result.stop_reason is StopReason.TOOL_ERROR and result.cycles == 1


async def test_no_limit_never_stops_on_failures() -> None:
    model = ScriptedModel([step(call("fail", message=f"n{n}")) for n in range(8)] + ["done"])
    policy = StopPolicy(max_repeated_failures=None, max_failing_steps=None)
    result = await Agent(model, [fail], policy=policy).run("x")
    assert result.stop_reason is StopReason.COMPLETED and len(result.tool_calls) == 8


def test_policy_options_are_checked_once_in_the_policy() -> None:
    with pytest.raises(UserError, match="on_tool_error"):
        StopPolicy(on_tool_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="max_repeated_failures must be >= 1"):
        StopPolicy(max_repeated_failures=0)


def test_the_earlier_spellings_still_work_and_warn() -> None:
    model = ScriptedModel(["x"])
    with pytest.warns(DeprecationWarning, match="StopPolicy"):
        agent = Agent(model, on_tool_error="stop", max_consecutive_tool_errors=5)
    assert agent.policy.on_tool_error == "stop" and agent.policy.max_repeated_failures == 5
    with pytest.warns(DeprecationWarning), pytest.raises(UserError, match="on_tool_error"):
        Agent(model, on_tool_error="ignore")  # type: ignore[arg-type]
    with pytest.warns(DeprecationWarning, match="StopPolicy"):
        limits = Limits(max_repeated_calls=4, stall_nudges=0)
    agent = Agent(model, limits=limits)
    assert (agent.policy.max_repeated_calls, agent.policy.notes) == (4, 0)
    assert agent.limits.max_repeated_calls is None


def test_the_old_error_count_warns_what_it_maps_to_now() -> None:
    with pytest.warns(DeprecationWarning) as warned:
        Agent(ScriptedModel(["x"]), max_consecutive_tool_errors=4)
    [warning] = [str(w.message) for w in warned]
    assert "StopPolicy(max_repeated_failures=...)" in warning
    assert "counted failed calls in a row" in warning
    assert "how often the same call (same tool, same arguments) fails" in warning
    assert "max_failing_steps" in warning


async def test_a_terminal_tool_hands_the_run_off_with_its_result() -> None:
    model = ScriptedModel([step(call("transfer_to_human_agents", summary="refund")), "unused"])
    result = await Agent(model, [transfer_to_human_agents]).run("I want a refund")
    assert result.stop_reason is StopReason.HANDED_OFF
    assert result.output == "transferred: refund"
    assert "transfer_to_human_agents" in result.stop_detail
    assert len(model.unconsumed) == 1


async def test_a_hand_off_outranks_a_failure_in_the_same_batch() -> None:
    model = ScriptedModel(
        [step(call("pay", "p", amount=5), call("transfer_to_human_agents", "t", summary="s"))]
    )
    result = await Agent(model, [pay, transfer_to_human_agents]).run("x")
    assert result.stop_reason is StopReason.HANDED_OFF
    assert [r.outcome for r in result.tool_calls] == ["failed", "ok"]


async def test_a_failed_terminal_call_is_no_hand_off() -> None:
    model = ScriptedModel(
        [
            step(call("transfer_to_human_agents", bad=1)),
            step(call("calculator", expression="1")),
            "ok",
        ]
    )
    result = await Agent(model, [transfer_to_human_agents, calculator]).run("x")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[0].outcome == "invalid"


def test_handed_off_ranks_after_completed_and_before_tool_error() -> None:
    order = list(STOP_PRIORITY)
    assert order.index(StopReason.COMPLETED) < order.index(StopReason.HANDED_OFF)
    assert order.index(StopReason.HANDED_OFF) < order.index(StopReason.TOOL_ERROR)
