"""The whole replay over files, its report, and the calibration of the thresholds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from convergent.exceptions import UserError
from convergent.replay import KNOBS, Knob, available_knobs, calibrate, replay

from .conftest import labelled_corpus, labelled_run, write_lines


def test_the_report_counts_each_side_and_keeps_only_what_it_shows(tmp_path: Path) -> None:
    report = replay([labelled_corpus(tmp_path / "runs.jsonl")])
    (figures,) = report.corpora.values()
    assert (figures.runs["successful"], figures.runs["failed"]) == (2, 2)
    assert figures.successful_cut == 0
    assert [verdict.name for verdict in figures.stopped] == ["bad-loop", "bad-failures"]
    assert figures.loop_counts("failed") == (1, 0, 0)
    assert figures.saved_replies["failed"] == sum(v.replies_saved for v in figures.stopped) > 0
    data = json.loads(json.dumps(report.to_dict(), default=str))
    assert data["total"]["runs"] == {"successful": 2, "failed": 2, "unlabelled": 0}
    assert [v["name"] for v in data["corpora"][0]["stopped"]] == ["bad-loop", "bad-failures"]


def test_labels_given_override_the_recordings_own(tmp_path: Path) -> None:
    corpus = labelled_corpus(tmp_path / "runs.jsonl")
    report = replay([corpus], success={"bad-loop": True}, success_if="never matches")
    figures = report.total
    # the map wins over the rule and the recording; the rule labels every other run
    assert (figures.runs["successful"], figures.runs["failed"]) == (1, 3)
    assert figures.successful_cut == 1 and figures.policy_faults == 0  # bad-loop: a real loop


def test_calibration_keeps_every_successful_run_and_saves_the_most(tmp_path: Path) -> None:
    calibration, report = calibrate([labelled_corpus(tmp_path / "runs.jsonl")])
    best, baseline = calibration.best, calibration.baseline
    assert best is not None and best.successful_cut == 0
    assert best.replies_saved > baseline.replies_saved
    # nothing tried saves more without cutting a successful run
    assert all(
        p.successful_cut > 0 for p in calibration.points if p.replies_saved > best.replies_saved
    )
    # two repeats cut the run that polls three times: the curve has that point, not chosen
    strict = next(p for p in calibration.points if p.knob == "max_repeated_calls" and p.value == 2)
    assert strict.successful_cut == 1 and calibration.chosen.get("max_repeated_calls") != 2
    # stopping at the first error cuts the run that recovers
    first_error = next(p for p in calibration.points if p.value == "stop")
    assert first_error.successful_cut == 1 and "on_tool_error" not in calibration.chosen
    assert report.settings == calibration.chosen
    assert report.total.saved_replies["failed"] == best.replies_saved


def test_allowing_real_loops_lets_a_setting_cut_a_successful_loop(tmp_path: Path) -> None:
    looping_success = labelled_run(
        "good-but-loops", [("status", {"job": 1}, "pending", False)] * 5, True
    )
    corpus = write_lines(
        tmp_path / "runs.jsonl",
        [
            looping_success,
            labelled_run("bad", [("status", {"job": 1}, "pending", False)] * 9, False),
        ],
    )
    strict, _ = calibrate([corpus], knobs=_knob("max_repeated_calls"))
    lenient, _ = calibrate([corpus], knobs=_knob("max_repeated_calls"), allow_real_loops=True)
    assert strict.best is not None and strict.best.successful_cut == 0
    assert lenient.best is not None and lenient.best.successful_cut == 1
    assert lenient.best.policy_faults == 0
    assert lenient.best.replies_saved > strict.best.replies_saved


def _knob(name: str) -> tuple[Knob, ...]:
    return tuple(knob for knob in available_knobs() if knob.name == name)


def test_only_knobs_the_installed_convergent_takes_are_tried() -> None:
    names = [knob.name for knob in available_knobs()]
    assert names and set(names) <= {knob.name for knob in KNOBS}
    both = (
        Knob("new", (1, 2), lambda v: {"max_cycles": v}),
        Knob("old", (1, 2), lambda v: {"max_total_tokens": v}, superseded_by="new"),
        Knob("absent", (1,), lambda v: {"no_such_setting": v}),
    )
    assert [knob.name for knob in available_knobs(both)] == ["new"]
    assert [knob.name for knob in available_knobs(both[1:])] == ["old"]


def test_a_refused_value_is_reported_not_tried(tmp_path: Path) -> None:
    knob = Knob("max_cycles", (-1, 10), lambda v: {"max_cycles": v})
    calibration, _ = calibrate([labelled_corpus(tmp_path / "runs.jsonl")], knobs=(knob,))
    assert [p.value for p in calibration.points] == [None, 10]
    assert len(calibration.refused) == 1 and calibration.refused[0].startswith("max_cycles=-1: ")


def test_calibration_needs_labels(tmp_path: Path) -> None:
    unlabelled = write_lines(
        tmp_path / "runs.jsonl", [{"messages": [{"role": "user", "content": "x"}]}]
    )
    with pytest.raises(UserError, match="--calibrate needs runs with success labels"):
        calibrate([unlabelled])


def test_worker_processes_give_the_same_report(tmp_path: Path) -> None:
    corpus = labelled_corpus(tmp_path / "runs.jsonl")
    here = replay([corpus]).to_dict()
    there = replay([corpus], workers=2).to_dict()
    assert there == here


def test_a_run_nudged_but_not_stopped_is_listed_with_where(tmp_path: Path) -> None:
    corpus = write_lines(
        tmp_path / "runs.jsonl",
        [labelled_run("reads-twice", [("status", {"job": 1}, "pending", False)] * 2, True)],
    )
    (figures,) = replay([corpus], settings={"max_repeated_calls": 2}).corpora.values()
    (verdict,) = figures.nudged
    assert verdict.nudges == ((1, 2, "status"),) and verdict.stops == ()
    assert figures.to_dict()["nudged"][0]["name"] == "reads-twice"


def test_a_value_equal_to_the_current_one_is_not_replayed_again(tmp_path: Path) -> None:
    from convergent.replay._calibrate import search_knobs

    corpus = labelled_corpus(tmp_path / "runs.jsonl")
    replayed: list[dict[str, Any]] = []

    def evaluate(settings: Any) -> Any:
        replayed.append(dict(settings))
        return replay([corpus], settings=settings)

    knob = Knob("max_repeated_calls", (3, 4), lambda v: {"max_repeated_calls": v})
    calibration = search_knobs(evaluate, knobs=(knob,))
    assert replayed == [{}, {"max_repeated_calls": 4}]  # 3 is the library's default
    assert [p.value for p in calibration.points] == [None, 3, 4]
    assert calibration.points[1].replies_saved == calibration.baseline.replies_saved
