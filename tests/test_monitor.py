"""`RunMonitor`: progress-aware repeats, tool-error steps, nudges and budgets."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from pydantic import TypeAdapter

from convergent import Limits, ToolCall, Usage
from convergent.models import TokenPrice
from convergent.monitor import (
    FINAL_ANSWER_TOKENS,
    FINAL_PROMPT_TOKENS,
    MonitorState,
    RunMonitor,
    describe_call,
)
from convergent.stop import Nudge, Stall, StopReason, ToolFailure
from convergent.testing import call

READ, WRITE, UNKNOWN = True, False, None
TOOLS: dict[str, bool | None] = {
    "read": READ,
    "list_files": READ,
    "job_status": READ,
    "run_tests": None,
    "edit": None,
    "delete_file": None,
    "send_payment": None,
    "write": WRITE,
    "lookup": None,
}


def monitor(tools: Mapping[str, bool | None] | None = None, **limits: Any) -> RunMonitor:
    return RunMonitor(Limits(**limits), tools=TOOLS if tools is None else tools)


def step(m: RunMonitor, *made: tuple[ToolCall, str], outcome: str = "ok") -> Stall | None:
    """Review a batch; run it unless a stall is found; return the finding."""
    calls = [c for c, _ in made]
    found = m.review(calls)
    if found is None:
        for c, result in made:
            m.observe(c, outcome, result)
        m.end_step()
    return found


def trajectory(m: RunMonitor, steps: Iterable[tuple[ToolCall, str]]) -> list[int]:
    """Run single-call steps; return the positions (0-based) of the findings."""
    return [n for n, made in enumerate(steps) if step(m, made) is not None]


# --- the must-holds -------------------------------------------------------------------


def test_edit_then_test_loops_never_stall() -> None:
    m = monitor()
    steps = []
    for n, failing in enumerate([3, 2, 1, 0]):
        steps += [
            (call("edit", patch=f"p{n}"), "edited"),
            (call("run_tests"), f"{failing} failing"),
        ]
    assert trajectory(m, steps) == []


def test_edit_then_test_with_unchanged_test_results_never_stalls_while_edits_differ() -> None:
    m = monitor()
    steps = []
    for n in range(6):
        steps += [(call("edit", patch=f"p{n}"), "edited"), (call("run_tests"), "3 failing")]
    assert trajectory(m, steps) == []


def test_polling_whose_results_change_never_stalls() -> None:
    m = monitor()
    polls = [f"running ({n} of 6 steps)" for n in range(6)] + ["done"]
    assert trajectory(m, [(call("job_status", job="j1"), text) for text in polls]) == []


def test_checking_a_write_never_counts_toward_a_stall() -> None:
    m = monitor()
    steps = []
    for n in range(5):
        steps += [
            (call("list_files"), "a.txt b.txt"),
            (call("delete_file", path=f"tmp{n}"), f"deleted tmp{n}"),
        ]
    steps.append((call("list_files"), "a.txt b.txt"))
    assert trajectory(m, steps) == []


def test_the_same_read_with_the_same_result_stalls_at_the_third_request() -> None:
    m = monitor()
    found = [step(m, (call("read", path="a"), "hello")) for _ in range(3)]
    assert found[:2] == [None, None]
    assert found[2] == Stall(what='read(path="a")', times=3, nudge=True, positions=(0,))


def test_one_payment_sent_again_and_again_stalls_whatever_the_tool_declares() -> None:
    for flag in (None, False):
        m = monitor({"send_payment": flag})
        pay = [(call("send_payment", amount=100, to="acct-1"), "payment sent") for _ in range(4)]
        assert trajectory(m, pay)[0] == 2, flag


def test_repeats_count_per_stretch_of_no_progress_not_per_run() -> None:
    m = monitor()
    steps = []
    for n in range(4):
        steps += [(call("read", path="a"), "hello"), (call("write", n=n), "written")]
    assert trajectory(m, steps) == []


# --- the rule for read_only, branch by branch -------------------------------------


def test_a_read_only_call_with_an_unchanged_result_never_resets_other_counts() -> None:
    m = monitor()
    steps = [
        (call("read", path="a"), "x"),
        (call("list_files"), "a b"),
        (call("read", path="a"), "x"),
        (call("list_files"), "a b"),
        (call("read", path="a"), "x"),
    ]
    assert trajectory(m, steps) == [4]


def test_a_repeated_call_whose_result_changed_restarts_every_count() -> None:
    m = monitor()
    steps = [
        (call("read", path="a"), "x"),
        (call("list_files"), "a b"),
        (call("read", path="a"), "x"),
        (call("list_files"), "a b c"),  # the same call answered differently: the world moved
        (call("read", path="a"), "x"),
        (call("read", path="a"), "x"),
        (call("read", path="a"), "x"),
    ]
    assert trajectory(m, steps) == [6]


def test_a_declared_state_changing_call_always_resets_other_counts() -> None:
    m = monitor()
    steps = []
    for n in range(4):
        steps += [(call("read", path="a"), "x"), (call("write", v=n), "ok")]
    assert trajectory(m, steps) == []


def test_a_failed_call_changes_nothing_whatever_the_tool_declares() -> None:
    m = monitor()
    stalled_reads = []
    for n in range(4):
        if step(m, (call("read", path="a"), "x")) is not None:
            stalled_reads.append(n)
        # writes that fail, each time with new arguments and a new error
        step(m, (call("write", v=n), f"refused {n}"), outcome="failed")
        step(m, (call("edit", v=n), f"no such line {n}"), outcome="failed")
    # the third read of a, with only failures in between, repeats itself
    assert stalled_reads == [2, 3]


def test_an_unannotated_call_changes_state_only_with_a_new_call_result_pair() -> None:
    def steps(edit_results: list[str]) -> list[tuple[ToolCall, str]]:
        first, second, third = edit_results
        return [
            (call("edit", v=1), first),
            (call("read", path="a"), "x"),
            (call("edit", v=1), second),
            (call("list_files"), "a b"),
            (call("read", path="a"), "x"),
            (call("edit", v=1), third),
            (call("read", path="b"), "y"),
            (call("read", path="a"), "x"),
        ]

    # new results each time: each edit may have changed something
    assert trajectory(monitor(), steps(["edit 1", "edit 2", "edit 3"])) == []
    # the same edit with the same result evidently changed nothing after the first: the
    # third edit repeats itself, and the third read of a counts every read since the first
    assert trajectory(monitor(), steps(["edited"] * 3)) == [5, 7]


def test_an_unannotated_tool_counts_as_unknown_when_no_tools_are_declared() -> None:
    m = RunMonitor(Limits())
    steps = [(call("read", path="a"), "x"), (call("poke"), "done")] * 3
    assert trajectory(m, steps) != []  # the cycle read, poke with unchanged results


# --- short cycles, unknown tools, batches ----------------------------------------------


def test_a_two_call_cycle_stalls_at_the_start_of_its_third_repetition() -> None:
    m = monitor()
    assert trajectory(m, [(call("write", v=1), "ok"), (call("run_tests"), "3 failing")] * 2) == []
    assert m.review([call("write", v=1)]) == Stall(
        what="the cycle of 2 calls starting with write(v=1)", times=3, nudge=True, positions=(0,)
    )


def test_a_three_call_cycle_stalls_too() -> None:
    m = monitor()
    steps = [
        (call("write", v=1), "ok"),
        (call("read", path="a"), "x"),
        (call("run_tests"), "1 failing"),
    ] * 3
    assert trajectory(m, steps) == [6]


def test_a_cycle_whose_results_change_is_progress() -> None:
    m = monitor()
    steps = []
    for n in range(5):
        steps += [(call("write", v=1), "ok"), (call("run_tests"), f"{5 - n} failing")]
    assert trajectory(m, steps) == []


def test_calls_to_a_tool_the_run_lacks_stall_by_name_whatever_the_arguments() -> None:
    m = monitor()
    error = "unknown tool 'search'; available tools: read"
    found = []
    for n in range(3):
        made = call("search", q=f"q{n}")
        found.append(m.review([made]))
        m.observe(made, "invalid", error)
        m.end_step()
    assert found[:2] == [None, None] and found[2] is not None


def test_calls_of_one_batch_count_in_call_order() -> None:
    m = monitor()
    same = [call("read", path="a") for _ in range(3)]
    assert m.review(same) == Stall(what='read(path="a")', times=3, nudge=True, positions=(2,))
    # a call that may change something lets the calls after it count afresh
    for _ in range(2):
        step(m, (call("read", path="b"), "y"))
    assert m.review([call("read", path="b")]) is not None
    assert m.review([call("edit", v=9), call("read", path="b")]) is None


# --- nudges ------------------------------------------------------------------------------


def test_a_nudge_is_given_once_per_episode() -> None:
    m = monitor()
    for _ in range(2):
        step(m, (call("read", path="a"), "x"))
    first = m.review([call("read", path="a")])
    assert first is not None and first.nudge
    m.nudged(Nudge(StopReason.STALLED, "note"))
    again = m.review([call("read", path="a")])
    assert again is not None and not again.nudge
    # progress (something new) ends the episode: the next stall gets a fresh nudge
    step(m, (call("list_files"), "brand new listing"))
    fresh = m.review([call("read", path="a")])
    assert fresh is not None and fresh.nudge


def test_no_nudges_configured_means_no_nudge() -> None:
    m = monitor(stall_nudges=0)
    for _ in range(2):
        step(m, (call("read", path="a"), "x"))
    found = m.review([call("read", path="a")])
    assert found is not None and not found.nudge


def test_new_instructions_start_a_fresh_stretch() -> None:
    m = monitor()
    for _ in range(2):
        step(m, (call("read", path="a"), "x"))
    m.changed()
    assert m.review([call("read", path="a")]) is None


# --- tool-error steps ---------------------------------------------------------------------


def fail_step(m: RunMonitor, *failures: tuple[ToolCall, str], ok: int = 0) -> ToolFailure | None:
    for c, text in failures:
        m.observe(c, "failed", text)
    for _ in range(ok):
        m.observe(call("read", path="ok"), "ok", "fine")
    return m.end_step()


def test_a_batch_is_one_step_however_many_calls_fail() -> None:
    m = monitor()
    found = fail_step(
        m,
        (call("lookup", id="1"), "lookup failed: no user 1"),
        (call("lookup", id="2"), "lookup failed: no user 2"),
        (call("lookup", id="3"), "lookup failed: no user 3"),
    )
    assert found is None and m.state.error_streak == 1


def test_searching_with_new_calls_and_new_errors_does_not_add_to_the_streak() -> None:
    m = monitor()
    for n in range(6):
        assert fail_step(m, (call("lookup", id=str(n)), f"no user {n}")) is None
    assert m.state.error_streak == 1


def test_a_repeated_failing_call_or_error_text_adds_to_the_streak() -> None:
    m = monitor()
    assert fail_step(m, (call("lookup", id="1"), "no user 1")) is None
    assert fail_step(m, (call("lookup", id="1"), "no user 1 (retry)")) is None  # same call
    found = fail_step(m, (call("lookup", id="7"), "no user 1"))  # same error text
    assert found == ToolFailure(error="no user 1", streak=3, at_limit=True, nudge=True)


def test_a_broken_tool_fails_the_same_way_whatever_the_arguments() -> None:
    m = monitor()
    found = [fail_step(m, (call("lookup", id=str(n)), "connection refused")) for n in range(3)]
    assert found[:2] == [None, None] and found[2] is not None and found[2].streak == 3


def test_any_success_resets_the_streak() -> None:
    m = monitor()
    for _ in range(2):
        fail_step(m, (call("lookup", id="1"), "down"))
    assert fail_step(m, (call("lookup", id="1"), "down"), ok=1) is None
    assert m.state.error_streak == 0
    assert fail_step(m, (call("lookup", id="1"), "down")) is None


def test_fatal_failures_and_the_stop_policy_stop_at_once() -> None:
    m = monitor()
    fatal = call("send_payment", amount=1)
    m.observe(fatal, "failed", "card revoked", fatal=True)
    assert m.end_step() == ToolFailure(error="card revoked", fatal=True)
    strict = RunMonitor(Limits(), on_tool_error="stop")
    assert fail_step(strict, (call("lookup", id="1"), "nope"), ok=1) == ToolFailure(
        error="nope", policy=True
    )


def test_a_tool_error_nudge_is_given_once_per_streak() -> None:
    m = monitor()
    for _ in range(2):
        fail_step(m, (call("lookup", id="1"), "down"))
    first = fail_step(m, (call("lookup", id="1"), "down"))
    assert first is not None and first.nudge
    m.nudged(Nudge(StopReason.TOOL_ERROR, "note"))
    again = fail_step(m, (call("lookup", id="1"), "down"))
    assert again is not None and again.streak == 4 and not again.nudge


# --- budgets --------------------------------------------------------------------------------


def test_the_budget_note_comes_once_at_80_percent() -> None:
    m = monitor(max_cycles=10, max_total_tokens=1000)
    usage = Usage(input_tokens=300, output_tokens=100)
    assert m.budget_note(cycles=7, usage=usage, elapsed=0.0) is None
    note = m.budget_note(cycles=8, usage=usage, elapsed=0.0)
    assert note is not None and "2 of 10 cycles" in note and "600 of 1000 tokens" in note
    assert m.budget_note(cycles=9, usage=usage, elapsed=0.0) is None


def test_room_is_kept_for_one_more_cycle_and_the_final_answer() -> None:
    m = monitor(max_total_tokens=10_000)
    last = Usage(input_tokens=1000, output_tokens=200)
    # the next request: 1,200 tokens plus what came since (300 characters: 100 tokens);
    # a cycle like the last adds 200; the final request adds that cycle's 100 and a prompt
    cycle = 1300 + 200
    final = cycle + 100 + FINAL_PROMPT_TOKENS
    reserved = cycle + final + FINAL_ANSWER_TOKENS
    assert reserved == 3812
    assert m.limit(cycles=3, usage=Usage(input_tokens=6000), elapsed=0, last=last) is None
    reached = m.limit(
        cycles=3, usage=Usage(input_tokens=6200), elapsed=0, last=last, pending_chars=300
    )
    assert reached is not None and reached.limit == "max_total_tokens"
    assert reached.reserved == reserved
    # without a final answer no room is kept
    assert m.limit(cycles=3, usage=Usage(input_tokens=9000), elapsed=0) is None


def test_the_final_answer_is_capped_to_what_remains_or_skipped() -> None:
    m = monitor(max_total_tokens=3000, max_cost=1.0)
    last = Usage(input_tokens=800, output_tokens=200, cost=0.01)
    used = Usage(input_tokens=900, output_tokens=300, cost=0.2)
    # 3000 - 1200 used - (1000 + 20 for 60 characters) leaves 780: capped to the default
    assert m.final_answer_tokens(usage=used, last=last, pending_chars=60) == FINAL_ANSWER_TOKENS
    assert m.final_answer_tokens(usage=used, last=last, pending_chars=60, wanted=5000) == 780
    tight = Usage(input_tokens=1700, output_tokens=290, cost=0.2)
    assert m.final_answer_tokens(usage=tight, last=last, pending_chars=60) == 0
    # the cost budget bounds it too, with output priced 8 times the blended price
    pricey = Usage(input_tokens=900, output_tokens=300, cost=0.995)
    price = 0.01 / 1000
    expected = int((1.0 - 0.995 - price * 1020) / (price * 8))
    assert expected < 32
    assert m.final_answer_tokens(usage=pricey, last=last, pending_chars=60) == 0


def test_a_known_price_keeps_room_at_its_input_and_output_prices() -> None:
    price = TokenPrice(1.0, 4.0, tiers=((3_000, TokenPrice(2.0, 8.0)),))
    m = RunMonitor(Limits(max_cost=1.0), tools=TOOLS, price=price)
    last = Usage(input_tokens=1000, output_tokens=200, cost=price.cost(1000, 200))
    # the next cycle: 1,300 tokens in (1,200 and 100 for 300 characters), 200 out; then
    # the final request: 1,800 in (with the prompt), the answer out, both below the tier
    size, final = 1300, 1300 + 200 + 100 + FINAL_PROMPT_TOKENS
    kept = price.cost(size, 200) + price.cost(final, FINAL_ANSWER_TOKENS)
    spent = Usage(input_tokens=5000, cost=1.0 - kept)
    reached = m.limit(cycles=3, usage=spent, elapsed=0, last=last, pending_chars=300)
    assert reached is not None and reached.limit == "max_cost"
    assert reached.reserved == pytest.approx(kept)
    less = Usage(input_tokens=5000, cost=0.999 - kept)
    assert m.limit(cycles=3, usage=less, elapsed=0, last=last, pending_chars=300) is None
    # the blended guess (output 8 times the average token) keeps more
    guess = RunMonitor(Limits(max_cost=1.0), tools=TOOLS)
    guessed = guess.limit(cycles=3, usage=less, elapsed=0, last=last, pending_chars=300)
    assert guessed is not None and guessed.reserved > 1.5 * kept
    # past the tier's threshold every token of the request pays the tier's price
    long = Usage(input_tokens=4000, output_tokens=100, cost=price.cost(4000, 100))
    reached = m.limit(cycles=3, usage=Usage(cost=0.5), elapsed=0, last=long)
    assert reached is None
    big = RunMonitor(Limits(max_cost=0.1), tools=TOOLS, price=price)
    reached = big.limit(cycles=3, usage=Usage(cost=0.08), elapsed=0, last=long)
    assert reached is not None
    expected = price.cost(4100, 100) + price.cost(4100 + 100 + FINAL_PROMPT_TOKENS, 512)
    assert reached.reserved == pytest.approx(expected) == pytest.approx(0.021896)
    # at the base prices the same room would have fitted
    assert 0.08 + TokenPrice(1.0, 4.0).cost(4100, 100) + TokenPrice(1.0, 4.0).cost(4400, 512) < 0.1


def test_a_known_price_caps_the_final_answer_at_its_output_price() -> None:
    price = TokenPrice(1.0, 4.0)
    m = RunMonitor(Limits(max_cost=0.01), tools=TOOLS, price=price)
    last = Usage(input_tokens=800, output_tokens=200, cost=price.cost(800, 200))
    # the final request's prompt: 1,000 tokens and 20 for 60 characters, at $1 a million
    prompt = price.cost(1020, 0)
    used = Usage(input_tokens=5000, cost=0.01 - prompt - 100 * 4.0 / 1e6)
    room = m.final_answer_tokens(usage=used, last=last, pending_chars=60)
    assert room in (99, 100)  # 100 output tokens at $4 a million, less any rounding
    assert m.final_answer_tokens(usage=Usage(cost=0.01 - prompt), last=last, pending_chars=60) == 0
    assert m.final_answer_tokens(usage=Usage(cost=0.0099999), last=last, pending_chars=60) == 0


def test_the_state_survives_json() -> None:
    m = monitor()
    for n in range(2):
        fail_step(m, (call("lookup", id=str(n)), "down"))
    for _ in range(2):
        step(m, (call("read", path="a"), "x"))
    m.budget_note(cycles=0, usage=Usage(), elapsed=0.0)
    adapter = TypeAdapter(MonitorState)
    again = adapter.validate_python(json.loads(adapter.dump_json(m.state)))
    assert again == m.state
    resumed = RunMonitor(Limits(), tools=TOOLS, state=again)
    assert resumed.review([call("read", path="a")]) is not None


def test_describe_call_is_short_and_readable() -> None:
    assert describe_call("read", {"path": "a", "n": 2}) == 'read(path="a", n=2)'
    assert len(describe_call("write", {"text": "x" * 500})) == 100
