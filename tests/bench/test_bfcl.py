"""BFCL multi-turn replay: parsing, tools from BFCL docs, the replay checks and probes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")

from convergent import StopPolicy
from convergent.agent import Agent  # noqa: E402
from convergent.bench import bfcl  # noqa: E402
from convergent.bench.bfcl import (  # noqa: E402
    CATEGORIES,
    MODES,
    BfclEntry,
    load_entries,
    parse_call,
    probe_entry,
    replay_entry,
    run_bfcl_async,
)
from convergent.exceptions import UserError  # noqa: E402
from convergent.stop import StopReason  # noqa: E402
from convergent.testing import call, scripted


def test_parse_call_reads_literals_without_evaluating() -> None:
    assert parse_call("cd(folder='document')") == ("cd", [], {"folder": "document"})
    assert parse_call("sort('a.txt')") == ("sort", ["a.txt"], {})
    assert parse_call("f(x=[1, -2.5], y={'k': (1, 2)}, z=True)") == (
        "f",
        [],
        {"x": [1, -2.5], "y": {"k": (1, 2)}, "z": True},
    )
    for hostile in (
        "__import__('os').system('true')",
        "f(x=open('/etc/passwd'))",
        "f(**kwargs)",
        "a; b()",
    ):
        with pytest.raises((ValueError, SyntaxError)):
            parse_call(hostile)


def test_bfcl_types_become_json_schema() -> None:
    schema = bfcl._json_schema(
        {
            "type": "dict",
            "properties": {
                "a": {"type": "float"},
                "b": {"type": "array", "items": {"type": "float"}},
                "c": {"type": "any"},
            },
        }
    )
    assert schema == {
        "type": "object",
        "properties": {
            "a": {"type": "number"},
            "b": {"type": "array", "items": {"type": "number"}},
            "c": {},
        },
    }


def test_every_category_loads_200_entries() -> None:
    for category in CATEGORIES:
        entries = load_entries(category)
        assert len(entries) == 200
        assert all(len(e.questions) == len(e.ground_truth) for e in entries)


async def test_backend_error_values_are_tool_failures() -> None:
    entry = load_entries("base", 1)[0]
    backends = bfcl.make_backends(entry)
    methods = bfcl._methods(backends)
    log: list[bfcl.Executed] = []
    tool = bfcl.backend_tool("GorillaFileSystem", "cd", methods["cd"], log)
    assert tool.parameters["type"] == "object"
    model = scripted(call("cd", folder="__missing__"), "done")
    result = await Agent(model, [tool], policy=StopPolicy(on_tool_error="stop")).run("go")
    assert result.stop_reason is StopReason.TOOL_ERROR
    assert result.tool_calls[0].outcome == "failed"
    assert "No such file or directory" in result.tool_calls[0].result
    assert log[0].arguments == {"folder": "__missing__"}


async def test_missing_required_argument_is_the_models_mistake() -> None:
    entry = load_entries("base", 1)[0]
    methods = bfcl._methods(bfcl.make_backends(entry))
    tool = bfcl.backend_tool("GorillaFileSystem", "cd", methods["cd"], [])
    model = scripted(call("cd"), "done")
    result = await Agent(model, [tool]).run("go")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.tool_calls[0].outcome == "invalid"


@pytest.mark.parametrize("category", CATEGORIES)
async def test_first_entries_replay_and_probe(category: str) -> None:
    for entry in load_entries(category, 5):
        for mode in MODES:
            result = await replay_entry(entry, mode)
            assert result.passed, (entry.id, mode, result)
            assert result.turns and all(t.stop == "completed" for t in result.turns)
            for turn in result.turns:
                if turn.calls == 0:
                    assert turn.cycles == 1
                elif mode == "batched":
                    assert turn.cycles == 2
                else:
                    assert turn.cycles == turn.calls + 1
        probes = await probe_entry(entry)
        assert {p.kind for p in probes} >= {
            "max_cycles",
            "tool_error_stop",
            "tool_error_continue",
            "invalid_call",
        }
        assert all(p.passed for p in probes), [p for p in probes if not p.passed]


async def test_replay_detects_a_skipped_call_and_the_state_it_leaves() -> None:
    entry = next(e for e in load_entries("base", 20) if len(e.ground_truth[0]) >= 2)
    session = bfcl._Session.start(entry)
    calls = session.calls(0)
    skipped = calls[:-1]
    result, log, model = await session.run_turn(0, bfcl._script(skipped, "one_per_response", 0))
    reference = session.reference_run(calls)
    _, _, problems = bfcl._check(
        session, result, log, model, calls, reference, StopReason.COMPLETED, len(calls) + 1
    )
    assert any(p.startswith("executed") for p in problems)
    assert any("model requests" in p for p in problems)


def test_state_comparison_sees_a_changed_backend() -> None:
    entry = next(e for e in load_entries("base") if "GorillaFileSystem" in e.involved_classes)
    actual, reference = bfcl.make_backends(entry), bfcl.make_backends(entry)
    assert bfcl._differences(actual, reference) == []
    actual["GorillaFileSystem"].mkdir(dir_name="extra_folder")
    assert "GorillaFileSystem._current_dir" not in bfcl._differences(actual, reference)
    assert bfcl._differences(actual, reference) == ["GorillaFileSystem.root"]


async def test_asking_past_the_turn_end_is_reported() -> None:
    entry = load_entries("base", 1)[0]
    session = bfcl._Session.start(entry)
    calls = session.calls(0)
    script = bfcl._script(calls, "one_per_response", 0)[:-1]
    result, log, model = await session.run_turn(0, script)
    assert result is None
    _, _, problems = bfcl._check(
        session,
        result,
        log,
        model,
        calls,
        session.reference_run(calls),
        StopReason.COMPLETED,
        len(calls) + 1,
    )
    assert "the loop asked for a response after the turn's end" in problems


def test_withheld_function_in_ground_truth_is_a_dataset_issue() -> None:
    entry = BfclEntry(
        id="x",
        category="miss_func",
        questions=(({"role": "user", "content": "a"},), ()),
        ground_truth=(("tail(file_name='f')",), ("tail(file_name='f')",)),
        initial_config={},
        involved_classes=("GorillaFileSystem",),
        missed_function={1: ("tail",)},
    )
    assert bfcl.dataset_issues(entry) == ["turn 0: tail is not offered until later or excluded"]


@pytest.mark.slow
def test_all_800_entries_replay() -> None:
    summary, replays, probes = asyncio.run(run_bfcl_async())
    counts = summary.details["pass_counts"]
    for category in CATEGORIES:
        for mode in MODES:
            assert counts[category][mode]["entries"] == 200
    assert counts["base"]["one_per_response"]["entries_passed"] == 200
    assert counts["miss_param"]["batched"]["entries_passed"] == 200
    assert counts["long_context"]["one_per_response"]["entries_passed"] == 200
    failed = {r.entry for r in replays if not r.passed}
    assert failed == {"multi_turn_miss_func_49"}
    assert all(r.dataset_issues for r in replays if not r.passed)
    assert all(p.passed for p in probes), [p for p in probes if not p.passed][:3]
    assert sum(p.kind == "bfcl_step_limit" for p in probes) == 2
    for policy in summary.policies.values():
        assert policy.false_positives == 0 and policy.false_negatives == 0


def test_damaged_data_is_one_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = tmp_path / "data" / "possible_answer"
    answers.mkdir(parents=True)
    (answers / "BFCL_v4_multi_turn_base.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    monkeypatch.setattr(bfcl, "_package_root", lambda: tmp_path)
    with pytest.raises(UserError, match=r"BFCL_v4_multi_turn_base.json is nested too deeply"):
        load_entries("base")
