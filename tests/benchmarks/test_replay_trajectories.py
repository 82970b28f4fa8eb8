"""The replay: recorded turns through the real loop, and the report of its stops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.replay.cli import main
from benchmarks.replay.readers import read_corpus
from benchmarks.replay.replayer import _Recording, replay, replay_turn
from benchmarks.replay.trajectory import RecordedCall, RecordedReply

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
