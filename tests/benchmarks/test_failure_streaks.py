"""The longest streaks of failing steps and mistakes in recordings, by success label."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.failure_streaks import main
from tests.replay.conftest import labelled_corpus, labelled_run, write_lines


def test_the_longest_streaks_by_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = labelled_corpus(tmp_path / "runs.jsonl")
    assert main([f"messages:{corpus}", "--json"]) == 0
    failing = json.loads(capsys.readouterr().out)[str(corpus)]["failing"]
    assert failing["successful"]["recovered"] == 1  # one declined payment, then a good one
    assert failing["failed"]["any"] == 13 and failing["failed"]["same_call"] == 1


def test_a_declared_failure_and_the_same_call_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = ("edit", {"patch": "A"}, "lint: E999 SyntaxError", False)
    other = ("edit", {"patch": "B"}, "lint: E999 SyntaxError", False)
    applied = ("edit", {"patch": "C"}, "applied", False)
    corpus = write_lines(
        tmp_path / "runs.jsonl", [labelled_run("good", [refused, other, refused, applied], True)]
    )
    assert main([f"messages:{corpus}", "--failure-if", "messages=^lint:", "--json"]) == 0
    failing = json.loads(capsys.readouterr().out)[str(corpus)]["failing"]["successful"]
    assert (failing["recovered"], failing["recovered_same_call"]) == (3, 2)


def test_a_line_that_holds_no_run_is_passed_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    declined = [("pay", {"n": n}, "declined", True) for n in range(2)]
    run = labelled_run("good", [*declined, ("pay", {"n": 9}, "ok", False)], True)
    corpus = write_lines(tmp_path / "runs.jsonl", [{"benchmark": "x", "version": 2}, run])
    assert main([f"messages:{corpus}", "--json"]) == 0
    failing = json.loads(capsys.readouterr().out)[str(corpus)]["failing"]["successful"]
    assert (failing["runs"], failing["recovered"]) == (1, 2)
