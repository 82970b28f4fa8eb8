"""The replay: recorded turns through the real loop, under the settings given."""

from __future__ import annotations

import pytest

from convergent import Limits
from convergent.exceptions import UserError
from convergent.messages import ToolSpec, Usage
from convergent.replay import RecordedCall, RecordedReply, Trajectory, replay_run
from convergent.replay._replayer import _Recording, replay_turn
from convergent.replay._settings import agent_arguments, placed, setting_names

from .conftest import TAU, recorded, runs_of

SPEC = ToolSpec(name="get", description="get", parameters={"type": "object"})


def test_each_call_gets_the_result_recorded_for_it() -> None:
    lookup = RecordedCall("get", {"id": 1}, "first", False)
    again = RecordedCall("get", {"id": 1}, "second", False)
    recording = _Recording((RecordedReply("", (lookup,)), RecordedReply("", (again,))))
    assert recording.respond([], [SPEC]).tool_calls[0].arguments == {"id": 1}
    assert recording.answer("get", {"id": 1}) == "first"
    recording.respond([], [SPEC])
    assert recording.answer("get", {"id": 1}) == "second"
    assert recording.notes == 0


def test_a_call_the_loop_did_not_run_does_not_shift_the_results() -> None:
    skipped = RecordedCall("get", {"id": 1}, "skipped", False)
    later = RecordedCall("get", {"id": 1}, "later", False)
    recording = _Recording((RecordedReply("", (skipped,)), RecordedReply("", (later,))))
    recording.respond([], [SPEC])
    recording.respond([], [SPEC])  # the first call was answered with a note, not run
    assert (recording.notes, recording.replaced) == (1, [(0, skipped.key)])
    assert recording.answer("get", {"id": 1}) == "later"


def test_the_answer_asked_for_after_a_stop_is_not_a_note() -> None:
    lookup = RecordedCall("get", {"id": 1}, "first", False)
    recording = _Recording((RecordedReply("", (lookup,)), RecordedReply("done", ())))
    recording.respond([], [SPEC])
    answer = recording.respond([], [])  # a request without the tools
    assert (answer.tool_calls, recording.notes, recording.extra_requests) == ((), 0, 1)
    assert recording.played == 1


def test_requests_past_the_recording_get_a_text_reply() -> None:
    recording = _Recording((RecordedReply("done", ()),))
    assert recording.respond([], []).content == "done"
    extra = recording.respond([], [])
    assert (extra.content, extra.tool_calls, recording.extra_requests) == (
        "(the recording ends here)",
        (),
        1,
    )


def test_the_recorded_usage_reaches_the_loop() -> None:
    reply = RecordedReply(
        "", (RecordedCall("get", {}, "A"),), Usage(input_tokens=7, output_tokens=3)
    )
    assert _Recording((reply,)).respond([], [SPEC]).usage.total_tokens == 10


async def test_a_recorded_failure_fails_the_call_and_the_first_error_policy_stops() -> None:
    run = runs_of(TAU)[0]
    outcome = await replay_turn(run, run.turns[1], {"on_tool_error": "stop"})
    assert (outcome.stop_reason, outcome.played, outcome.recorded, outcome.cut) == (
        "tool_error",
        2,
        5,
        True,
    )
    assert "payment amount does not add up" in outcome.detail


async def test_two_failures_then_a_success_play_to_the_end_by_default() -> None:
    run = runs_of(TAU)[0]
    outcome = await replay_turn(run, run.turns[1], {})
    assert (outcome.stop_reason, outcome.played, outcome.cut) == ("completed", 5, False)


async def test_a_transfer_hands_the_run_off_where_the_recording_does() -> None:
    run = runs_of(TAU)[2]
    (outcome,) = (await replay_run(run)).turns
    assert (outcome.stop_reason, outcome.played, outcome.cut) == ("handed_off", 1, False)


async def test_a_real_loop_is_stopped_before_the_recording_ends() -> None:
    run = runs_of(TAU)[1]
    replayed = await replay_run(run)
    (outcome,) = replayed.turns
    assert outcome.stop_reason == "stalled" and outcome.played < outcome.recorded
    assert replayed.first_cut == 0
    # a read runs and is judged on its result: the reply it stopped at ran, with a note
    # after the one before it
    assert outcome.unrun == ()
    assert outcome.noted_after == (outcome.played - 2,)


async def test_a_token_budget_counts_the_recorded_usage() -> None:
    usage = Usage(input_tokens=60, output_tokens=40)
    turn = tuple(
        RecordedReply("", (RecordedCall("step", {"n": n}, "ok"),), usage) for n in range(5)
    )
    run = Trajectory("r", "r", "t", "m", True, (turn,))
    (outcome,) = (await replay_run(run, {"max_total_tokens": 250})).turns
    assert outcome.stop_reason == "budget_exhausted" and outcome.played < 5
    (unlimited,) = (await replay_run(run)).turns
    assert (unlimited.stop_reason, unlimited.played) == ("completed", 5)


def test_settings_go_where_the_installed_convergent_takes_them() -> None:
    names = setting_names()
    assert names["max_cycles"] == "Limits" and names["on_tool_error"] == "StopPolicy"
    assert names["final_answer"] == "StopPolicy"
    assert "model" not in names and "tools" not in names
    # the earlier spellings of the policy's rules are not settings where it exists
    assert "stall_nudges" not in names and "max_consecutive_tool_errors" not in names
    grouped = placed(
        {"max_cycles": 3, "on_tool_error": "stop", "final_answer": False, "system_prompt": "x"}
    )
    assert grouped == {
        "Limits": {"max_cycles": 3},
        "StopPolicy": {"on_tool_error": "stop", "final_answer": False},
        "Agent": {"system_prompt": "x"},
    }
    arguments = agent_arguments({"max_cycles": 3})
    assert arguments["limits"] == Limits(max_cycles=3)
    assert agent_arguments({})["limits"].max_cycles is None  # budgets unlimited unless set


def test_an_unknown_or_refused_setting_is_a_user_error() -> None:
    with pytest.raises(UserError, match="unknown setting 'max_loops'; the installed convergent"):
        placed({"max_loops": 3})
    with pytest.raises(UserError):
        agent_arguments({"max_cycles": -1})


async def test_the_settings_change_what_the_loop_does() -> None:
    loop = recorded(*[("get", "A")] * 4)
    default = (await replay_run(loop)).turns[0]
    lenient = (await replay_run(loop, {"max_cycles": None, **_repeats(8)})).turns[0]
    assert default.cut and not lenient.cut


def _repeats(times: int) -> dict[str, int]:
    return {"max_repeated_calls": times}
