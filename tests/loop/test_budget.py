"""`Budget`: room kept for the next request and the answer after a stop, output caps that
keep a run within its budgets, the note before a budget stop, and tool-call caps."""

from __future__ import annotations

import dataclasses

import pytest

from convergent import (
    Agent,
    Limits,
    ModelResponse,
    ScriptedModel,
    StopReason,
    Usage,
    UserError,
    tool,
)
from convergent.events import Nudged
from convergent.loop.budget import (
    FINAL_ANSWER_TOKENS,
    FINAL_PROMPT_TOKENS,
    MIN_REPLY_TOKENS,
    NOTHING_REFUSED,
    Budget,
    RunTally,
)
from convergent.messages import ToolResultMessage
from convergent.models import TokenPrice
from convergent.stop import LimitReached
from convergent.testing import call, step


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def budget(
    *, used: Usage | None = None, cycles: int = 0, final_answer: bool = True, **limits: object
) -> Budget:
    tally = RunTally(cycles=cycles, usage=used or Usage())
    return Budget(Limits(**limits), tally=tally, final_answer=final_answer)  # type: ignore[arg-type]


def test_room_is_kept_for_one_more_cycle_and_the_final_answer() -> None:
    b = budget(max_total_tokens=10_000, cycles=3)
    b.last = Usage(input_tokens=1000, output_tokens=200)
    # the next request: 1,200 tokens plus what came since (300 characters: 100 tokens);
    # a reply like the last adds 200; the final request adds that and a prompt
    cycle = 1300 + 200
    final = cycle + 100 + FINAL_PROMPT_TOKENS + FINAL_ANSWER_TOKENS
    b.tally.usage = Usage(input_tokens=10_000 - cycle - final)
    reached = b.limit(300)
    assert reached is not None and reached.limit == "max_total_tokens"
    assert reached.reserved == cycle + final
    b.tally.usage = Usage(input_tokens=10_000 - cycle - final - 1)
    assert b.limit(300) is None


@pytest.mark.parametrize(
    ("replies", "room"),
    [((30,), 60), ((10,), 32), ((30, 100, 40), 200), ((400,), FINAL_ANSWER_TOKENS)],
)
def test_the_room_kept_for_the_answer_is_twice_the_runs_longest_reply(
    replies: tuple[int, ...], room: int
) -> None:
    b = budget(max_total_tokens=10**6)
    for output in replies:
        b.start_request()
        b.responded(Usage(input_tokens=1000, output_tokens=output))
    b.tally.usage = Usage(input_tokens=10**6 - 1)
    reached = b.limit()
    size, reply = 1000 + replies[-1], max(replies[-1], MIN_REPLY_TOKENS)
    assert reached is not None
    assert reached.reserved == (size + reply) + (size + reply + FINAL_PROMPT_TOKENS + room)


def test_a_small_cost_budget_goes_on_past_its_first_cycle() -> None:
    """A $0.002 budget with replies of 20 tokens: 512 tokens kept stopped it at 20 %."""
    b = Budget(Limits(max_cost=0.002), price=TokenPrice(1.0, 10.0))
    cycles = 0
    while b.limit() is None:
        b.start_request()
        b.responded(Usage(input_tokens=200, output_tokens=20))
        cycles += 1
    assert cycles == 2 and b.tally.usage.cost == pytest.approx(0.0008)


def test_without_a_final_answer_room_is_still_kept_for_the_next_request() -> None:
    b = budget(max_total_tokens=1000, final_answer=False, cycles=1)
    b.last = Usage(input_tokens=400, output_tokens=100)
    b.tally.usage = Usage(input_tokens=400, output_tokens=100)
    # the next request needs 500 tokens in and a reply like the last (100): 1,100 > 1,000
    reached = b.limit()
    assert reached is not None and reached.reserved == 600


def test_the_next_request_is_capped_to_what_the_budget_leaves() -> None:
    b = budget(max_total_tokens=2000, cycles=1)
    b.last = Usage(input_tokens=800, output_tokens=100)
    b.tally.usage = Usage(input_tokens=800, output_tokens=100)
    # 2,000 - 900 used - 900 in = 200 tokens for the reply
    assert b.request_tokens() == 200
    # no cap when what is left is above the ceiling, or above the host's own setting
    roomy = budget(max_total_tokens=10**6)
    assert roomy.request_tokens() is None and roomy.request_tokens(wanted=300) == 300


def test_a_cost_budget_caps_the_reply_at_the_output_price() -> None:
    price = TokenPrice(1.0, 4.0)
    b = Budget(Limits(max_cost=0.01), tally=RunTally(cycles=1), price=price)
    b.last = Usage(input_tokens=1000, output_tokens=0)
    b.tally.usage = Usage(cost=0.01 - price.cost(1000, 0) - 100 * 4.0 / 1e6)
    assert b.request_tokens() in (99, 100)


def test_the_budget_note_comes_once_before_any_budget_stop() -> None:
    b = budget(max_cycles=10, max_total_tokens=1000)
    b.tally.usage = Usage(input_tokens=300, output_tokens=100)
    b.tally.cycles = 7
    assert b.note() is None
    b.tally.cycles = 8
    note = b.note()
    assert note is not None and "2 of 10 cycles" in note and "600 of 1000 tokens" in note
    b.tally.cycles = 9
    assert b.note() is None


def test_the_note_comes_a_cycle_ahead_of_a_stop_that_comes_before_80_percent() -> None:
    # the room kept for the answer makes the stop come well before 80 % is used
    b = budget(max_total_tokens=10_000, cycles=2)
    b.last = Usage(input_tokens=1500, output_tokens=300)
    b.tally.usage = Usage(input_tokens=3000, output_tokens=600)
    assert b.limit() is None
    assert b.note() is not None  # two more cycles like the last would not fit
    assert b.tally.usage.total_tokens < 0.8 * 10_000


def test_a_note_comes_before_max_cycles_even_at_one_cycle() -> None:
    b = budget(max_cycles=1)
    assert b.note() is not None and b.limit() is None


def test_the_final_answer_is_capped_to_what_remains_or_skipped() -> None:
    b = budget(max_total_tokens=3000, max_cost=1.0)
    b.last = Usage(input_tokens=800, output_tokens=200, cost=0.01)
    b.tally.usage = Usage(input_tokens=900, output_tokens=300, cost=0.2)
    # 3000 - 1200 used - (1000 + 20 for 60 characters) leaves 780: capped to the default
    assert b.final_request_tokens(60) == FINAL_ANSWER_TOKENS
    assert b.final_request_tokens(60, wanted=5000) == 780
    b.tally.usage = Usage(input_tokens=1700, output_tokens=290, cost=0.2)
    assert b.final_request_tokens(60) == 0
    b.tally.usage = Usage(input_tokens=900, output_tokens=300, cost=0.995)
    assert b.final_request_tokens(60) == 0


def test_time_is_kept_for_the_answer_and_bounds_the_next_request() -> None:
    clock = Clock()
    b = Budget(Limits(max_seconds=100), clock=clock)
    b.start_request()
    clock.now = 8.0
    b.responded(Usage())
    # the longest request took 8 s: 8 s are kept for the answer after a stop
    assert b.seconds_left() == pytest.approx(100 - 8 - 8)
    clock.now = 92.0
    reached = b.limit()
    assert reached is not None and reached.limit == "max_seconds"
    assert b.final_seconds() == pytest.approx(8.0)


def test_time_outside_requests_is_known_only_when_requests_are_bracketed() -> None:
    clock = Clock()
    b = Budget(Limits(), clock=clock)
    b.start_request()
    clock.now = 5.0
    b.responded(Usage())
    clock.now = 12.0
    assert b.idle() == pytest.approx(7.0)
    b.requested(Usage())
    assert b.idle() is None


def test_tool_call_caps_admit_calls_until_a_cap_and_refuse_the_rest() -> None:
    b = budget(max_tool_calls=3)
    assert b.admit([call("a"), call("b")]) == NOTHING_REFUSED
    admitted = b.admit([call("a"), call("b"), call("c")])
    assert admitted.stop is not None and not admitted.refused
    position, limit = admitted.stop
    assert position == 1 and limit.limit == "max_tool_calls" and limit.maximum == 3
    per_tool = budget(max_calls_per_tool={"search": 2})
    assert per_tool.admit([call("search"), call("read"), call("search")]) == NOTHING_REFUSED
    admitted = per_tool.admit([call("read"), call("search")])
    assert admitted.stop is not None and admitted.stop[0] == 1
    assert admitted.stop[1].tool == "search"


def test_a_cap_that_continues_refuses_only_the_calls_past_it() -> None:
    b = budget(max_calls_per_tool={"search": 1}, on_max_calls_per_tool="continue")
    admitted = b.admit([call("search"), call("read"), call("search"), call("read")])
    assert admitted.stop is None and list(admitted.refused) == [2]
    assert admitted.refused[2].tool == "search" and b.state.tool_calls == 3
    total = budget(max_tool_calls=2, on_max_tool_calls="continue")
    admitted = total.admit([call("a"), call("b"), call("c")])
    assert admitted.stop is None and list(admitted.refused) == [2]
    # a cap that stops still stops, beside one that continues
    both = budget(max_tool_calls=2, max_calls_per_tool=1, on_max_calls_per_tool="continue")
    admitted = both.admit([call("a"), call("a"), call("b"), call("c")])
    assert list(admitted.refused) == [1]
    assert admitted.stop is not None and admitted.stop[0] == 3


def test_a_note_comes_before_a_tool_call_cap_stops_the_run() -> None:
    b = budget(max_tool_calls=10)
    b.admit([call("a")] * 4)
    assert b.note() is None
    b.admit([call("a")] * 4)  # eight used, and one more batch like it would reach the cap
    assert b.note() is not None


def test_the_first_budget_that_forbids_a_request_counts_child_runs_cycles() -> None:
    b = budget(max_cycles=10, max_total_tokens=1000, final_answer=False, cycles=3)
    assert b.limit() is None
    b.add_usage(Usage(input_tokens=5), cycles=7)  # a child run's cycles count too
    assert b.limit() == LimitReached(limit="max_cycles", used=10, maximum=10)
    b = budget(max_total_tokens=1000, final_answer=False, cycles=1)
    b.tally.usage = b.last = Usage(input_tokens=400)
    assert b.limit() is None  # 400 used, and the next request (400 in, a reply) fits
    b.tally.usage = Usage(input_tokens=600)
    reserved = 400 + MIN_REPLY_TOKENS
    assert b.limit() == LimitReached(
        limit="max_total_tokens", used=600, maximum=1000, reserved=reserved
    )


def test_what_is_left_for_a_child_run() -> None:
    b = budget(max_cycles=10, max_total_tokens=1000, max_tool_calls=6, cycles=4)
    b.tally.usage = Usage(input_tokens=300)
    b.admit([call("a")] * 2)
    left = b.remaining()
    assert (left.max_cycles, left.max_total_tokens, left.max_tool_calls) == (6, 700, 4)
    assert MIN_REPLY_TOKENS > 0


# --- in the loop ------------------------------------------------------------------------


@tool(read_only=True)
def read(part: int) -> str:
    """Read a part.

    Args:
        part: Which part.
    """
    return f"part {part}"


@tool(read_only=True)
def search(query: str) -> str:
    """Search.

    Args:
        query: What to look for.
    """
    return f"results for {query}"


def growing(cycles: int, growth: int) -> list[ModelResponse | str]:
    """Short results, while the provider counts ``growth`` more input tokens each cycle."""
    usage = [
        Usage(input_tokens=1000 + growth * n, output_tokens=50, requests=1) for n in range(cycles)
    ]
    return [dataclasses.replace(step(call("read", part=n)), usage=u) for n, u in enumerate(usage)]


async def test_the_budget_note_follows_the_growth_the_provider_reports() -> None:
    events: list[object] = []
    agent = Agent(
        ScriptedModel([*growing(30, 4000), "best answer"]),
        [read],
        limits=Limits(max_total_tokens=80_000),
    )
    result = await agent.run("read the parts", on_event=events.append)
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    notes = [e.cycle for e in events if isinstance(e, Nudged) and e.about == "budget"]
    assert notes == [result.cycles - 1]  # told before the request the budget refuses
    assert result.usage.total_tokens <= 80_000


async def test_a_cap_that_continues_refuses_its_calls_and_the_rest_of_the_batch_runs() -> None:
    script = [
        step(call("search", query="a"), call("search", query="b")),
        step(call("search", query="c"), call("read", part=1)),
        "found it in part 1",
    ]
    limits = Limits(max_calls_per_tool={"search": 2}, on_max_calls_per_tool="continue")
    result = await Agent(ScriptedModel(script), [read, search], limits=limits).run("find it")
    assert result.stop_reason is StopReason.COMPLETED and result.output == "found it in part 1"
    assert [r.name for r in result.tool_calls] == ["search", "search", "read"]
    refused = [m for m in result.messages if isinstance(m, ToolResultMessage)][2]
    assert refused.is_error and refused.content.startswith("Not run: search may be called")


async def test_a_model_that_keeps_calling_past_a_cap_stops_on_its_mistakes() -> None:
    script = [step(call("search", query="the same"))] * 10 + ["nothing"]
    limits = Limits(max_tool_calls=2, on_max_tool_calls="continue")
    result = await Agent(ScriptedModel(script), [search], limits=limits).run("find it")
    assert result.stop_reason is StopReason.STALLED
    assert len(result.tool_calls) == 2
    assert 'search(query="the same"), a call the run cannot make' in result.stop_detail


def test_a_cap_policy_is_stop_or_continue() -> None:
    with pytest.raises(UserError, match="on_max_tool_calls"):
        Limits(max_tool_calls=3, on_max_tool_calls="skip")  # type: ignore[arg-type]
