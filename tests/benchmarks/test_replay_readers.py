"""Corpus readers: τ-bench and τ²-bench files become the common trajectory form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.replay.readers import CorpusError, read_corpus

FIXTURES = Path(__file__).parent / "fixtures"
TAU = FIXTURES / "tau_bench_excerpt.json"
TAU2 = FIXTURES / "tau2_bench_excerpt.json"


def test_tau_bench_runs_turns_calls_and_labels() -> None:
    runs = read_corpus("tau-bench", TAU)
    assert [run.success for run in runs] == [True, False, True, True]
    assert [len(run.turns) for run in runs] == [2, 1, 1, 1]
    assert runs[0].id == "tau_bench_excerpt.json#0 task 0 trial 0"
    booking = runs[0].turns[1]
    assert [len(reply.calls) for reply in booking] == [1, 1, 1, 1, 0]
    failed = [call.failed for reply in booking for call in reply.calls]
    assert failed == [False, True, True, False]
    first_booking = booking[1].calls[0]
    assert first_booking.name == "book_reservation"
    assert first_booking.arguments == {"user_id": "mia_1", "flight": "HAT1", "paid": 100}
    assert first_booking.result is not None and first_booking.result.startswith("Error")
    assert booking[-1].content == "Booked: R1."


def test_tau2_bench_keeps_the_agent_side_and_skips_unlabelled_runs() -> None:
    runs = read_corpus("tau2-bench", TAU2)
    assert [run.id.split("#")[1] for run in runs] == [
        "sim0001-0000 task 1 trial 0",
        "sim0002-0000 task 2 trial 0",
        "sim0003-0000 task 3 trial 0",
    ]
    assert {run.model for run in runs} == {"example-model"}
    assert [run.success for run in runs] == [True, True, False]
    lookup = runs[0]
    # the user's own tool call (check_status_bar) opens a turn of its own and is not replayed
    names = [call.name for turn in lookup.turns for reply in turn for call in reply.calls]
    assert "check_status_bar" not in names
    assert len(lookup.turns) == 3
    batch = lookup.turns[1][0].calls
    assert [call.failed for call in batch] == [True, True, True]
    assert len({call.key for call in batch}) == 3


def test_a_folder_is_read_file_by_file(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text(TAU.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "a.json").write_text(TAU.read_text(encoding="utf-8"), encoding="utf-8")
    runs = read_corpus("tau-bench", tmp_path)
    assert [run.corpus for run in runs] == ["a.json"] * 4 + ["b.json"] * 4


@pytest.mark.parametrize(
    ("fmt", "content", "message"),
    [
        ("tau-bench", "{", "not a readable JSON file"),
        ("tau-bench", '{"simulations": []}', "a tau-bench file is a JSON list of runs"),
        ("tau2-bench", "[]", "a tau2-bench file is an object with a 'simulations' list"),
        ("tau-bench", '[{"reward": 1}]', "not a tau-bench file (KeyError: 'traj')"),
        ("tau-bench", '[{"reward": "yes", "traj": []}]', "a reward must be a number"),
    ],
)
def test_a_file_that_does_not_fit_is_named_with_the_reason(
    tmp_path: Path, fmt: str, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CorpusError) as caught:
        read_corpus(fmt, path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_an_unknown_format_is_named_with_the_known_ones() -> None:
    with pytest.raises(
        CorpusError,
        match=r"unknown corpus format 'swe-agent' \(known: mini-swe-agent, tau-bench, tau2-bench\)",
    ):
        read_corpus("swe-agent", TAU)


def test_missing_paths_are_reported(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no such file or folder"):
        read_corpus("tau-bench", tmp_path / "absent.json")
    with pytest.raises(CorpusError, match="no .json files"):
        read_corpus("tau-bench", tmp_path)


def test_the_fixtures_are_what_the_readers_expect() -> None:
    # guards the committed excerpts against an accidental edit
    assert len(json.loads(TAU.read_text(encoding="utf-8"))) == 4
    assert len(json.loads(TAU2.read_text(encoding="utf-8"))["simulations"]) == 4


def test_mini_swe_agent_one_bash_call_per_reply_and_labels_from_the_summary() -> None:
    runs = read_corpus("mini-swe-agent", FIXTURES / "mini_swe_agent")
    # demo__demo-3 has no label in results_summary.json
    assert [(run.id, run.success) for run in runs] == [
        ("demo__demo-1.traj.json", True),
        ("demo__demo-2.traj.json", False),
    ]
    (turn,) = runs[0].turns
    commands = [reply.calls[0].arguments["command"] for reply in turn]
    # the reply with two blocks and its format reminder are left out
    assert commands == [
        "python repro.py",
        "sed -i 's/n + 1/n/' lib.py",
        "python repro.py",
        "sed -i 's/range(1, /range(/' lib.py",
        "python repro.py",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
    ]
    first = turn[0].calls[0]
    assert (first.name, first.failed) == ("bash", False)
    assert first.result == "<returncode>1</returncode>\n<output>\nAssertionError: 3 != 2\n</output>"
    assert runs[0].model == "example/coder"
    assert runs[0].read_only == frozenset()


def test_mini_swe_agent_needs_a_folder_with_its_labels(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="a mini-swe-agent corpus is a folder"):
        read_corpus("mini-swe-agent", TAU)
    with pytest.raises(CorpusError, match="results_summary.json: no readable instances"):
        read_corpus("mini-swe-agent", tmp_path)
