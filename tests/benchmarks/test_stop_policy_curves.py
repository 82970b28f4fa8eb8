"""The trade-off curves: one replay per value of a threshold, the others at default."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.stop_policy_curves import main
from tests.replay.conftest import labelled_corpus


def test_each_value_is_one_point_and_the_default_is_marked(tmp_path: Path) -> None:
    corpus = labelled_corpus(tmp_path / "runs.jsonl")
    out = tmp_path / "curves"
    main([str(corpus), "--out", str(out), "--workers", "1", "--knob", "notes"])
    points = json.loads((out / "curves.json").read_text())["points"]
    assert [(point["knob"], point["value"]) for point in points] == [
        ("notes", 0),
        ("notes", 1),
        ("notes", 2),
    ]
    # the corpus's failed loop: stopped at once without a note, nudged with one
    by_value = {point["value"]: point for point in points}
    assert by_value[0]["real_loops_failed"]["stopped"] == 1 and by_value[0]["notes"] == 0
    assert by_value[1]["notes"] > 0
    table = (out / "curves.md").read_text()
    assert "| `notes` | **1** (default) |" in table
    assert (out / "stop_policy_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_declared_curves_take_each_corpus_s_own_labels(tmp_path: Path) -> None:
    from tests.benchmarks.test_replay_declared import _tau_run

    corpus = tmp_path / "gpt-4o-airline.json"
    corpus.write_text(json.dumps([_tau_run([f"reservation R{n}" for n in range(4)])]))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"task 1 trial 0": True}))  # this corpus's own label
    out = tmp_path / "curves"
    argv = [str(corpus), "--out", str(out), "--workers", "1", "--knob", "max_repeated_calls"]
    main([*argv, "--declared", "--success", f"{corpus}={labels}"])
    points = json.loads((out / "curves.json").read_text())["points"]
    by_value = {point["value"]: point for point in points}
    # the same booking four times, declared a write: cut at 3 (a real loop), not at 5
    assert (by_value[3]["successful"], by_value[3]["successful_cut"]) == (1, 1)
    assert by_value[5]["successful_cut"] == 0
    main(argv)  # undeclared, new results each time: nothing cut
    points = json.loads((out / "curves.json").read_text())["points"]
    assert all(point["successful_cut"] == 0 for point in points)
