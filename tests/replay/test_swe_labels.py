"""SWE-bench labels where they are, failures where SWE-agent marks them, links followed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from convergent.replay import replay, replay_run
from convergent.replay._html import html_page
from convergent.replay._terminal import print_report

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
        "info": {"exit_status": "submitted", "model_stats": {"instance_cost": 0.5}},
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


def test_the_harness_results_json_beside_the_trajectories_folder(tmp_path: Path) -> None:
    run = tmp_path / "20240825_SWE-agent_gpt-4o-2024-05-13"
    _folder(run / "trajs", "a__a-1", "b__b-2", "c__c-3", "d__d-4")
    write_json(
        run / "results" / "results.json",
        {
            "resolved": ["a__a-1"],
            "unresolved_ids": ["b__b-2"],
            "empty_patch_ids": ["c__c-3"],
            "incomplete_ids": ["d__d-4"],  # not evaluated: unknown
            "submitted_ids": ["a__a-1", "b__b-2", "d__d-4"],
        },
    )
    (run / "metadata.yaml").write_text("name: SWE-agent + gpt-4o-2024-05-13\n", encoding="utf-8")
    runs = runs_of(tmp_path)
    assert {r.name: r.success for r in runs} == {
        "a__a-1": True,
        "b__b-2": False,
        "c__c-3": False,
        "d__d-4": None,
    }
    assert {r.model for r in runs} == {"gpt-4o-2024-05-13"}  # from metadata.yaml


def test_per_instance_reports_of_the_harness(tmp_path: Path) -> None:
    def mini(instance: str) -> dict[str, Any]:
        return {"instance_id": instance, "trajectory_format": "mini-swe-agent-1.1", "messages": []}

    for instance in ("a__a-1", "b__b-2", "c__c-3"):
        write_json(tmp_path / instance / f"{instance}.traj.json", mini(instance))
    for instance, resolved in (("a__a-1", True), ("b__b-2", False)):
        write_json(
            tmp_path / "eval_results" / "openai__gpt-5-mini" / instance / "report.json",
            {instance: {"patch_exists": True, "resolved": resolved}},
        )
    assert {run.name: run.success for run in runs_of(tmp_path, format="mini-swe-agent")} == {
        "a__a-1": True,
        "b__b-2": False,
        "c__c-3": None,
    }


def test_the_harness_s_own_steps_are_not_the_model_s_calls(tmp_path: Path) -> None:
    traj = _traj(
        ("", ""),  # no command the harness could parse: it asked again
        ("# look around first\nls -la", "a.py"),
        ("exit_cost", "Exited (autosubmitted)"),
    )
    (run,) = runs_of(write_json(tmp_path / "x__x-1.traj", traj))
    calls = [(c.name, c.mistake) for reply in run.turns[0] for c in reply.calls]
    assert calls == [("(no command)", True), ("ls", False)]  # no exit_cost call


_NO_TOOL_CALL = "No tool calls found in the response. Every response MUST include a tool call."
_REFUSED = {"role": "user", "content": _NO_TOOL_CALL, "extra": {"interrupt_type": "FormatError"}}


def _mini_2(*steps: str) -> dict[str, Any]:
    """A mini-swe-agent 2 run: ``bash`` a recorded call, ``refused`` an unrecorded reply."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You can run bash."},
        {"role": "user", "content": "Fix it."},
    ]
    for number, step in enumerate(steps):
        if step == "refused":
            messages.append(_REFUSED)
            continue
        arguments = '{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}'
        if step == "bash":
            arguments = json.dumps({"command": f"cat file{number}.py"})
        call = {"id": f"c{number}", "function": {"name": "bash", "arguments": arguments}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        if step == "bash":
            messages.append({"role": "tool", "tool_call_id": f"c{number}", "content": "x = 1"})
        else:
            messages.append({"role": "exit", "content": "diff --git a/x b/x"})
    return {
        "instance_id": "a__a-1",
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {},
        "messages": messages,
    }


def test_mini_swe_agent_2_replies_without_tool_calls_end_their_turns(tmp_path: Path) -> None:
    # the harness keeps only its answer to a reply without tool calls: in the loop that
    # reply is an answer (it ends the turn), its text unknown, and the answer starts the
    # next turn; every recorded reply is still replayed
    (run,) = runs_of(write_json(tmp_path / "a.traj.json", _mini_2("refused", "refused", "submit")))
    shapes = [[(reply.unrecorded, [c.name for c in reply.calls]) for reply in t] for t in run.turns]
    assert shapes == [[(True, [])], [(True, [])], [(False, ["bash"])]]
    (submission,) = run.turns[2][0].calls
    assert (submission.result, submission.mistake) == ("diff --git a/x b/x", False)
    assert run.gaps == {"replies_unrecorded": 2}
    assert run.final_answer is None  # the run ends on its submission


def test_a_run_ending_at_an_unrecorded_reply_has_no_final_answer(tmp_path: Path) -> None:
    (run,) = runs_of(write_json(tmp_path / "a.traj.json", _mini_2("bash", "refused")))
    assert [len(turn) for turn in run.turns] == [2]
    assert run.turns[0][-1].unrecorded and run.final_answer is None


def test_a_stretch_of_unrecorded_replies_past_max_mistakes_then_a_fix_is_not_cut(
    tmp_path: Path,
) -> None:
    # as gpt-5-mini's resolved runs: 19 replies without a tool call, a call, 10 more, the
    # submission; each unrecorded reply ends its turn (completed), none is a mistake
    steps = ["refused"] * 19 + ["bash"] + ["refused"] * 10 + ["submit"]
    path = write_json(tmp_path / "a__a-1" / "a__a-1.traj.json", _mini_2(*steps))
    report = replay([path], success={"a__a-1": True}, settings={"max_mistakes": 12})
    total = report.total
    assert total.successful_cut == 0 and total.loop_counts("successful") == (0, 0, 0)
    assert total.gaps["replies_unrecorded"] == 29 and total.gapped_runs["replies_unrecorded"] == 1
    reading = report.to_dict()["corpora"][0]["reading"]
    assert reading["gaps"]["replies_unrecorded"] == 29
    out = Console(record=True, width=200)
    print_report(report, out, details=False, wide=False)
    assert (
        "29 replies the recording does not hold (their harness refused them), each ending a "
        "turn, in 1 run" in out.export_text()
    )
    assert "replies the recording does not hold" in html_page(report)


def test_an_unrecorded_reply_is_played_as_an_answer_not_an_empty_reply(tmp_path: Path) -> None:
    # an empty reply is one the loop asks to go on; with no continuation allowed it would
    # end the turn model_error, a stop the recording never shows
    path = write_json(tmp_path / "a__a-1" / "a__a-1.traj.json", _mini_2("refused", "submit"))
    (run,) = runs_of(path)
    replayed = asyncio.run(replay_run(run, {"max_continuations": 0}))
    assert [(turn.stop_reason, turn.rule, turn.extra_requests) for turn in replayed.turns] == [
        ("completed", "answered", 0),
        ("completed", "answered", 1),  # the run ends on its submission: one request past it
    ]


def test_the_same_refused_reply_again_is_the_same_mistake(tmp_path: Path) -> None:
    traj = _traj(("", ""), ("", ""), ("", ""), ("ls", "a.py"))
    replies = ["I will look at the file first."] * 2 + ["Let me list the files."]
    for step, reply in zip(traj["trajectory"], replies, strict=False):
        step["response"] = reply  # a reply without a command the harness could parse
    (run,) = runs_of(write_json(tmp_path / "x__x-1.traj", traj))
    calls = [call for reply in run.turns[0] for call in reply.calls]
    assert [call.mistake for call in calls] == [True, True, True, False]
    assert calls[0].key == calls[1].key != calls[2].key
