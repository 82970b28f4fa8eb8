"""Hostile files are bounded: one bad line or run costs itself only, reported, never a crash."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from convergent.exceptions import UserError
from convergent.replay import Malformed, Trajectory, judge, read_runs, replay, replay_run
from convergent.replay._readers import _common

from .conftest import write_json


def _run(name: str, arguments: str = '{"job": 7}') -> dict[str, object]:
    call = {"id": "c1", "function": {"name": "status", "arguments": arguments}}
    return {
        "id": name,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "queued"},
            {"role": "assistant", "content": "done"},
        ],
        "success": True,
    }


def test_a_line_nested_thousands_deep_costs_that_line_only(tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    path = tmp_path / "runs.jsonl"
    path.write_text(
        json.dumps(_run("a")) + "\n" + deep + "\n" + json.dumps(_run("b")) + "\n", encoding="utf-8"
    )
    items = list(read_runs([path]))
    assert [type(item) for item in items] == [Trajectory, Malformed, Trajectory]
    bad = items[1]
    assert isinstance(bad, Malformed) and "nested too deeply" in bad.why
    assert replay([path]).total.read == 2


def test_arguments_nested_deeper_than_the_bound_cost_their_message(tmp_path: Path) -> None:
    deep = "{" + '"a": {' * 150 + "}" * 151
    path = tmp_path / "runs.jsonl"
    lines = [_run("a"), _run("deep", deep), _run("b")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    runs = [item for item in read_runs([path]) if isinstance(item, Trajectory)]
    assert [run.name for run in runs] == ["a", "deep", "b"]
    # the message with the call is skipped (and counted); its result then has no call
    assert runs[1].gaps == {"messages_skipped": 1, "results_dropped": 1}
    assert replay([path]).total.read == 3


def test_a_whole_json_file_nested_too_deeply_is_refused_in_a_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 5000 + "]" * 5000, encoding="utf-8")
    with pytest.raises(Exception, match="nested too deeply"):
        list(read_runs([path]))


def test_long_python_notation_arguments_stay_text(tmp_path: Path) -> None:
    # four megabytes of Python's notation: parsing it would take seconds and gigabytes
    big = "{'rows': [" + ", ".join(["{'a': 1, 'b': 'x'}"] * 200_000) + "]}"
    (run,) = [
        item
        for item in read_runs([write_json(tmp_path / "r.json", [_run("big", big)])])
        if isinstance(item, Trajectory)
    ]
    ((call,),) = [reply.calls for reply in run.turns[0] if reply.calls]
    assert call.arguments == {"input": big}


def test_a_line_over_the_length_bound_is_skipped_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_common, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "runs.jsonl"
    long = json.dumps({**_run("long"), "padding": "x" * 5000})
    path.write_text(
        json.dumps(_run("a")) + "\n" + long + "\n" + json.dumps(_run("b")) + "\n", encoding="utf-8"
    )
    items = list(read_runs([path]))
    assert [type(item) for item in items] == [Trajectory, Malformed, Trajectory]
    assert "longer than" in items[1].why  # type: ignore[union-attr]


def test_spans_whose_parents_form_a_cycle_end(tmp_path: Path) -> None:
    def span(span_id: str, parent: str, kind: dict[str, object]) -> dict[str, object]:
        return {
            "object": "trace.span",
            "id": span_id,
            "trace_id": "trace_1",
            "parent_id": parent,
            "started_at": f"2026-01-01T00:00:0{span_id[-1]}",
            "span_data": kind,
            "error": None,
        }

    spans = [
        span("s1", "s2", {"type": "function", "name": "f", "input": "{}", "output": "x"}),
        span("s2", "s1", {"type": "agent", "name": "A"}),
        span("s3", "s9", {"type": "generation", "output": [{"content": "hi"}]}),
    ]
    (run,) = [
        i for i in read_runs([write_json(tmp_path / "t.json", spans)]) if isinstance(i, Trajectory)
    ]
    assert run.name == "A"


_KEYS = (
    "role content tool_calls function name arguments id tool_call_id type data messages "
    "success reward traj task_id simulations reward_info trajectory history info action "
    "observation instance_id resourceSpans scopeSpans spans attributes key value stringValue "
    "object trace_id span_data parent_id started_at output input result inference_log "
    "sessionId message tool_use_id is_error args invalid_tool_calls function_call extra "
    "interrupt_type tool_call_ids status error usage"
).split()
_LEAVES = (None, True, 0, 1.5, -3, "", "x", "Error: no", "\x1b[2J", "{'a': 1}", '{"a":', [], {})


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return rng.choice(_LEAVES)
    if roll < 0.6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(_KEYS): _value(rng, depth + 1) for _ in range(rng.randint(0, 6))}


def _shaped(rng: random.Random) -> tuple[str, Any]:
    """A value in the outline of one format, with anything inside."""
    v = lambda: _value(rng)  # noqa: E731
    shapes: list[tuple[str, Any]] = [
        ("x.json", [{"role": "user"}, {"role": "assistant", "tool_calls": v()}, v()]),
        ("x.jsonl", [{"role": "tool", "tool_call_id": v(), "content": v()}, v()]),
        ("x.json", {"messages": [v(), {"role": "assistant", "tool_calls": [v()]}], "id": v()}),
        ("x.json", [{"task_id": v(), "reward": v(), "traj": [v(), {"role": "assistant"}]}]),
        ("x.json", {"simulations": [{"reward_info": v(), "messages": [v(), v()]}]}),
        ("x.traj", {"trajectory": [v(), {"action": v(), "observation": v()}], "info": v()}),
        ("x.traj", {"history": [{"role": "assistant", "tool_calls": v()}, v()]}),
        ("x.traj.json", {"instance_id": "a", "messages": [v(), {"role": "user", "extra": v()}]}),
        ("x.json", {"resourceSpans": [{"scopeSpans": [{"spans": [v(), {"attributes": v()}]}]}]}),
        (
            "x.jsonl",
            [{"object": "trace.span", "trace_id": "t", "parent_id": v(), "span_data": v()}],
        ),
        ("x.jsonl", [{"id": "multi_turn_1", "result": v(), "inference_log": v()}]),
        ("x.jsonl", [{"type": "assistant", "sessionId": "s", "message": v()}, v()]),
    ]
    return rng.choice(shapes)


def test_files_of_any_shape_are_read_or_reported_never_a_crash(tmp_path: Path) -> None:
    rng = random.Random(20261206)
    for case in range(150):
        name, value = _shaped(rng)
        folder = tmp_path / str(case)
        folder.mkdir()
        path = folder / name
        if name.endswith(".jsonl") and isinstance(value, list):
            path.write_text("\n".join(json.dumps(line) for line in value), encoding="utf-8")
        else:
            path.write_text(json.dumps(value), encoding="utf-8")
        try:
            items = list(read_runs([path]))
        except UserError:
            continue  # a file in no known format: one line, exit 2
        for item in items:
            if isinstance(item, Trajectory):
                judge(item, asyncio.run(replay_run(item)))


def test_fields_of_an_unexpected_type_cost_their_message_only(tmp_path: Path) -> None:
    lines = [
        {"role": "user", "content": "go"},
        {"role": ["assistant"], "content": "a role that is a list"},
        {"type": {"ai": 1}, "data": {}},
        {"role": "assistant", "content": "done"},
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    (run,) = list(read_runs([path]))
    assert isinstance(run, Trajectory) and run.gaps == {"messages_skipped": 2}
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps([{"object": ["trace.span"], "trace_id": "t"}]), encoding="utf-8")
    with pytest.raises(UserError, match="not a recording in a known format"):
        list(read_runs([spans]))
