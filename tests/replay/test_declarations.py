"""Declarations: reads, idempotent calls, writes, waits and mistakes the recordings do not say."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from convergent.effects import Effect
from convergent.exceptions import UserError
from convergent.replay import (
    RecordedCall,
    RecordedReply,
    Trajectory,
    declared,
    judge,
    load_declarations,
    replay,
    replay_run,
)

from .conftest import labelled_run, write_lines


def _polls(results: list[str], tool: str = "status", new_arguments: bool = False) -> Trajectory:
    replies = tuple(
        RecordedReply("", (RecordedCall(tool, {"job": n if new_arguments else 7}, result),))
        for n, result in enumerate(results)
    )
    return Trajectory(
        id="r",
        name="r",
        source="test",
        model="m",
        success=True,
        turns=((*replies, RecordedReply("done")),),
    )


def _judged(run: Trajectory, settings: dict[str, object] | None = None) -> object:
    return judge(run, asyncio.run(replay_run(run, settings)))


@pytest.mark.parametrize(
    ("declaration", "stopped"),
    [
        # nothing declared: judged on its result, and after its note a repeat does not run
        ({}, True),
        ({"reads": ["status"]}, False),
        ({"idempotent": ["status"]}, False),
        ({"writes": ["status"]}, True),
    ],
)
def test_each_effect_is_judged_as_the_loop_judges_it(
    declaration: dict[str, list[str]], stopped: bool
) -> None:
    # the third poll repeats the first two and gets the note; the fourth would say done
    run = declared(**declaration).apply(_polls(["queued", "queued", "queued", "done"]))
    verdict = _judged(run)
    assert verdict.nudges == ((1, 3, "status"),)  # type: ignore[attr-defined]
    if stopped:
        stop = verdict.stop  # type: ignore[attr-defined]
        assert (stop.reason, stop.rule, stop.played) == ("stalled", "max_repeated_calls", 4)
    else:
        assert verdict.stops == ()  # type: ignore[attr-defined]


def test_a_write_is_judged_before_it_runs_whatever_it_returns() -> None:
    # a payment confirmed with a new receipt each time: new results, the same payment again
    run = _polls([f"paid, receipt P-{n}" for n in range(4)], tool="pay")
    assert _judged(run).stops == ()  # type: ignore[attr-defined]
    assert _judged(declared(reads=["pay"]).apply(run)).stops == ()  # type: ignore[attr-defined]
    writes = declared(writes=["pay"]).apply(dataclasses.replace(run, read_only={"pay"}))
    assert (writes.read_only, writes.writes) == (frozenset(), frozenset({"pay"}))
    assert writes.effect("pay") is Effect.WRITE
    verdict = _judged(writes)
    stop = verdict.stop  # type: ignore[attr-defined]
    assert (stop.reason, stop.rule, stop.played) == ("stalled", "max_repeated_calls", 4)
    assert [line.status for line in stop.calls] == ["ran", "ran", "noted", "not run"]


def test_an_idempotent_call_with_a_result_it_had_changes_nothing_in_the_proof_of_a_loop() -> None:
    # a status read between settings of the same priority: the second setting changes
    # nothing more, so the read that follows it repeats the two before it unchanged
    calls = [("status", "queued"), ("set_priority", "high")] + [("status", "queued")] * 2
    calls += [("set_priority", "high"), ("status", "queued")]
    replies = [RecordedReply("", (RecordedCall(name, {"job": 7}, text),)) for name, text in calls]
    run = Trajectory(id="r", name="r", source="t", model="m", success=False, turns=((*replies,),))
    assert _judged(declared(reads=["status"]).apply(run)).loop is None  # type: ignore[attr-defined]
    both = declared(reads=["status"], idempotent=["set_priority"]).apply(run)
    assert both.effect("set_priority") is Effect.IDEMPOTENT
    loop = _judged(both).loop  # type: ignore[attr-defined]
    assert (loop.repeat.name, loop.repeat.times, loop.repeat.reply) == ("status", 3, 5)


@pytest.mark.parametrize(
    ("new_arguments", "rule", "played"),
    [
        (False, "max_repeated_mistakes", 4),  # the same mistaken call: noted at its third
        (True, "max_mistakes", 13),  # a new mistake each step: a search, noted at the 12th
    ],
)
def test_declared_mistakes_stop_the_run_as_the_loop_would(
    new_arguments: bool, rule: str, played: int
) -> None:
    results = [f"Invalid arguments ({n})" for n in range(16)]
    run = declared(mistakes=["^Invalid"]).apply(_polls(results, "search", new_arguments))
    stop = _judged(run).stop  # type: ignore[attr-defined]
    assert (stop.reason, stop.rule, stop.played) == ("stalled", rule, played)


def test_a_declaration_file_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(
        "reads: [status, search]\nidempotent: [set_address]\nwrites: pay\nwaits: [sleep]\n"
        "mistakes: ['^Invalid']\n",
        encoding="utf-8",
    )
    found = load_declarations(path)
    assert (found.reads, found.idempotent, found.writes, found.waits) == (
        frozenset({"status", "search"}),
        frozenset({"set_address"}),
        frozenset({"pay"}),
        frozenset({"sleep"}),
    )
    effects = {name: found.effect(name) for name in ("status", "set_address", "pay", "sleep")}
    assert effects == {
        "status": Effect.READ,
        "set_address": Effect.IDEMPOTENT,
        "pay": Effect.WRITE,
        "sleep": Effect.READ,  # a wait is a read
    }
    assert found.effect("other") is None
    assert [pattern.pattern for pattern in found.mistakes] == ["^Invalid"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("read: [a]\n", "unknown key 'read'; expected reads, idempotent, writes, waits"),
        ("read_only: {a: 1}\n", "read_only must be a list of strings"),
        ("mistakes: ['(']\n", "mistakes '(': not a regular expression"),
        ("read_only: [a]\nwrites: [a]\n", "'a' is declared both reads (reads) and writes"),
        ("reads: [a]\nidempotent: [a]\n", "'a' is declared both reads (reads) and idempotent"),
        ("reads: [a]\nread_only: [b]\n", "reads is given twice"),
        ("- a\n", "expected a mapping"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_a_bad_declaration_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_declarations(path)


def test_declarations_reach_every_run_of_a_replay(tmp_path: Path) -> None:
    polls = [("status", {"job": 1}, result, False) for result in ("q", "q", "q", "done")]
    corpus = write_lines(tmp_path / "runs.jsonl", [labelled_run("polls", polls, True)])
    assert replay([corpus]).total.successful_cut == 1  # its fourth poll did not run
    report = replay([corpus], declarations=declared(reads=["status"]))
    assert report.total.successful_cut == 0


def test_a_tool_declared_two_ways_on_the_command_line_and_in_a_file_is_refused() -> None:
    with pytest.raises(UserError, match="'pay' is declared both idempotent .* and writes"):
        declared(idempotent=["pay"]).merged(declared(writes=["pay"]))
    with pytest.raises(UserError, match=r"'a' is declared both reads \(--reads\)"):
        declared(reads=["a,b"], writes=["a"])
