"""The replay: recorded turns through the real loop, and the report of its stops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.replay.cli import main
from benchmarks.replay.readers import read_corpus
from benchmarks.replay.replayer import _Recording, replay, replay_turn
from benchmarks.replay.report import figures
from benchmarks.replay.trajectory import RecordedCall, RecordedReply, Trajectory

from convergent.messages import ToolSpec

FIXTURES = Path(__file__).parent / "fixtures"
TAU = FIXTURES / "tau_bench_excerpt.json"
TAU2 = FIXTURES / "tau2_bench_excerpt.json"
SRC = Path(__file__).resolve().parents[2] / "src"


def test_each_call_gets_the_result_recorded_for_it() -> None:
    lookup = RecordedCall("get", {"id": 1}, "first", False)
    again = RecordedCall("get", {"id": 1}, "second", False)
    recording = _Recording((RecordedReply("", (lookup,)), RecordedReply("", (again,))))
    spec = ToolSpec(name="get", description="get", parameters={"type": "object"})
    assert recording.respond([], [spec]).tool_calls[0].arguments == {"id": 1}
    assert recording.answer("get", {"id": 1}) == "first"
    recording.respond([], [spec])
    assert recording.answer("get", {"id": 1}) == "second"
    assert recording.notes == 0


def test_a_call_the_loop_did_not_run_does_not_shift_the_results() -> None:
    skipped = RecordedCall("get", {"id": 1}, "skipped", False)
    later = RecordedCall("get", {"id": 1}, "later", False)
    recording = _Recording((RecordedReply("", (skipped,)), RecordedReply("", (later,))))
    spec = ToolSpec(name="get", description="get", parameters={"type": "object"})
    recording.respond([], [spec])
    recording.respond([], [spec])  # the first call was answered with a note, not run
    assert recording.notes == 1
    assert recording.answer("get", {"id": 1}) == "later"


def test_the_answer_asked_for_after_a_stop_is_not_a_note() -> None:
    lookup = RecordedCall("get", {"id": 1}, "first", False)
    recording = _Recording((RecordedReply("", (lookup,)), RecordedReply("done", ())))
    spec = ToolSpec(name="get", description="get", parameters={"type": "object"})
    recording.respond([], [spec])
    # the loop stopped before running the call, then asked for an answer without tools
    answer = recording.respond([], [])
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


async def test_a_recorded_failure_fails_the_call_and_the_first_error_policy_stops() -> None:
    run = read_corpus("tau-bench", TAU)[0]
    outcome = await replay_turn(run, run.turns[1], {"on_tool_error": "stop"})
    assert (outcome.stop_reason, outcome.played, outcome.recorded, outcome.cut) == (
        "tool_error",
        2,
        5,
        True,
    )
    assert "payment amount does not add up" in outcome.detail


async def test_two_failures_then_a_success_play_to_the_end_by_default() -> None:
    run = read_corpus("tau-bench", TAU)[0]
    outcome = await replay_turn(run, run.turns[1], {})
    assert (outcome.stop_reason, outcome.played, outcome.cut) == ("completed", 5, False)


async def test_a_transfer_hands_the_run_off_where_the_recording_does() -> None:
    run = read_corpus("tau-bench", TAU)[2]
    result = await replay(run, {})
    (outcome,) = result.turns
    assert (outcome.stop_reason, outcome.played, outcome.cut) == ("handed_off", 1, False)


async def test_a_real_loop_is_stopped_before_the_recording_ends() -> None:
    run = read_corpus("tau-bench", TAU)[1]
    (outcome,) = (await replay(run, {})).turns
    assert outcome.stop_reason == "stalled"
    assert outcome.played < outcome.recorded


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_report_counts_cuts_faults_and_loops(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        f"--corpus=tau-bench:{TAU}",
        f"--corpus=tau2-bench:{TAU2}",
        "--policy=stop at the first error",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    (tau,) = report["tau_bench_excerpt.json"]
    assert tau["policy"] == "installed: stop at the first error"
    assert (tau["successful"], tau["failed"]) == (3, 1)
    # #0 fails a payment once (cut by this policy); #3 reads again after each write, which
    # is progress and is never cut
    assert [line.split(":")[0] for line in tau["successful_cut"]] == [
        "tau_bench_excerpt.json#0 task 0 trial 0",
    ]
    assert tau["real_loops_in_failed_runs"] == ["tau_bench_excerpt.json#1 task 1 trial 0"]
    assert tau["real_loops_caught"] == tau["real_loops_in_failed_runs"]
    (tau2,) = report["tau2_bench_excerpt.json"]
    assert (tau2["successful"], tau2["failed"], tau2["failed_stopped"]) == (2, 1, [])
    # three different lookups failing in one batch: the recording shows no loop there
    batch = next(line for line in tau2["successful_cut"] if "sim0001" in line)
    assert "tool_error" in batch and "policy's fault" in batch


def test_the_text_report_names_every_stop(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, f"--corpus=tau-bench:{TAU}", "--details")
    assert code == 0
    assert "== tau_bench_excerpt.json: 4 runs (3 successful, 1 failed)" in out
    assert "installed: default" in out and "installed: stop at the first error" in out
    assert "failed, stopped: tau_bench_excerpt.json#1 task 1 trial 0: stalled" in out
    # the third identical read is nudged, the fourth stops the run
    assert "real loop: get_reservation_details x4 unchanged" in out


def test_a_source_tree_is_replayed_in_its_own_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [f"--corpus=tau-bench:{TAU}", f"--corpus=tau2-bench:{TAU2}", "--json"]
    _, here, _ = run_cli(capsys, *argv)
    code, there, _ = run_cli(capsys, *argv, f"--source=tree={SRC}")
    assert code == 0
    replayed = json.loads(there)
    for rows in replayed.values():
        for row in rows:
            row["policy"] = row["policy"].replace("tree: ", "installed: ")
    assert replayed == json.loads(here)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--corpus=tau-bench"], "--corpus 'tau-bench': expected FORMAT:PATH"),
        (["--corpus=tau-bench:/no/such.json"], "/no/such.json: no such file or folder"),
        ([f"--corpus=tau-bench:{TAU}", "--source=x=/no/such"], "expected LABEL=SRC"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err


READS = frozenset({"get"})


def recorded(*replies: tuple[str, str], success: bool = False, **extra: object) -> Trajectory:
    """One turn of one-call replies ``(name, result)`` (``get`` reads, ``send`` hands off)."""
    turn = tuple(
        RecordedReply("", (RecordedCall(name, {"id": 1}, result, False),))
        for name, result in replies
    )
    return Trajectory(
        id="run",
        corpus="c",
        model="m",
        success=success,
        turns=(turn + (RecordedReply("answer", ()),),),
        read_only=READS,
        terminal=frozenset({"send"}),
        **extra,  # type: ignore[arg-type]
    )


def test_a_call_answered_with_a_note_is_remembered_with_its_reply() -> None:
    skipped = RecordedCall("get", {"id": 1}, "A", False)
    recording = _Recording((RecordedReply("", (skipped,)), RecordedReply("done", ())))
    spec = ToolSpec(name="get", description="get", parameters={"type": "object"})
    recording.respond([], [spec])
    recording.respond([], [spec])
    assert recording.replaced == [(0, skipped.key)]


async def fate(trajectory: Trajectory, options: dict[str, object]) -> tuple[str, int]:
    replayed = {trajectory.id: await replay(trajectory, options)}
    row = figures("p", [trajectory], replayed, threshold=3)
    ((_, found, repeat),) = row.loop_fates
    return found, repeat.times


async def test_a_loop_the_recording_leaves_after_the_note_is_nudged_not_stopped() -> None:
    loop = recorded(("get", "A"), ("get", "A"), ("get", "A"), ("other", "B"))
    assert await fate(loop, {}) == ("nudged", 3)
    assert await fate(loop, {"limits": {"stall_nudges": 0}}) == ("stopped", 3)


async def test_a_loop_that_goes_on_after_the_note_is_stopped() -> None:
    assert await fate(recorded(*[("get", "A")] * 4), {}) == ("stopped", 4)


async def test_a_loop_a_hand_off_ends_first_counts_as_stopped() -> None:
    assert await fate(recorded(*[("send", "sent")] * 4), {}) == ("stopped", 4)


async def test_a_loop_no_rule_sees_is_missed() -> None:
    # a threshold of 5 lets four unchanged reads through without a note
    loop = recorded(*[("get", "A")] * 4)
    assert await fate(loop, {"limits": {"max_repeated_calls": 5}}) == ("missed", 4)


def test_the_patterns_of_a_corpus_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, f"--corpus=tau-bench:{TAU}", "--patterns", "--policy=default")
    assert code == 0
    header = out.splitlines().index(next(line for line in out.splitlines() if "parallel" in line))
    successful, failed = out.splitlines()[header + 1 : header + 3]
    # successful: run #0 fails twice in a row; run #3 reads a reservation again after each
    # write, with a new result each time (a repeat with new results and a verify after write)
    assert successful.split()[:5] == ["successful", "(3)", "0", "1", "1"]
    assert successful.split()[-3:] == ["2,", "2", "1"]
    assert failed.split()[-1] == "4"
