"""``convergent replay``: the summary, --json, --set, --calibrate, --html, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import invoke
from replay.conftest import TAU, labelled_corpus, write_json


def test_the_summary_names_the_corpus_and_the_successful_runs_cut(tmp_path: Path) -> None:
    corpus = labelled_corpus(tmp_path / "runs.jsonl")
    done = invoke("replay", str(corpus))
    assert done.returncode == 0 and done.stderr == ""  # no progress bar off a terminal
    assert "convergent replay: 4 runs from 1 corpora; settings: library defaults" in done.stdout
    row = next(line for line in done.stdout.splitlines() if str(corpus) in line)
    assert "2 / 2 / 0" in row and "0 (0)" in row
    assert "(2 failed or unlabelled runs stopped: --details lists them)" in done.stdout
    detailed = invoke("replay", str(corpus), "--details")
    assert "failed, stopped: runs.jsonl:3 bad-loop: stalled" in detailed.stdout
    assert "real loop nudged: runs.jsonl:1 good-polls (status x3" in detailed.stdout


def test_json_is_one_object_with_every_stop(tmp_path: Path) -> None:
    done = invoke("replay", str(labelled_corpus(tmp_path / "runs.jsonl")), "--json")
    assert done.returncode == 0
    report = json.loads(done.stdout)["report"]
    (corpus,) = report["corpora"]
    assert corpus["runs"] == {"successful": 2, "failed": 2, "unlabelled": 0}
    assert [run["name"] for run in corpus["stopped"]] == ["bad-loop", "bad-failures"]
    stop = corpus["stopped"][0]["stops"][0]
    assert stop["reason"] == "stalled" and stop["real_loop"] is True
    assert [line["status"] for line in stop["calls"]][:4] == ["ran", "ran", "noted", "not run"]


def test_a_setting_is_replayed_and_a_successful_cut_is_shown(tmp_path: Path) -> None:
    corpus = str(labelled_corpus(tmp_path / "runs.jsonl"))
    done = invoke("replay", corpus, "--set", "max_repeated_calls=2", "--json")
    report = json.loads(done.stdout)["report"]
    assert report["settings"] == {"max_repeated_calls": 2}
    assert report["total"]["successful_cut"] == 1
    text = invoke("replay", corpus, "--set", "max_repeated_calls=2").stdout
    assert "successful, cut at a real loop: runs.jsonl:1 good-polls: stalled" in text


def test_labels_from_a_map_file(tmp_path: Path) -> None:
    labels = write_json(tmp_path / "labels.json", {"good-polls": False, "bad-loop": True})
    done = invoke(
        "replay", str(labelled_corpus(tmp_path / "runs.jsonl")), "--success", str(labels), "--json"
    )
    total = json.loads(done.stdout)["report"]["total"]
    assert total["successful_cut"] == 1  # bad-loop, now labelled successful, is cut


def test_calibrate_prints_the_curve_the_settings_and_the_flags(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    done = invoke(
        "replay", str(labelled_corpus(tmp_path / "runs.jsonl")), "--calibrate", "--html", str(page)
    )
    assert done.returncode == 0, done.stderr
    assert "calibration: every setting tried (the trade-off curve)" in done.stdout
    lines = done.stdout.splitlines()
    start = lines.index("chosen (no successful run cut, most failed-run replies saved):")
    code = [line.strip() for line in lines[start + 1 : start + 4]]
    assert any(line.startswith("convergent run ") for line in code)
    assert "the chosen settings, replayed:" in done.stdout
    assert page.read_text(encoding="utf-8").startswith("<!doctype html>")
    data = json.loads(
        invoke("replay", str(tmp_path / "runs.jsonl"), "--calibrate", "--json").stdout
    )
    calibration = data["calibration"]
    assert calibration["best"]["successful_cut"] == 0
    assert calibration["points"][0]["knob"] == "" and len(calibration["points"]) > 5
    assert data["report"]["settings"] == calibration["chosen"]


def test_malformed_runs_are_reported_and_skipped(tmp_path: Path) -> None:
    runs = json.loads(TAU.read_text(encoding="utf-8"))
    path = write_json(tmp_path / "mixed.json", [{"reward": "yes", "traj": []}, *runs])
    done = invoke("replay", str(path))
    assert done.returncode == 0
    assert done.stderr.splitlines()[0] == "replay: skipped 1 malformed runs or files:"
    assert "a reward must be a number" in done.stderr and "Traceback" not in done.stderr
    assert "4 runs from 1 corpora" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{unknown}"], "not a recording in a known format; expected one of: claude-code, otlp"),
        (["{tau}", "--format", "bfcl"], "expected a bfcl file: a BFCL multi-turn result file"),
        (["{tau}", "--format", "nope"], "unknown format 'nope'; expected one of:"),
        (["{tau}", "--set", "max_loops=3"], "unknown setting 'max_loops'"),
        (
            ["{tau}", "--set", "max_repeated_calls"],
            "--set 'max_repeated_calls': expected NAME=VALUE",
        ),
        (["{tau}", "--set", "max_cycles=3", "--calibrate"], "--set and --calibrate do not go"),
        (["{tau}", "--allow-real-loops"], "--allow-real-loops and --knob go with --calibrate"),
        (["{tau}", "--calibrate", "--knob", "max_loops"], "--knob 'max_loops': not a knob here"),
        (["{tau}", "--loop-threshold", "1"], "--loop-threshold must be >= 2, got 1"),
        (["{missing}"], "no such file or folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    unknown = write_json(tmp_path / "notes.json", {"hello": "world"})
    paths = {"unknown": str(unknown), "tau": str(TAU), "missing": str(tmp_path / "none.json")}
    done = invoke("replay", *[arg.format(**paths) for arg in args])
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert "Traceback" not in done.stderr
    as_json = invoke("replay", *[arg.format(**paths) for arg in args], "--json")
    assert json.loads(as_json.stdout)["exit_code"] == 2
