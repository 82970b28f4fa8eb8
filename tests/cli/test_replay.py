"""``convergent replay``: the summary, --json, --set, --calibrate, --html, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import invoke
from replay.conftest import TAU, labelled_corpus, labelled_run, write_json, write_lines


def test_the_summary_names_the_corpus_and_the_successful_runs_cut(tmp_path: Path) -> None:
    corpus = labelled_corpus(tmp_path / "runs.jsonl")
    done = invoke("replay", str(corpus))
    assert done.returncode == 0 and done.stderr == ""  # no progress bar off a terminal
    first, second = done.stdout.splitlines()[:2]
    assert first == (
        "None of your 2 successful runs would be cut; 6 replies of your 2 failed runs saved "
        "(2 stopped)."
    )
    assert second.startswith("convergent replay: 4 runs from 1 corpus; settings: library defaults")
    row = next(line for line in done.stdout.splitlines() if "2 / 2 / 0" in line)
    assert "0 (0)" in row
    assert "(2 failed or unlabelled runs stopped: --details lists them)" in done.stdout
    detailed = invoke("replay", str(corpus), "--details")
    assert "failed, stopped: bad-loop: stalled by max_repeated_calls" in detailed.stdout
    assert "real loop nudged: good-polls (status x3" in detailed.stdout


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
    assert "successful, cut at a real loop: good-polls: stalled by max_repeated_calls" in text


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
    assert done.stdout.startswith("With the chosen settings: None of your 2 successful runs")
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
    assert "4 runs from 1 corpus" in done.stdout
    assert "1 run or file could not be read" in done.stdout.splitlines()[0]


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


def test_the_table_fits_a_pipe_and_wide_shows_every_column(tmp_path: Path) -> None:
    corpus = str(labelled_corpus(tmp_path / "a-rather-long-folder-name" / "runs.jsonl"))
    done = invoke("replay", corpus)
    assert max(map(len, _table_lines(done.stdout))) <= 100
    wide = invoke("replay", corpus, "--wide")
    table = _table_lines(wide.stdout)
    assert max(map(len, table)) > 100 and any(corpus in line for line in table)
    assert table[0].count("┳") == 10 and _table_lines(done.stdout)[0].count("┳") == 5


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]


def test_control_sequences_in_a_recording_never_reach_the_output(tmp_path: Path) -> None:
    title = "\x1b]0;pwned\x07"  # sets the window title
    clipboard = "\x1b]52;c;ZWNobyBoaQ==\x07"  # writes the clipboard
    same = (f"status{clipboard}", {"job": 1}, "pending\x1b[2J", False)
    path = write_lines(tmp_path / "runs.jsonl", [labelled_run(f"run{title}", [same] * 5, True)])
    for args in ([], ["--details"], ["--wide"]):
        done = invoke("replay", str(path), *args)
        assert done.returncode == 0
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout
        assert "\x1b" not in done.stderr
    assert "run\\x1b]0;pwned\\x07" in invoke("replay", str(path)).stdout
    csi = write_lines(  # an 8-bit control sequence and a right-to-left override
        tmp_path / "c1.jsonl", [labelled_run("c1\x9b2J\u202eevil", [same] * 5, True)]
    )
    as_json = invoke("replay", str(csi), "--json").stdout
    assert "\x9b" not in as_json and "\u202e" not in as_json
    assert json.loads(as_json)["report"]["corpora"][0]["stopped"][0]["name"].startswith("c1\x9b")


def test_a_setting_of_the_wrong_type_is_one_line(tmp_path: Path) -> None:
    corpus = str(labelled_corpus(tmp_path / "runs.jsonl"))
    for pair, message in (
        ('max_repeated_calls="x"', "max_repeated_calls"),
        ("final_answer=3", "final_answer: input should be a valid boolean"),
        ("record_events=false", "unknown setting 'record_events'"),
        ("mcp_servers=[]", "unknown setting 'mcp_servers'"),
    ):
        done = invoke("replay", corpus, "--set", pair)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
    listed = invoke("replay", corpus, "--set", "nope=1").stderr
    assert "verifier" not in listed and "mcp_servers" not in listed  # only JSON settings
    assert "max_repeated_calls" in listed and "poll_gap" in listed


def test_declarations_on_the_command_line_and_in_a_file(tmp_path: Path) -> None:
    # the third poll repeats and gets the note; the fourth, which would say done, runs
    # only if the tool is declared to change nothing (more)
    polls = [("status", {"job": 1}, result, False) for result in ("q", "q", "q", "done")]
    corpus = str(write_lines(tmp_path / "runs.jsonl", [labelled_run("polls", polls, True)]))

    def cut(*options: str) -> int:
        done = invoke("replay", corpus, *options, "--json")
        assert done.returncode == 0, done.stderr
        count: int = json.loads(done.stdout)["report"]["total"]["successful_cut"]
        return count

    assert cut() == 1
    assert cut("--reads", "status,search") == cut("--read-only", "status") == 0
    assert cut("--idempotent", "status") == 0
    assert cut("--writes", "status") == 1
    for key in ("reads", "read_only", "idempotent"):
        declared = write_json(tmp_path / f"{key}.json", {key: ["status"]})
        assert cut("--declare", str(declared)) == 0
    writes = write_json(tmp_path / "writes.json", {"writes": ["status"]})
    assert cut("--declare", str(writes)) == 1
    for bad, message in (
        (("--mistake-if", "("), "--mistake-if '(': not a regular expression"),
        (("--reads", "status", "--writes", "status"), "'status' is declared both reads"),
        (("--declare", str(writes), "--idempotent", "status"), "declared both idempotent"),
    ):
        done = invoke("replay", corpus, *bad)
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_success_if_says_which_runs_it_could_not_label_and_why(tmp_path: Path) -> None:
    unanswered = labelled_run("cut-short", [("status", {"job": 1}, "q", False)], True)
    unanswered["messages"] = unanswered["messages"][:-2]  # it ends on its tool call
    del unanswered["success"]
    answered = labelled_run("answered", [("status", {"job": 1}, "q", False)], True)
    del answered["success"]
    corpus = str(write_lines(tmp_path / "runs.jsonl", [unanswered, answered]))
    done = invoke("replay", corpus, "--success-if", "done")
    assert (
        "--success-if could not label 1 run: no final answer: the recording ends on tool "
        "calls (1)" in done.stdout
    )
    assert "1 runs" not in done.stdout  # one run, in the singular
    detailed = invoke("replay", corpus, "--success-if", "done", "--details").stdout
    assert "read with gaps: runs.jsonl:1 cut-short: 1 calls without a recorded result" in detailed
    report = json.loads(invoke("replay", corpus, "--success-if", "done", "--json").stdout)
    reading = report["report"]["total"]["reading"]
    assert reading["unlabelled_why"] == {"no final answer: the recording ends on tool calls": 1}
    assert report["report"]["total"]["runs"] == {"successful": 1, "failed": 0, "unlabelled": 1}
