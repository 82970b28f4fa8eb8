"""SWE-bench labels where they are, failures where SWE-agent marks them, links followed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from convergent.replay import replay

from .conftest import runs_of, write_json

REFUSED = (
    "Your proposed edit has introduced new syntax error(s). Please read this error message "
    "carefully and then retry editing the file.\nERRORS:\n- E999 IndentationError: unexpected "
    "indent\n"
)


def _traj(*steps: tuple[str, str]) -> dict[str, Any]:
    return {
        "environment": "swe_main",
        "trajectory": [
            {"action": action, "observation": observation, "response": action, "thought": ""}
            for action, observation in steps
        ],
        "history": [],
        "info": {"exit_status": "submitted", "model_stats": {"model_name": "gpt4"}},
    }


def _folder(root: Path, *instances: str) -> Path:
    for instance in instances:
        write_json(root / f"{instance}.traj", _traj(("ls", "a.py"), ("submit", "diff")))
    return root


def _labels(path: Path) -> dict[str, bool | None]:
    return {run.name: run.success for run in runs_of(path)}


def test_final_report_labels_every_run_of_its_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "cost_2_1", "a__a-1", "b__b-2", "c__c-3")
    write_json(
        folder / "final_report.json",
        {"stats": {"generated": 2, "resolved": 1}, "resolved": ["a__a-1"]},
    )
    # b was evaluated and not resolved; c made no patch: both failed
    assert _labels(tmp_path) == {"a__a-1": True, "b__b-2": False, "c__c-3": False}


def test_results_json_with_its_evaluated_lists(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run", "a__a-1", "b__b-2", "c__c-3")
    write_json(
        folder / "results.json",
        {"generated": ["a__a-1", "b__b-2"], "applied": ["a__a-1"], "resolved": ["a__a-1"]},
    )
    assert _labels(tmp_path) == {"a__a-1": True, "b__b-2": False, "c__c-3": None}


@pytest.mark.parametrize("name", ["report.json", "gpt4.eval-1.json"])
def test_a_harness_report_with_resolved_and_submitted_ids(tmp_path: Path, name: str) -> None:
    folder = _folder(tmp_path / "run", "a__a-1", "b__b-2", "c__c-3")
    write_json(
        folder / name,
        {"resolved_ids": ["a__a-1"], "submitted_ids": ["a__a-1", "b__b-2"], "total": 3},
    )
    assert _labels(tmp_path) == {"a__a-1": True, "b__b-2": False, "c__c-3": None}


def test_the_failed_half_of_the_report_is_filled(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run", "a__a-1", "b__b-2")
    write_json(folder / "final_report.json", {"resolved": ["a__a-1"]})
    assert replay([tmp_path]).total.runs == {"successful": 1, "failed": 1}


def test_runs_reached_through_links_keep_their_labels(tmp_path: Path) -> None:
    store = _folder(tmp_path / "store" / "deep" / "trajs", "a__a-1", "b__b-2")
    evaluation = tmp_path / "evaluation"
    evaluation.mkdir()
    write_json(evaluation / "final_report.json", {"resolved": ["b__b-2"]})
    (evaluation / "trajs").symlink_to(store, target_is_directory=True)
    (evaluation / "loop").symlink_to(evaluation, target_is_directory=True)  # a cycle
    assert _labels(evaluation) == {"a__a-1": False, "b__b-2": True}
    # one file linked alone: its labels are beside the link
    single = tmp_path / "single"
    single.mkdir()
    (single / "a__a-1.traj").symlink_to(store / "a__a-1.traj")
    write_json(single / "results.json", {"resolved": ["a__a-1"]})
    assert _labels(single) == {"a__a-1": True}


def test_an_edit_the_editor_refused_is_a_failed_call(tmp_path: Path) -> None:
    traj = _traj(
        ("edit 3:3\n  return n\nend_of_edit", REFUSED),
        ("edit 3:3\n  return n\nend_of_edit", REFUSED),
        ("edit 3:3\nreturn n\nend_of_edit", "File updated."),
    )
    (run,) = runs_of(write_json(tmp_path / "x__x-1.traj", traj))
    assert [call.failed for reply in run.turns[0] for call in reply.calls] == [True, True, False]


def test_a_trajectory_with_only_its_history_is_read(tmp_path: Path) -> None:
    def call(number: int, name: str, arguments: str) -> dict[str, Any]:
        function = {"name": name, "arguments": arguments}
        return {"id": f"call_{number}", "type": "function", "function": function}

    history = [
        {"role": "system", "content": "You are an autonomous programmer."},
        {"role": "user", "content": "Fix the syntax error."},
        {
            "role": "assistant",
            "content": "Find it.",
            "tool_calls": [call(1, "find_file", '{"file_name": "a.py"}')],
        },
        {"role": "tool", "content": "Found 1 match", "tool_call_ids": ["call_1"]},
        {"role": "assistant", "content": "Submit.", "tool_calls": [call(2, "submit", "{}")]},
        {"role": "tool", "content": "diff --git", "tool_call_ids": ["call_2"]},
    ]
    (run,) = runs_of(write_json(tmp_path / "function_calling_simple.traj", {"history": history}))
    calls = [(c.name, c.result) for reply in run.turns[0] for c in reply.calls]
    assert calls == [("find_file", "Found 1 match"), ("submit", "diff --git")]
    assert run.gaps == {}
