"""Nothing dropped without a word: what a reader guessed or could not read is counted."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from convergent.replay import (
    Malformed,
    RecordedCall,
    RecordedReply,
    Skipped,
    Trajectory,
    read_runs,
    replay,
)

from .conftest import runs_of, write_json, write_lines


def _no_ids(results: list[str]) -> list[dict[str, Any]]:
    """A benchmark export's messages: calls and results without any id."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "is job 7 done?"}]
    for result in results:
        call = {"type": "function", "function": {"name": "status", "arguments": '{"job": 7}'}}
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": result},
        ]
    return [*messages, {"role": "assistant", "content": "still queued"}]


def test_calls_without_ids_are_matched_by_order_and_counted(tmp_path: Path) -> None:
    (run,) = runs_of(write_json(tmp_path / "run.json", _no_ids(["queued"] * 5)))
    results = [call.result for reply in run.turns[0] for call in reply.calls]
    assert results == ["queued"] * 5  # every result kept, none dropped
    assert run.gaps == {"matched_by_order": 5}


def test_the_runs_of_an_export_without_ids_are_judged_on_their_results(tmp_path: Path) -> None:
    corpus = write_lines(
        tmp_path / "export.jsonl",
        [
            {"id": "stuck", "messages": _no_ids(["queued"] * 8), "success": False},
            {"id": "moving", "messages": _no_ids(["queued", "running", "done"]), "success": True},
        ],
    )
    report = replay([corpus])
    total = report.total
    (stuck,) = total.stopped
    assert stuck.name == "stuck" and stuck.stop is not None and stuck.stop.real_loop
    assert total.gaps["matched_by_order"] == 11 and total.gapped_runs["matched_by_order"] == 2
    reading = report.to_dict()["corpora"][0]["reading"]
    assert reading["files"] == {str(corpus): {"matched_by_order": 11}}
    assert [run["id"] for run in reading["runs"]] == [
        "export.jsonl:1 stuck",
        "export.jsonl:2 moving",
    ]
    assert "2 runs read with gaps or guesses" in report.headline()


def test_a_result_no_call_can_take_is_counted_as_dropped(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "nowhere", "content": "orphan"},
        {"role": "assistant", "content": "done"},
    ]
    (run,) = runs_of(write_json(tmp_path / "run.json", messages))
    assert run.gaps == {"results_dropped": 1}


def test_calls_without_results_are_counted(tmp_path: Path) -> None:
    call = {"id": "c1", "function": {"name": "status", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [call]},
    ]
    (run,) = runs_of(write_json(tmp_path / "run.json", messages))
    assert run.gaps == {"calls_without_result": 1}
    assert run.final_answer is None


def test_openai_function_calls_of_older_logs_are_read(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'},
        },
        {"role": "function", "name": "weather", "content": "rain"},
        {"role": "assistant", "content": "It rains."},
    ]
    (run,) = runs_of(write_json(tmp_path / "run.json", messages))
    ((call,),) = [reply.calls for reply in run.turns[0] if reply.calls]
    assert (call.name, dict(call.arguments), call.result) == ("weather", {"city": "Oslo"}, "rain")
    assert run.gaps == {"matched_by_order": 1}


def test_a_harness_exchange_before_the_agents_turn_is_replayed_too() -> None:
    def reply(text: str, *results: str) -> RecordedReply:
        calls = tuple(RecordedCall("status", {"job": 7}, result) for result in results)
        return RecordedReply(text, calls)

    # a pre-processing request answered in text, then the agent's own turn
    run = Trajectory(
        id="r",
        name="r",
        source="test",
        model="m",
        success=True,
        turns=(
            (reply("intent: check a job"), reply("", "queued"), reply("", "done"), reply("ok")),
        ),
    )
    assert [len(turn) for turn in run.turns] == [1, 3]
    report_run = replay_one(run)
    assert report_run.verdict == "played through" and report_run.replies == 4


def replay_one(run: Trajectory) -> Any:
    import asyncio

    from convergent.replay import judge, replay_run

    return judge(run, asyncio.run(replay_run(run)))


def test_a_turn_the_loop_ends_early_without_a_cut_is_never_played_through() -> None:
    handoff = RecordedReply("", (RecordedCall("send", {"to": "human"}, "sent"),))
    later = RecordedReply("", (RecordedCall("get", {"id": 1}, "A"),))
    run = Trajectory(
        id="r",
        name="r",
        source="test",
        model="m",
        success=True,
        turns=((handoff, later, RecordedReply("done")),),
        terminal=frozenset({"send"}),
    )
    verdict = replay_one(run)
    assert verdict.stops == () and verdict.unplayed == 2
    assert verdict.verdict == "replayed in part"


def test_a_header_line_of_a_file_of_runs_is_passed_over_and_reported(tmp_path: Path) -> None:
    header = {"benchmark": "support-v2", "model": "gpt-4o", "created": "2026-11-02"}
    run = {"id": "a", "messages": [{"role": "user", "content": "hi"}], "success": True}
    path = write_lines(tmp_path / "runs.jsonl", [header, run])
    items = list(read_runs([path], "messages"))
    assert [type(item).__name__ for item in items] == ["Skipped", "Trajectory"]
    skipped = items[0]
    assert isinstance(skipped, Skipped) and skipped.where == f"{path}:1"
    assert "not a run" in skipped.why
    assert [type(item) for item in read_runs([path])] == [Skipped, Trajectory]  # detected


def test_a_header_line_of_a_file_of_messages_describes_the_run(tmp_path: Path) -> None:
    header = {"id": "session-9", "model": "gpt-4o", "success": True}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    (run,) = runs_of(write_lines(tmp_path / "session.jsonl", [header, *messages]))
    assert (run.name, run.model, run.success, run.final_answer) == (
        "session-9",
        "gpt-4o",
        True,
        "hello",
    )


def test_a_bad_line_in_a_file_of_messages_costs_that_message_only(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    lines = [
        json.dumps({"role": "user", "content": "hi"}),
        '{"role": "assistant", "content": "broken',
        json.dumps({"role": "assistant", "content": "hello"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = runs_of(path)
    assert run.gaps == {"messages_skipped": 1} and run.final_answer == "hello"


def test_a_bad_line_in_a_file_of_runs_costs_that_run_only(tmp_path: Path) -> None:
    good = {"id": "a", "messages": [{"role": "user", "content": "hi"}]}
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(good) + "\n{not json\n" + json.dumps(good) + "\n", encoding="utf-8")
    items = list(read_runs([path]))
    assert [type(item) for item in items] == [Trajectory, Malformed, Trajectory]


def test_langchain_message_dicts_with_invalid_calls_and_anthropic_blocks(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

    messages = [
        HumanMessage("add 2 and 3"),
        AIMessage(
            content=[
                {"type": "text", "text": "adding"},
                {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 2, "b": 3}},
            ],
            tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "t1"}],
        ),
        ToolMessage("5", tool_call_id="t1"),
        AIMessage(
            "",
            invalid_tool_calls=[
                {"name": "add", "args": "{a: 2", "id": "t2", "error": "bad JSON", "type": "x"}
            ],
        ),
        ToolMessage("Error: arguments are not JSON", tool_call_id="t2", status="error"),
        AIMessage("5"),
    ]
    (run,) = runs_of(write_json(tmp_path / "lc.json", messages_to_dict(messages)))
    calls = [(c.name, c.result, c.failed, c.mistake) for r in run.turns[0] for c in r.calls]
    assert calls == [
        ("add", "5", False, False),  # once, though both the blocks and tool_calls hold it
        ("add", "Error: arguments are not JSON", True, True),
    ]
    assert run.gaps == {} and run.final_answer == "5"


def test_a_rule_for_labels_keeps_a_recording_s_own_label_where_there_is_no_answer(
    tmp_path: Path,
) -> None:
    unanswered = {"id": "own", "messages": _no_ids(["queued"])[:-1], "success": True}
    (run,) = runs_of(write_lines(tmp_path / "runs.jsonl", [unanswered]))
    from convergent.replay._labels import load_labels

    kept = load_labels(None, "never").apply(run)
    assert (kept.success, kept.unlabelled_why) == (True, "")  # not "could not label"
    unlabelled = load_labels(None, "never").apply(dataclasses.replace(run, success=None))
    assert unlabelled.unlabelled_why == "no final answer: the recording ends on tool calls"
