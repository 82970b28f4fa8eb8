"""`RunMonitor`: progress judged by what results mean, reads judged on their results,
cycles of 2 to 5 calls, time between polls, and a streak for every kind of non-progress."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import TypeAdapter

from convergent import StopPolicy, ToolCall
from convergent.effects import Effect
from convergent.loop.monitor import RunMonitor, describe_call
from convergent.messages import CallOutcome
from convergent.state import MonitorState
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


def test_the_same_payment_with_a_new_receipt_each_time_is_stopped() -> None:
    m = monitor()
    pays = [(call("pay", to="ACME", amount=15), f"payment P-{1001 + n} sent") for n in range(8)]
    # a write's repeat is the harm: the note replaces the third, the fourth stops the run
    assert trajectory(m, pays)[:2] == [2, 3]


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
    assert found == Stall(what='read(path="a")', times=3, nudge=True, kind="repeat", wait=10.0)


def test_an_undeclared_call_runs_and_is_judged_on_its_result() -> None:
    m = monitor()
    polls = ["queued", "running", "running", "succeeded"]
    # the third call is not refused on a prediction: it runs, and says something new
    assert trajectory(m, [(call("status", job="j"), text) for text in polls]) == []


def test_an_undeclared_call_repeated_after_its_note_does_not_run() -> None:
    m = monitor()
    step(m, (call("status", job="j"), "running"))
    step(m, (call("status", job="j"), "running"))
    found = step(m, (call("status", job="j"), "running"))
    assert found == Stall(what='status(job="j")', times=3, nudge=True, wait=10.0)
    m.noted(Nudge(StopReason.STALLED, "note"))
    # it may be a write: after the note, the repeat is refused before it runs
    stop = m.review([call("status", job="j")])
    assert stop is not None and not stop.nudge and stop.positions == (0,)


def test_a_declared_write_is_noted_before_its_third_run_whatever_it_returns() -> None:
    m = monitor()
    assert step(m, (call("pay", to="ACME"), "voucher V-1 issued")) is None
    assert step(m, (call("pay", to="ACME"), "voucher V-2 issued")) is None
    found = m.review([call("pay", to="ACME")])
    assert found == Stall(what='pay(to="ACME")', times=3, nudge=True, positions=(0,), write=True)


def test_an_idempotent_call_runs_after_its_note_and_stops_on_the_same_result() -> None:
    m = monitor({"set": Effect.IDEMPOTENT})
    assert trajectory(m, [(call("set", v=1), "set to 1")] * 2) == []
    third = step(m, (call("set", v=1), "set to 1"))
    assert third is not None and third.nudge
    m.noted(Nudge(StopReason.STALLED, "note"))
    assert m.review([call("set", v=1)]) is None  # harmless to repeat: it runs
    fourth = step(m, (call("set", v=1), "set to 1"))
    assert fourth is not None and not fourth.nudge


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
    m = monitor(idle=idle, poll_gap=None, wait_gap=None)
    found = []
    for n in range(4):
        idle.now += 300.0
        if step(m, (call("status", job="j"), "running")) is not None:
            found.append(n)
    assert found[:1] == [2]


def test_a_wait_declared_a_write_without_time_passing_is_a_repeated_write() -> None:
    m = monitor()
    steps = [(call("status", job="j"), "running"), (call("wait", seconds=10), "waited")] * 6
    # without a clock, no time passes: the same write a third time, at once, is refused
    assert trajectory(m, steps)[0] == 5


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
    # not the cycle of the read and the write: the same write a third time
    assert trajectory(m, steps)[0] == 5


def test_after_a_note_on_a_cycle_any_call_of_it_stops_the_run() -> None:
    m = monitor()
    steps = [(call("a"), "ra"), (call("b"), "rb")] * 2
    assert trajectory(m, steps) == []
    assert m.review([call("a")]) is None  # undeclared: it runs, judged on its result
    note = step(m, (call("a"), "ra"))
    assert note is not None and note.kind == "cycle" and note.nudge
    m.noted(Nudge(StopReason.STALLED, "note", "cycle"))
    stop = m.review([call("b")])  # call 6
    assert stop is not None and not stop.nudge


# --- state-changing calls repeated ---------------------------------------------------------


def test_a_write_gets_its_note_no_later_than_a_read() -> None:
    m = monitor()
    ups = [(call("cd", folder=".."), "{}")] * 2
    assert trajectory(m, ups) == []
    found = m.review([call("cd", folder="..")])
    assert found is not None and found.times == 3 and found.write and found.wait is None


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


def test_a_garbled_name_repeated_is_a_repeated_mistake_not_a_repeat() -> None:
    m = monitor(max_mistakes=4)
    found = [mistake(m, "echo<|channel|>commentary") for _ in range(3)]
    assert found[:2] == [None, None]
    assert isinstance(found[2], Stall) and found[2].kind == "repeated_mistake"
    assert found[2].what == 'echo<|channel|>commentary(q="x")' and found[2].times == 3


def test_new_mistakes_each_step_are_a_search_bounded_by_the_streak() -> None:
    m = monitor(max_mistakes=5, max_repeated_mistakes=2)
    found = [mistake(m, f"tool_{n}") for n in range(5)]
    assert found[:4] == [None] * 4
    assert isinstance(found[4], Stall) and found[4].kind == "mistakes"


def test_the_same_mistake_within_a_streak_counts_even_between_others() -> None:
    m = monitor(max_mistakes=None)
    found = [mistake(m, name) for name in ("x", "y", "x", "z", "x")]
    assert found[:4] == [None] * 4
    assert isinstance(found[4], Stall) and found[4].kind == "repeated_mistake"


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


def test_a_call_that_fails_a_third_time_in_the_streak_reaches_the_repeated_limit() -> None:
    m = monitor()
    assert fail_step(m, (call("lookup", id="1"), "down")) is None
    assert fail_step(m, (call("lookup", id="1"), "down again")) is None
    found = fail_step(m, (call("lookup", id="1"), "down"))
    assert found == ToolFailure(
        error="down", streak=3, at_limit=True, nudge=True, call='lookup(id="1")', times=3
    )


def test_edits_a_b_b_a_are_no_call_failing_three_times() -> None:
    m = monitor()
    found = [
        fail_step(m, (call("edit", patch=patch), "lint error")) for patch in ("A", "B", "B", "A")
    ]
    assert found == [None] * 4 and m.state.repeated_failures == 2
    third = fail_step(m, (call("edit", patch="B"), "lint error"))
    assert third is not None and third.kind == "repeated" and third.times == 3
    assert third.call == 'edit(patch="B")' and third.streak == 5


def test_failing_steps_that_each_try_something_new_are_a_search() -> None:
    m = monitor(max_failing_steps=8)
    found = [fail_step(m, (call("edit", patch=f"p{n}"), "lint error")) for n in range(7)]
    assert found == [None] * 7


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
    same = [call("pay", to="a") for _ in range(3)]
    found = m.review(same)
    assert found is not None and found.positions == (2,)
    for _ in range(2):
        step(m, (call("pay", to="b"), "y"))
    assert m.review([call("pay", to="b")]) is not None
    # a call that may change something lets the calls after it count afresh
    assert m.review([call("edit", v=9), call("pay", to="b")]) is None


def test_a_note_is_given_once_per_episode() -> None:
    m = monitor()
    for _ in range(2):
        step(m, (call("pay", to="a"), "x"))
    first = m.review([call("pay", to="a")])
    assert first is not None and first.nudge
    m.noted(Nudge(StopReason.STALLED, "note"))
    again = m.review([call("pay", to="a")])
    assert again is not None and not again.nudge
    step(m, (call("list_files"), "brand new listing"))
    fresh = m.review([call("pay", to="a")])
    assert fresh is not None and fresh.nudge


def test_no_notes_configured_means_no_note() -> None:
    m = monitor(notes=0)
    for _ in range(2):
        step(m, (call("pay", to="a"), "x"))
    found = m.review([call("pay", to="a")])
    assert found is not None and not found.nudge


def test_the_state_survives_json() -> None:
    m = monitor()
    for n in range(2):
        fail_step(m, (call("lookup", id=str(n)), "down"))
    for _ in range(2):
        step(m, (call("pay", to="a"), "x"))
    adapter = TypeAdapter(MonitorState)
    again = adapter.validate_python(json.loads(adapter.dump_json(m.state)))
    assert again == m.state
    resumed = RunMonitor(StopPolicy(), tools=TOOLS, state=again)
    assert resumed.review([call("pay", to="a")]) is not None


def test_describe_call_is_short_and_readable() -> None:
    assert describe_call("read", {"path": "a", "n": 2}) == 'read(path="a", n=2)'
    assert len(describe_call("write", {"text": "x" * 500})) == 100


def test_a_learned_tool_joins_an_open_set_and_the_rest_stay_undeclared() -> None:
    monitor = RunMonitor(tools=None)
    monitor.learn("pay", Effect.WRITE)
    assert (monitor.effect("pay"), monitor.effect("other")) == (Effect.WRITE, Effect.UNDECLARED)
    assert monitor.tools is None  # any name still goes


def test_a_learned_tool_joins_a_named_set_without_overriding_the_callers_word() -> None:
    monitor = RunMonitor(tools={"lookup": Effect.READ})
    monitor.learn("lookup", Effect.WRITE)
    monitor.learn("pay", Effect.WRITE)
    assert (monitor.effect("lookup"), monitor.effect("pay")) == (Effect.READ, Effect.WRITE)
    assert monitor.effect("other") is None  # still the model's mistake
