"""Readers: each format's files become runs of turns, calls, results and labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from convergent.exceptions import UserError
from convergent.replay import (
    FORMATS,
    Malformed,
    Trajectory,
    detect_format,
    read_runs,
    replay_run,
)

from .conftest import MINI_SWE, TAU, TAU2, TAU_REUSED_IDS, runs_of, write_json, write_lines


def calls_of(run: Trajectory) -> list[tuple[str, str | None, bool]]:
    return [
        (call.name, call.result, call.failed)
        for turn in run.turns
        for reply in turn
        for call in reply.calls
    ]


# -- tau-bench and tau2-bench ----------------------------------------------------------------


def test_tau_bench_runs_turns_calls_and_labels() -> None:
    runs = runs_of(TAU)
    assert [run.success for run in runs] == [True, False, True, True]
    assert [len(run.turns) for run in runs] == [2, 1, 1, 1]
    assert runs[0].id == "tau_bench_excerpt.json#0 task 0 trial 0"
    assert runs[0].name == "task 0 trial 0"
    booking = runs[0].turns[1]
    assert [len(reply.calls) for reply in booking] == [1, 1, 1, 1, 0]
    assert [call.failed for reply in booking for call in reply.calls] == [
        False,
        True,
        True,
        False,
    ]
    first_booking = booking[1].calls[0]
    assert first_booking.name == "book_reservation"
    assert first_booking.arguments == {"user_id": "mia_1", "flight": "HAT1", "paid": 100}
    assert booking[-1].content == "Booked: R1."


def test_a_result_goes_to_the_call_of_its_id_in_the_nearest_preceding_reply() -> None:
    # the recording reuses the id call_A for every call, as GPT-4o does
    (run,) = runs_of(TAU_REUSED_IDS)
    error = "Error: payment amount does not add up, total price is 300, but paid 100"
    assert calls_of(run) == [
        ("think", "", False),
        ("book_reservation", error, True),
        ("book_reservation", error, True),
        ("book_reservation", error, True),
        ("book_reservation", '{"reservation_id": "R1"}', False),
        ("think", "", False),
    ]


def test_tau_bench_calls_without_ids_get_the_next_result(tmp_path: Path) -> None:
    traj = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "get_user_details", "arguments": "{'id': 'u1'}"}}],
        },
        {"role": "tool", "content": "found u1"},
        {"role": "assistant", "content": "Hello u1."},
    ]
    (run,) = runs_of(write_json(tmp_path / "r.json", [{"task_id": 1, "reward": 1, "traj": traj}]))
    (reply, _) = run.turns[0]
    (call,) = reply.calls
    assert (call.arguments, call.result) == ({"id": "u1"}, "found u1")  # Python notation read


async def test_arguments_in_python_notation_that_json_cannot_hold_stay_text(
    tmp_path: Path,
) -> None:
    # a garbled call: to Python {'ignition'} is a set, which no model's JSON holds
    calls = [
        {"function": {"name": "startEngine", "arguments": "{'ignition'}"}},
        {"function": {"name": "lock", "arguments": "{'doors': {1, 2}}"}},
    ]
    traj = [
        {"role": "user", "content": "start"},
        {"role": "assistant", "tool_calls": calls},
        {"role": "tool", "content": "no such mode"},
        {"role": "tool", "content": "locked"},
        {"role": "assistant", "content": "Started."},
    ]
    (run,) = runs_of(write_json(tmp_path / "r.json", [{"task_id": 1, "reward": 1, "traj": traj}]))
    reply = run.turns[0][0]
    assert [call.arguments for call in reply.calls] == [
        {"input": "{'ignition'}"},
        {"input": "{'doors': {1, 2}}"},
    ]
    (outcome,) = (await replay_run(run)).turns  # replayed through the loop, streamed
    assert outcome.stop_reason == "completed"


def test_tau2_bench_keeps_the_agent_side_and_labels() -> None:
    runs = runs_of(TAU2)
    assert [run.name for run in runs] == [f"task {n} trial 0" for n in (1, 2, 3, 4)]
    assert {run.model for run in runs} == {"example-model"}
    # the last simulation has no reward: no label
    assert [run.success for run in runs] == [True, True, False, None]
    names = [call for call, _, _ in calls_of(runs[0])]
    assert "check_status_bar" not in names  # the simulated user's own tool call
    assert len(runs[0].turns) == 3
    batch = runs[0].turns[1][0].calls
    assert [call.failed for call in batch] == [True, True, True]


def test_a_bare_list_of_tau2_simulations_is_read_alike(tmp_path: Path) -> None:
    simulations = json.loads(TAU2.read_text(encoding="utf-8"))["simulations"]
    runs = runs_of(write_json(tmp_path / "list.json", simulations))
    assert [run.turns for run in runs] == [run.turns for run in runs_of(TAU2)]
    assert [run.success for run in runs] == [True, True, False, None]


# -- SWE-bench agents ------------------------------------------------------------------------


def test_mini_swe_agent_one_bash_call_per_reply_and_labels_from_the_summary() -> None:
    runs = runs_of(MINI_SWE)
    assert [(run.id, run.success) for run in runs] == [
        ("demo__demo-1.traj.json", True),
        ("demo__demo-2.traj.json", False),
        ("demo__demo-3.traj.json", None),  # not in results_summary.json
    ]
    (turn,) = runs[0].turns
    commands = [dict(reply.calls[0].arguments) for reply in turn if reply.calls]
    # the reply with two blocks is one its harness refused: the model's mistake
    assert commands == [
        {"command": "python repro.py"},
        {"command_blocks": 2, "reply": turn[1].content},
        {"command": "sed -i 's/n + 1/n/' lib.py"},
        {"command": "python repro.py"},
        {"command": "sed -i 's/range(1, /range(/' lib.py"},
        {"command": "python repro.py"},
        {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"},
    ]
    refused = turn[1].calls[0]
    assert (refused.name, refused.mistake, refused.failed) == ("(no command)", True, False)
    assert refused.result is not None and "EXACTLY ONE" in refused.result
    first = turn[0].calls[0]
    assert (first.name, first.failed) == ("bash", False)
    assert first.result == "<returncode>1</returncode>\n<output>\nAssertionError: 3 != 2\n</output>"
    assert runs[0].model == "example/coder"


def _mini_v2(instance: str) -> dict[str, Any]:
    def reply(command: str, number: int) -> dict[str, Any]:
        call = {
            "id": f"c{number}",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        usage = {"prompt_tokens": 100 * number, "completion_tokens": 10}
        return {
            "role": "assistant",
            "content": "THOUGHT",
            "tool_calls": [call],
            "extra": {"response": {"usage": usage}, "cost": 0.01},
        }

    return {
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": instance,
        "info": {"config": {"model": {"model_name": "deepseek-chat"}}},
        "messages": [
            {"role": "system", "content": "You can run bash."},
            {"role": "user", "content": "Fix it."},
            reply("pytest -q", 1),
            {"role": "tool", "tool_call_id": "c1", "content": "1 failed"},
            reply("pytest -q", 2),
            {"role": "tool", "tool_call_id": "c2", "content": "1 passed"},
            {"role": "exit", "content": "diff"},
        ],
    }


def test_mini_swe_agent_2_tool_calls_usage_and_a_harness_report(tmp_path: Path) -> None:
    write_json(tmp_path / "runs" / "a__a-1" / "a__a-1.traj.json", _mini_v2("a__a-1"))
    write_json(tmp_path / "runs" / "b__b-2" / "b__b-2.traj.json", _mini_v2("b__b-2"))
    report = {"resolved_ids": ["a__a-1"], "unresolved_ids": ["b__b-2"]}
    write_json(tmp_path / "runs" / "deepseek.eval-1.json", report)
    runs = runs_of(tmp_path / "runs")
    assert [(run.name, run.success, run.model) for run in runs] == [
        ("a__a-1", True, "deepseek-chat"),
        ("b__b-2", False, "deepseek-chat"),
    ]
    assert calls_of(runs[0]) == [("bash", "1 failed", False), ("bash", "1 passed", False)]
    usage = [reply.usage for reply in runs[0].turns[0]]
    assert [(u.input_tokens, u.output_tokens, u.cost) for u in usage if u] == [
        (100, 10, 0.01),
        (200, 10, 0.01),
    ]
    # runs of equally named files in different sub-folders get their folder in the id
    assert runs[0].id == str(Path("a__a-1") / "a__a-1.traj.json")


def test_swe_agent_steps_are_commands_named_by_their_first_word(tmp_path: Path) -> None:
    steps = [
        ("open src/lib.py", "[File: src/lib.py (20 lines total)]"),
        ("edit 3:3\n    return n\nend_of_edit", "File updated."),
        ("python repro.py", "ok"),
        ("submit", "diff --git ..."),
    ]
    traj = {
        "environment": "swe_main",
        "trajectory": [
            {"action": action, "observation": result, "response": f"DISCUSSION\n{action}"}
            for action, result in steps
        ],
        "history": [],
        "info": {"exit_status": "submitted", "model_stats": {"api_calls": 4}},
    }
    write_json(tmp_path / "gpt4__lib__default" / "org__lib-7.traj", traj)
    write_json(tmp_path / "gpt4__lib__default" / "results.json", {"resolved": ["org__lib-7"]})
    (run,) = runs_of(tmp_path)
    assert (run.name, run.success) == ("org__lib-7", True)
    assert [(name, result) for name, result, _ in calls_of(run)] == [
        ("open", "[File: src/lib.py (20 lines total)]"),
        ("edit", "File updated."),
        ("python", "ok"),
        ("submit", "diff --git ..."),
    ]
    assert "open" in run.read_only and "edit" not in run.read_only


# -- BFCL ------------------------------------------------------------------------------------


def _bfcl_entry(entry_id: str) -> dict[str, Any]:
    def step(calls: list[dict[str, str]], results: list[str]) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": calls},
            {"role": "handler_log", "content": "Successfully decoded model response."},
            *({"role": "tool", "content": result} for result in results),
        ]

    turn = {
        "begin_of_turn_query": [{"role": "user", "content": "Go to docs and list it."}],
        "step_0": step([{"cd": '{"folder": "docs"}'}], ['{"current_working_directory": "docs"}']),
        "step_1": step(
            [{"ls": "{}"}, {"cat": '{"file_name": "x"}'}],
            ['{"ls": ["a"]}', "Error during execution: no x"],
        ),
        "step_2": [{"role": "assistant", "content": []}],
    }
    return {
        "id": entry_id,
        "result": [[["cd"], ["ls"]]],
        "inference_log": [[{"role": "state_info"}], turn],
    }


def test_bfcl_turns_steps_results_and_the_score_file_labels(tmp_path: Path) -> None:
    result = tmp_path / "result" / "model-x" / "multi_turn" / "BFCL_v4_multi_turn_base_result.json"
    write_lines(result, [_bfcl_entry("multi_turn_base_0"), _bfcl_entry("multi_turn_base_1")])
    score = tmp_path / "score" / "model-x" / "multi_turn" / "BFCL_v4_multi_turn_base_score.json"
    write_lines(score, [{"accuracy": 0.5}, {"id": "multi_turn_base_1", "valid": False}])
    runs = runs_of(tmp_path)
    assert [(run.name, run.success, run.model) for run in runs] == [
        ("multi_turn_base_0", True, "model-x"),
        ("multi_turn_base_1", False, "model-x"),
    ]
    assert calls_of(runs[0]) == [
        ("cd", '{"current_working_directory": "docs"}', False),
        ("ls", '{"ls": ["a"]}', False),
        ("cat", "Error during execution: no x", True),
    ]
    assert [len(reply.calls) for reply in runs[0].turns[0]] == [1, 2, 0]


def test_bfcl_without_a_log_or_a_score_has_calls_only_and_no_label(tmp_path: Path) -> None:
    entry = {"id": "multi_turn_base_3", "result": [[[{"ls": "{}"}], [{"ls": "{}"}]]]}
    (run,) = runs_of(write_lines(tmp_path / "BFCL_v3_multi_turn_base_result.json", [entry]))
    assert run.success is None
    assert calls_of(run) == [("ls", None, False), ("ls", None, False)]


# -- Claude Code -----------------------------------------------------------------------------


def _assistant(message_id: str, block: dict[str, Any], **extra: Any) -> dict[str, Any]:
    message = {
        "id": message_id,
        "role": "assistant",
        "model": "claude-fake-1",
        "content": [block],
        "usage": {"input_tokens": 20, "output_tokens": 5},
    }
    return {"type": "assistant", "sessionId": "s-1", "message": message, **extra}


def _user(content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "sessionId": "s-1",
        "message": {"role": "user", "content": content},
        **extra,
    }


def test_claude_code_transcript_merges_lines_of_one_message(tmp_path: Path) -> None:
    lines = [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": "s-1"},
        _user("Please read missing.txt"),
        {"type": "attachment", "sessionId": "s-1", "attachment": {"type": "environment"}},
        _assistant("m1", {"type": "text", "text": "Let me look."}),
        _assistant(
            "m1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat x"}}
        ),
        _user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "No such file",
                    "is_error": True,
                }
            ]
        ),
        _user("Caveat: meta", isMeta=True),
        _assistant(
            "m9", {"type": "tool_use", "id": "t9", "name": "Read", "input": {}}, isSidechain=True
        ),
        _assistant(
            "m2", {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/x"}}
        ),
        _user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "body"}],
                }
            ]
        ),
        _assistant("m3", {"type": "text", "text": "Done."}),
        _user("And again please"),
        _assistant("m4", {"type": "text", "text": "Done again."}),
    ]
    path = write_lines(tmp_path / "project" / "s-1.jsonl", lines)
    assert detect_format(path) == "claude-code"
    (run,) = runs_of(path)
    assert (run.name, run.model, run.success) == ("s-1", "claude-fake-1", None)
    first, second = run.turns
    assert [reply.content for reply in first] == ["Let me look.", "", "Done."]
    assert calls_of(run) == [("Bash", "No such file", True), ("Read", "body", False)]
    assert first[0].usage is not None and first[0].usage.total_tokens == 25
    assert [reply.content for reply in second] == ["Done again."]
    assert "Read" in run.read_only and "Bash" not in run.read_only


# -- plain message lists ---------------------------------------------------------------------


OPENAI_RUN = [
    {"role": "user", "content": "weather in Oslo?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "rain", "status": "error"},
    {"role": "assistant", "content": "It rains."},
]
ANTHROPIC_RUN = [
    {"role": "user", "content": "weather in Oslo?"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "rain"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "It rains."}]},
]


@pytest.mark.parametrize("messages", [OPENAI_RUN, ANTHROPIC_RUN], ids=["openai", "anthropic"])
def test_a_message_list_is_one_run(tmp_path: Path, messages: list[Any]) -> None:
    path = write_json(tmp_path / "run.json", messages)
    assert detect_format(path) == "messages"
    (run,) = runs_of(path)
    (turn,) = run.turns
    assert [reply.content for reply in turn] == ["", "It rains."]
    ((name, result, _),) = calls_of(run)
    assert (name, result, turn[0].calls[0].arguments) == ("weather", "rain", {"city": "Oslo"})
    assert run.success is None


def test_runs_with_labels_one_per_line(tmp_path: Path) -> None:
    lines = [
        {"id": "a", "messages": OPENAI_RUN, "success": True},
        {"id": "b", "messages": ANTHROPIC_RUN, "reward": 0.0},
        {"id": "c", "messages": ANTHROPIC_RUN},
    ]
    runs = runs_of(write_lines(tmp_path / "runs.jsonl", lines))
    assert [(run.name, run.success) for run in runs] == [("a", True), ("b", False), ("c", None)]
    assert calls_of(runs[0])[0][2] is True  # status: error marks the result failed


def test_langchain_messages_as_dicts_are_read(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

    messages = [
        HumanMessage("weather in Oslo?"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]),
        ToolMessage("rain", tool_call_id="c1"),
        AIMessage("It rains."),
    ]
    path = write_json(
        tmp_path / "lc.json", {"messages": messages_to_dict(messages), "success": True}
    )
    (run,) = runs_of(path)
    assert calls_of(run) == [("weather", "rain", False)]
    assert run.success is True


# -- detection and bad input -----------------------------------------------------------------


def test_every_format_has_a_name_and_says_what_it_expects() -> None:
    assert list(FORMATS) == [
        "claude-code",
        "otlp",
        "openai-agents",
        "tau-bench",
        "tau2-bench",
        "mini-swe-agent",
        "swe-agent",
        "bfcl",
        "messages",
    ]
    assert all(found.expects for found in FORMATS.values())


def test_the_fixtures_are_detected() -> None:
    assert [detect_format(path) for path in (TAU, TAU_REUSED_IDS, TAU2)] == [
        "tau-bench",
        "tau-bench",
        "tau2-bench",
    ]
    assert detect_format(MINI_SWE / "demo__demo-1.traj.json") == "mini-swe-agent"
    assert detect_format(MINI_SWE / "results_summary.json") is None


def test_a_file_in_no_known_format_is_one_line_naming_the_formats(tmp_path: Path) -> None:
    path = write_json(tmp_path / "notes.json", {"hello": "world"})
    with pytest.raises(UserError) as caught:
        list(read_runs([path]))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: not a recording in a known format; expected one of: ")
    assert all(name in message for name in FORMATS)


def test_a_forced_format_that_does_not_fit_says_what_it_expected() -> None:
    with pytest.raises(UserError, match="expected a tau2-bench file: a tau2-bench results file"):
        list(read_runs([TAU], "tau2-bench"))
    with pytest.raises(UserError, match="unknown format 'tau3'"):
        list(read_runs([TAU], "tau3"))


def test_missing_paths_and_empty_folders_are_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file or folder"):
        list(read_runs([tmp_path / "absent.json"]))
    write_json(tmp_path / "report.json", {"accuracy": 1})
    with pytest.raises(UserError, match="no recorded runs found"):
        list(read_runs([tmp_path]))


def test_a_malformed_run_is_reported_and_the_others_are_read(tmp_path: Path) -> None:
    good = json.loads(TAU.read_text(encoding="utf-8"))
    bad = [{"reward": "yes", "traj": []}, {"reward": 1}, *good[:1]]
    found = list(read_runs([write_json(tmp_path / "mixed.json", bad)]))
    assert [type(item).__name__ for item in found] == ["Malformed", "Malformed", "Trajectory"]
    assert isinstance(found[0], Malformed) and "a reward must be a number" in found[0].why
    assert found[1].describe().startswith(f"{tmp_path / 'mixed.json'}#1: not a tau-bench run")


def test_a_line_that_is_not_json_is_reported_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    first = json.dumps({"id": "a", "messages": OPENAI_RUN})
    last = json.dumps({"id": "b", "messages": OPENAI_RUN})
    path.write_text(f"{first}\n{{broken\n{last}\n", encoding="utf-8")
    found = list(read_runs([path]))
    assert [getattr(item, "name", None) for item in found] == ["a", None, "b"]
    assert isinstance(found[1], Malformed) and "line 2 is not JSON" in found[1].why
