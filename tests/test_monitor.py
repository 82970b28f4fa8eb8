"""`RunMonitor`: progress judged by what results mean, reads judged on their results,
cycles of 2 to 5 calls, time between polls, and a streak for every kind of non-progress."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from pydantic import TypeAdapter

from convergent import StopPolicy, ToolCall
from convergent.messages import CallOutcome
from convergent.monitor import MonitorState, RunMonitor, describe_call
from convergent.stop import Nudge, Stall, StopReason, ToolFailure
from convergent.testing import call

READ, WRITE, UNKNOWN = True, False, None
TOOLS: dict[str, bool | None] = {
    "read": READ,
    "list_files": READ,
    "job_status": READ,
    "status": UNKNOWN,
    "run_tests": UNKNOWN,
    "edit": UNKNOWN,
    "delete_file": UNKNOWN,
    "send_payment": UNKNOWN,
    "pay": WRITE,
    "write": WRITE,
    "wait": WRITE,
    "cd": WRITE,
    "lookup": UNKNOWN,
    "a": UNKNOWN,
    "b": UNKNOWN,
    "c": UNKNOWN,
    "d": UNKNOWN,
    "e": UNKNOWN,
}


class Idle:
    """Seconds outside model requests, moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def monitor(
    tools: Mapping[str, bool | None] | None = None, idle: Idle | None = None, **rules: Any
) -> RunMonitor:
    return RunMonitor(StopPolicy(**rules), tools=TOOLS if tools is None else tools, idle=idle)


def step(
    m: RunMonitor, *made: tuple[ToolCall, str], outcome: str = "ok"
) -> Stall | ToolFailure | None:
    """Review a batch; unless a call would repeat, run it; return what was found."""
    calls = [c for c, _ in made]
    found = m.review(calls)
    if found is not None:
        return found
    for c, result in made:
        m.observe(c, CallOutcome(outcome), result)
    failure, stall = m.end_step()
    return failure or stall


def trajectory(m: RunMonitor, steps: Iterable[tuple[ToolCall, str]]) -> list[int]:
    """Run single-call steps; return the positions (0-based) of the findings.

    A finding with a note left is noted (as the loop would); the call then did not run.
    """
    found = []
    for n, made in enumerate(steps):
        finding = step(m, made)
        if finding is not None:
            found.append(n)
            if isinstance(finding, Stall) and finding.nudge:
                m.noted(Nudge(StopReason.STALLED, "note", finding.kind))
    return found


# --- progress that must never stall ---------------------------------------------------


def test_edit_then_test_loops_never_stall() -> None:
    m = monitor()
    steps = []
    for n, failing in enumerate([3, 2, 1, 0]):
        steps += [
            (call("edit", patch=f"p{n}"), "edited"),
            (call("run_tests"), f"{failing} failing"),
        ]
    assert trajectory(m, steps) == []


def test_polling_whose_results_change_never_stalls() -> None:
    m = monitor()
    polls = [f"running ({n} of 6 steps)" for n in range(6)] + ["done"]
    assert trajectory(m, [(call("status", job="j1"), text) for text in polls]) == []


def test_checking_a_write_never_counts_toward_a_stall() -> None:
    m = monitor()
    steps = []
    for n in range(5):
        steps += [
            (call("list_files"), "a.txt b.txt"),
            (call("delete_file", path=f"t{n}"), f"del t{n}"),
        ]
    assert trajectory(m, steps) == []


def test_a_declared_state_changing_call_always_resets_other_counts() -> None:
    m = monitor()
    steps = []
    for n in range(4):
        steps += [(call("read", path="a"), "x"), (call("write", v=n), "ok")]
    assert trajectory(m, steps) == []


# --- results compared by meaning --------------------------------------------------------


def test_a_status_that_differs_only_in_its_clock_time_is_a_repeat() -> None:
    m = monitor()
    polls = [(call("status", job="j1"), f"running (as of 12:00:{n:02d})") for n in range(12)]
    assert trajectory(m, polls)[:2] == [2, 3]


def test_a_count_that_moves_is_progress_even_beside_a_clock_time() -> None:
    m = monitor()
    polls = [
        (call("status", job="j1"), f"running {10 * n} % (as of 12:00:{n:02d})") for n in range(8)
    ]
    assert trajectory(m, polls) == []


@pytest.mark.xfail(
    strict=True,
    reason="the receipt is the payment's subject, so each result says something new: a "
    "declared write repeated with the same arguments is for the effect rules to catch",
)
def test_the_same_payment_with_a_new_receipt_each_time_is_stopped() -> None:
    m = monitor()
    pays = [(call("pay", to="ACME", amount=15), f"payment P-{1001 + n} sent") for n in range(8)]
    # an action may be meant to repeat: the note comes at the fourth, the stop at the fifth
    assert trajectory(m, pays)[:2] == [3, 4]


def test_a_read_keeps_its_numbered_steps() -> None:
    m = monitor()
    reads = [(call("read", path="log"), f"processing chunk_{n:04d}") for n in range(6)]
    assert trajectory(m, reads) == []


# --- reads are judged on their result ---------------------------------------------------


def test_a_read_runs_and_a_new_result_is_progress() -> None:
    m = monitor()
    assert step(m, (call("job_status", job="j"), "running")) is None
    assert step(m, (call("job_status", job="j"), "running")) is None
    # the third poll is not replaced by a note: it runs and says something new
    assert m.review([call("job_status", job="j")]) is None
    assert step(m, (call("job_status", job="j"), "done")) is None


def test_a_read_that_repeats_gets_the_note_after_it_ran_then_stops() -> None:
    m = monitor()
    found = trajectory(m, [(call("read", path="a"), "hello")] * 5)
    assert found[:2] == [2, 3]


def test_the_third_identical_read_is_found_with_its_count() -> None:
    m = monitor()
    step(m, (call("read", path="a"), "x"))
    step(m, (call("read", path="a"), "x"))
    found = step(m, (call("read", path="a"), "x"))
    assert found == Stall(what='read(path="a")', times=3, nudge=True, kind="repeat")


def test_an_unannotated_call_is_judged_before_it_runs() -> None:
    m = monitor()
    step(m, (call("status", job="j"), "running"))
    step(m, (call("status", job="j"), "running"))
    found = m.review([call("status", job="j")])
    assert found == Stall(what='status(job="j")', times=3, nudge=True, positions=(0,))


# --- time between polls -----------------------------------------------------------------


def test_a_poll_after_real_time_passed_is_a_fresh_look() -> None:
    idle = Idle()
    m = monitor(idle=idle, poll_gap=10.0)
    found = []
    for n in range(6):
        idle.now += 30.0  # a slow job: half a minute outside model requests between polls
        if step(m, (call("status", job="j"), "running")) is not None:
            found.append(n)
    assert found == []


def test_a_tight_loop_of_instant_identical_polls_still_stops_at_the_third() -> None:
    idle = Idle()
    m = monitor(idle=idle, poll_gap=10.0)
    polls = [(call("status", job="j"), "running")] * 5
    assert trajectory(m, polls)[:2] == [2, 3]


def test_time_never_counts_without_a_clock_or_a_gap() -> None:
    idle = Idle()
    m = monitor(idle=idle, poll_gap=None)
    found = []
    for n in range(4):
        idle.now += 300.0
        if step(m, (call("status", job="j"), "running")) is not None:
            found.append(n)
    assert found[:1] == [2]


def test_a_declared_wait_between_polls_breaks_the_cycle() -> None:
    m = monitor()
    steps = [(call("status", job="j"), "running"), (call("wait", seconds=10), "waited")] * 6
    # not the cycle at the third poll (position 4): the same wait, a fourth time, at once
    assert trajectory(m, steps)[0] == 7


def test_a_declared_wait_that_takes_time_lets_a_poll_run_until_the_job_is_done() -> None:
    idle = Idle()
    m = monitor(idle=idle, poll_gap=10.0)
    found = []
    for _ in range(12):
        found.append(step(m, (call("status", job="j"), "running")))
        wait = call("wait", seconds=15)
        found.append(m.review([wait]))
        idle.now += 15.0
        m.observe(wait, CallOutcome.OK, "waited")
        found += m.end_step()
    assert [finding for finding in found if finding is not None] == []


def test_an_unannotated_wait_that_takes_time_breaks_the_cycle_too() -> None:
    idle = Idle()
    m = monitor({**TOOLS, "wait": None}, idle=idle, poll_gap=10.0)
    found = []
    for n in range(6):
        if step(m, (call("status", job="j"), "running")) is not None:
            found.append(n)
        wait = call("wait", seconds=15)
        found.append(m.review([wait]))
        idle.now += 15.0  # the wait took 15 seconds
        m.observe(wait, CallOutcome.OK, "waited")
        found += [finding for finding in m.end_step() if finding is not None]
    assert [finding for finding in found if finding is not None] == []


def test_a_slow_identical_call_is_a_fresh_look_each_time() -> None:
    idle = Idle()
    m = monitor(idle=idle, poll_gap=10.0)
    for _ in range(5):
        slow = call("run_tests")
        assert m.review([slow]) is None
        idle.now += 20.0  # the test run takes 20 seconds: time passed, the rule lets it be
        m.observe(slow, CallOutcome.OK, "3 failing")
        assert m.end_step() == (None, None)


# --- cycles of 2 to 5 calls -----------------------------------------------------------


def test_cycles_of_two_to_five_calls_get_the_note_at_their_third_repetition() -> None:
    for period in range(2, 6):
        m = monitor()
        names = "abcde"[:period]
        steps = [(call(name), f"{name} result") for name in names] * 4
        found = trajectory(m, steps)
        # the note at the first call of the third repetition, the stop at the next call
        assert found[:2] == [2 * period, 2 * period + 1], period


def test_a_cycle_longer_than_the_policy_watches_is_found_later_by_its_repeats() -> None:
    steps = [(call(name), f"{name} result") for name in "abcd"] * 4
    assert trajectory(monitor(), steps)[0] == 8
    # unwatched, the cycle is found only when one of its calls repeats three times
    assert trajectory(monitor(max_cycle_length=3), steps)[0] == 11


def test_a_cycle_whose_results_change_is_progress() -> None:
    m = monitor()
    steps = []
    for n in range(5):
        steps += [(call("edit", v=1), "ok"), (call("run_tests"), f"{5 - n} failing")]
    assert trajectory(m, steps) == []


def test_a_declared_state_changing_call_breaks_any_cycle() -> None:
    m = monitor()
    steps = [(call("read", path="a"), "x"), (call("write", v=1), "ok")] * 5
    # not the cycle (it would be found at the fifth call): the same write a fourth time
    assert trajectory(m, steps)[0] == 7


def test_after_a_note_on_a_cycle_any_call_of_it_stops_the_run() -> None:
    m = monitor()
    steps = [(call("a"), "ra"), (call("b"), "rb")] * 2
    assert trajectory(m, steps) == []
    note = m.review([call("a")])
    assert note is not None and note.kind == "cycle" and note.nudge
    m.noted(Nudge(StopReason.STALLED, "note", "cycle"))
    stop = m.review([call("b")])  # call 6
    assert stop is not None and not stop.nudge


# --- state-changing calls repeated ---------------------------------------------------------


def test_a_state_changing_call_may_repeat_once_more_than_a_read() -> None:
    m = monitor()
    ups = [(call("cd", folder=".."), "{}")] * 3
    assert trajectory(m, ups) == []
    assert m.review([call("cd", folder="..")]) is not None


# --- the model's mistakes --------------------------------------------------------------


def mistake(m: RunMonitor, name: str, text: str = "unknown tool") -> Stall | ToolFailure | None:
    made = call(name, q="x")
    assert m.review([made]) is None
    m.observe(made, CallOutcome.INVALID, text)
    failure, stall = m.end_step()
    return failure or stall


def test_calls_to_tools_that_do_not_exist_form_a_streak_whatever_their_names() -> None:
    m = monitor(max_mistakes=4)
    found = [mistake(m, f"tool_{n}") for n in range(5)]
    assert found[:3] == [None, None, None]
    assert isinstance(found[3], Stall) and found[3].kind == "mistakes" and found[3].nudge


def test_a_garbled_name_repeated_is_a_mistake_not_a_repeat() -> None:
    m = monitor(max_mistakes=4)
    found = [mistake(m, "echo<|channel|>commentary") for _ in range(3)]
    assert found == [None, None, None]


def test_a_successful_call_ends_the_mistake_streak() -> None:
    m = monitor(max_mistakes=3)
    mistake(m, "x1")
    mistake(m, "x2")
    assert step(m, (call("read", path="a"), "fine")) is None
    assert mistake(m, "x3") is None


# --- failing steps ----------------------------------------------------------------------


def fail_step(m: RunMonitor, *failures: tuple[ToolCall, str], ok: int = 0) -> ToolFailure | None:
    for c, text in failures:
        m.observe(c, CallOutcome.FAILED, text)
    for _ in range(ok):
        m.observe(call("read", path="ok"), CallOutcome.OK, "fine")
    failure, _ = m.end_step()
    return failure


def test_a_batch_is_one_step_however_many_calls_fail() -> None:
    m = monitor()
    found = fail_step(
        m,
        (call("lookup", id="1"), "no user 1"),
        (call("lookup", id="2"), "no user 2"),
        (call("lookup", id="3"), "no user 3"),
    )
    assert found is None and m.state.failing_steps == 1


def test_failing_steps_with_new_arguments_and_errors_meet_the_backstop() -> None:
    m = monitor(max_failing_steps=5)
    found = [fail_step(m, (call("lookup", id=str(n)), f"error {n}")) for n in range(6)]
    assert found[:4] == [None] * 4
    assert found[4] == ToolFailure(
        error="error 4", streak=5, at_limit=True, nudge=True, kind="steps"
    )


def test_the_same_error_with_new_arguments_is_the_model_searching() -> None:
    m = monitor(max_failing_steps=5)
    text = "cannot fill above the tank capacity"
    found = [fail_step(m, (call("lookup", amount=n), text)) for n in range(4)]
    assert found == [None] * 4


def test_a_repeated_failing_call_adds_to_the_repeated_streak() -> None:
    m = monitor()
    assert fail_step(m, (call("lookup", id="1"), "down")) is None
    assert fail_step(m, (call("lookup", id="1"), "down again")) is None
    found = fail_step(m, (call("lookup", id="1"), "down"))
    assert found == ToolFailure(error="down", streak=3, at_limit=True, nudge=True)


def test_any_success_resets_the_failure_streaks() -> None:
    m = monitor()
    for _ in range(2):
        fail_step(m, (call("lookup", id="1"), "down"))
    assert fail_step(m, (call("lookup", id="1"), "down"), ok=1) is None
    assert m.state.failing_steps == m.state.repeated_failures == 0


def test_fatal_failures_and_the_stop_policy_stop_at_once() -> None:
    m = monitor()
    m.observe(call("send_payment", amount=1), CallOutcome.FAILED, "card revoked", fatal=True)
    assert m.end_step() == (ToolFailure(error="card revoked", fatal=True), None)
    strict = monitor(on_tool_error="stop")
    assert fail_step(strict, (call("lookup", id="1"), "nope"), ok=1) == ToolFailure(
        error="nope", policy=True
    )


def test_a_failure_note_is_given_once_per_streak() -> None:
    m = monitor()
    for _ in range(2):
        fail_step(m, (call("lookup", id="1"), "down"))
    first = fail_step(m, (call("lookup", id="1"), "down"))
    assert first is not None and first.nudge
    m.noted(Nudge(StopReason.TOOL_ERROR, "note", "repeated"))
    again = fail_step(m, (call("lookup", id="1"), "down"))
    assert again is not None and again.streak == 4 and not again.nudge


# --- rejected answers, unfinished replies, messages --------------------------------------


def test_rejected_answers_form_a_streak_until_something_new_is_found() -> None:
    m = monitor(max_rejected_answers=3)
    assert m.rejected("the verifier") is None
    assert m.rejected("the verifier") is None
    third = m.rejected("the verifier")
    assert third is not None and third.kind == "rejected" and third.nudge
    step(m, (call("read", path="new"), "something new"))
    assert m.rejected("the verifier") is None


def test_cut_replies_are_joined_and_counted() -> None:
    m = monitor(max_continuations=2)
    first = m.unfinished("cut", "The answer is ")
    second = m.unfinished("cut", "forty")
    third = m.unfinished("cut", "-two")
    assert (first.left, second.left, third.left) == (True, True, False)
    assert third.text == "The answer is forty-two"
    assert m.finished_reply("!") == "The answer is forty-two!"
    assert m.state.continuations == 0 and m.state.partial == ""


def test_a_repeated_message_is_not_new_but_a_new_instruction_is() -> None:
    m = monitor()
    m.task("Pay the rent to ACME.")
    assert not m.message("Pay the rent to ACME.")
    assert not m.message("  Pay the rent   to ACME. ")
    assert m.message("Pay the rent to ACME, then stop.")
    assert not m.message("Pay the rent to ACME, then stop.")


def test_new_instructions_start_a_fresh_stretch() -> None:
    m = monitor()
    for _ in range(2):
        step(m, (call("status", job="j"), "x"))
    m.changed()
    assert m.review([call("status", job="j")]) is None


# --- batches, notes, state ------------------------------------------------------------


def test_calls_of_one_batch_count_in_call_order() -> None:
    m = monitor()
    same = [call("status", job="a") for _ in range(3)]
    found = m.review(same)
    assert found is not None and found.positions == (2,)
    for _ in range(2):
        step(m, (call("status", job="b"), "y"))
    assert m.review([call("status", job="b")]) is not None
    # a call that may change something lets the calls after it count afresh
    assert m.review([call("edit", v=9), call("status", job="b")]) is None


def test_a_note_is_given_once_per_episode() -> None:
    m = monitor()
    for _ in range(2):
        step(m, (call("status", job="a"), "x"))
    first = m.review([call("status", job="a")])
    assert first is not None and first.nudge
    m.noted(Nudge(StopReason.STALLED, "note"))
    again = m.review([call("status", job="a")])
    assert again is not None and not again.nudge
    step(m, (call("list_files"), "brand new listing"))
    fresh = m.review([call("status", job="a")])
    assert fresh is not None and fresh.nudge


def test_no_notes_configured_means_no_note() -> None:
    m = monitor(notes=0)
    for _ in range(2):
        step(m, (call("status", job="a"), "x"))
    found = m.review([call("status", job="a")])
    assert found is not None and not found.nudge


def test_the_state_survives_json() -> None:
    m = monitor()
    for n in range(2):
        fail_step(m, (call("lookup", id=str(n)), "down"))
    for _ in range(2):
        step(m, (call("status", job="a"), "x"))
    adapter = TypeAdapter(MonitorState)
    again = adapter.validate_python(json.loads(adapter.dump_json(m.state)))
    assert again == m.state
    resumed = RunMonitor(StopPolicy(), tools=TOOLS, state=again)
    assert resumed.review([call("status", job="a")]) is not None


def test_describe_call_is_short_and_readable() -> None:
    assert describe_call("read", {"path": "a", "n": 2}) == 'read(path="a", n=2)'
    assert len(describe_call("write", {"text": "x" * 500})) == 100
