"""Verdicts: each stop placed against the recording; real loops, faults, fates, savings."""

from __future__ import annotations

from typing import Any

import pytest

from convergent.messages import Usage
from convergent.replay import RecordedCall, RecordedReply, Trajectory, judge, replay_run
from convergent.replay._verdict import (
    CUT_FAULT,
    CUT_REAL_LOOP,
    FAILED_STOPPED,
    PLAYED_THROUGH,
    UNLABELLED_STOPPED,
)

from .conftest import TAU_REUSED_IDS, recorded, runs_of


async def judged(run: Trajectory, settings: dict[str, Any] | None = None) -> Any:
    return judge(run, await replay_run(run, settings))


async def test_a_loop_the_recording_leaves_after_the_note_is_nudged_not_stopped() -> None:
    loop = recorded(("get", "A"), ("get", "A"), ("get", "A"), ("other", "B"))
    verdict = await judged(loop)
    assert verdict.loop.fate == "nudged" and verdict.loop.repeat.times == 3
    assert (verdict.verdict, verdict.notes) == (PLAYED_THROUGH, 1)
    assert (await judged(loop, {"notes": 0})).loop.fate == "stopped"


async def test_a_failing_read_repeated_gets_the_failure_note_and_is_nudged() -> None:
    # the same lookup failing the same way three times: the note of the failure streak
    # comes after the third result, and the recording then answers
    error = "Error: Reservation IFOYFZ not found"
    verdict = await judged(recorded(*[("get", error)] * 3, failed=[0, 1, 2]))
    assert verdict.loop.fate == "nudged" and verdict.loop.repeat.times == 3
    assert (verdict.verdict, verdict.notes) == (PLAYED_THROUGH, 1)


async def test_calls_to_a_name_no_tool_can_have_are_the_models_mistakes() -> None:
    # gpt-oss writes its control tokens into the name; no tool has that name, so the loop
    # answers each call as the model's mistake, the same one again: one note, then the stop
    # at the fourth
    garbled = [("echo<|channel|>commentary", "Error: invalid syntax")] * 6
    verdict = await judged(recorded(*garbled, failed=range(6)))
    stop = verdict.stop
    assert (stop.reason, verdict.notes) == ("stalled", 1)
    assert "a call the run cannot make, 4 times in one streak of mistakes" in stop.detail
    assert [line.status for line in stop.calls][:4] == ["ran", "ran", "noted", "ran"]
    off = {"max_mistakes": None, "max_repeated_mistakes": None}
    assert (await judged(recorded(*garbled, failed=range(6)), off)).stops == ()


async def test_a_loop_that_goes_on_after_the_note_is_stopped_and_saves_the_rest() -> None:
    run = recorded(*[("get", "A")] * 4, ("get", "B"), ("get", "C"))
    verdict = await judged(run)
    assert (verdict.loop.fate, verdict.verdict) == ("stopped", FAILED_STOPPED)
    stop = verdict.stop
    assert (stop.reason, stop.played, stop.recorded, stop.replies_left) == ("stalled", 4, 7, 3)
    assert stop.real_loop and stop.repeat.times == 4
    assert verdict.replies_saved == 3 and verdict.tokens_saved is None  # no usage recorded
    # the calls around the stop: a read runs, so the third ran and got a note after it,
    # and the fourth ran before the run stopped
    statuses = [(line.reply, line.status) for line in stop.calls]
    assert statuses == [
        (1, "ran"),
        (2, "ran"),
        (3, "noted"),
        (4, "ran"),
        (5, "unplayed"),
        (6, "unplayed"),
    ]


async def test_a_successful_run_cut_at_a_real_loop_is_not_the_policys_fault() -> None:
    verdict = await judged(recorded(*[("get", "A")] * 4, success=True))
    assert verdict.verdict == CUT_REAL_LOOP and verdict.real_loop_only


async def test_a_successful_run_cut_without_a_loop_is_the_policys_fault() -> None:
    run = recorded(("get", "A"), ("pay", "Error: declined"), ("get", "B"), success=True, failed=[1])
    verdict = await judged(run, {"on_tool_error": "stop"})
    assert verdict.verdict == CUT_FAULT
    assert verdict.stop.reason == "tool_error" and verdict.stop.repeat.times == 1


async def test_an_unlabelled_run_is_only_said_stopped() -> None:
    verdict = await judged(recorded(*[("get", "A")] * 4, success=None))
    assert verdict.verdict == UNLABELLED_STOPPED


async def test_a_loop_a_hand_off_ends_first_counts_as_stopped() -> None:
    verdict = await judged(recorded(*[("send", "sent")] * 4))
    assert verdict.loop.fate == "stopped" and verdict.stops == ()  # handed off: not a cut


async def test_a_loop_no_rule_sees_is_missed() -> None:
    verdict = await judged(recorded(*[("get", "A")] * 4), {"max_repeated_calls": 5})
    assert (verdict.loop.fate, verdict.loop.repeat.times) == ("missed", 4)


async def test_the_savings_count_the_recorded_usage_of_the_unplayed_replies() -> None:
    usage = Usage(input_tokens=100, output_tokens=20, cost=0.5)
    turn = tuple(RecordedReply("", (RecordedCall("get", {"id": 1}, "A"),), usage) for _ in range(6))
    run = Trajectory("r", "r", "t", "m", False, (turn,), read_only=frozenset({"get"}))
    verdict = await judged(run)
    assert verdict.stop.replies_left == 2
    assert (verdict.tokens_saved, verdict.cost_saved, verdict.tokens) == (240, 1.0, 720)


async def test_the_gpt_4o_booking_loop_with_reused_ids_is_read_as_a_booking_loop() -> None:
    (run,) = runs_of(TAU_REUSED_IDS)
    verdict = await judged(run)
    # three failing bookings in a row: a real loop of book_reservation, nudged at the third,
    # after which the recording changes course (new payment) and succeeds
    assert verdict.loop.repeat.name == "book_reservation" and verdict.loop.repeat.times == 3
    assert verdict.loop.fate == "nudged" and verdict.stops == ()


async def test_the_real_loop_proof_compares_results_as_the_policy_does() -> None:
    # the same status polled, its result differing only in the clock time it reports
    results = [f"job 7: queued (as of 12:00:{second:02d})" for second in (1, 3, 5, 7, 9)]
    verdict = await judged(recorded(*[("get", text) for text in results]))
    stop = verdict.stop
    assert stop is not None and stop.reason == "stalled" and stop.rule == "max_repeated_calls"
    assert stop.real_loop and stop.repeat.times >= 3  # not "no real loop (x1)"


def _calls(*calls: tuple[str, dict[str, Any], str, bool]) -> Trajectory:
    replies = tuple(RecordedReply("", (RecordedCall(*call),)) for call in calls)
    return Trajectory(id="r", name="r", source="t", model="m", success=None, turns=((*replies,),))


@pytest.mark.parametrize(
    ("run", "settings", "rule"),
    [
        (_calls(*[("get", {"n": 1}, "A", False)] * 4), {}, "max_repeated_calls"),
        # a new failing call each step: a search, stopped after 12 failing steps and a note
        (
            _calls(*[("pay", {"n": k}, "declined", True) for k in range(14)]),
            {},
            "max_failing_steps",
        ),
        # the same call failing again with a new error each time: a loop of that call
        (
            _calls(*[("pay", {"n": 1}, f"declined {k}", True) for k in range(8)]),
            {},
            "max_repeated_failures",
        ),
        # a call to a name no tool can have, again and again: the model's mistake
        (_calls(*[("get<|channel|>", {}, "", False)] * 5), {}, "max_repeated_mistakes"),
        (_calls(("pay", {"n": 1}, "declined", True)), {"on_tool_error": "stop"}, "on_tool_error"),
        (
            _calls(*[("get", {"n": k}, str(k), False) for k in range(5)]),
            {"max_cycles": 3},
            "max_cycles",
        ),
        (
            _calls(*[("get", {"n": k}, str(k), False) for k in range(5)]),
            {"max_tool_calls": 2},
            "max_tool_calls",
        ),
    ],
)
async def test_each_stop_names_the_rule_that_gave_it(
    run: Trajectory, settings: dict[str, Any], rule: str
) -> None:
    verdict = judge(run, await replay_run(run, settings))
    assert verdict.stop is not None and verdict.stop.rule == rule
