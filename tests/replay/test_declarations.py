"""Declarations: reads, writes, waits and mistakes the recordings do not say, for every format."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

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


def _polls(results: list[str], tool: str = "status") -> Trajectory:
    replies = tuple(
        RecordedReply("", (RecordedCall(tool, {"job": 7}, result),)) for result in results
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


def test_a_tool_declared_read_only_is_judged_on_its_results() -> None:
    # the status moves at the third poll: a tool that may change state is judged before
    # it runs, a read on its result
    run = _polls(["queued", "queued", "running", "running", "done"])
    unknown = _judged(run)
    assert unknown.stop is not None and unknown.stop.rule == "max_repeated_calls"  # type: ignore[attr-defined]
    reads = declared(read_only=["status"]).apply(run)
    assert reads.read_only == {"status"}
    assert _judged(reads).stops == ()  # type: ignore[attr-defined]


def test_a_tool_declared_a_write_gets_one_more_repeat() -> None:
    run = _polls(["ok"] * 4)
    assert _judged(run).stops != ()  # type: ignore[attr-defined]
    writes = declared(writes=["status"]).apply(dataclasses.replace(run, read_only={"status"}))
    assert (writes.read_only, writes.writes) == (frozenset(), frozenset({"status"}))
    assert _judged(writes).stops == ()  # type: ignore[attr-defined]


def test_a_waiting_tool_lets_the_time_between_polls_count() -> None:
    waiting = [
        RecordedReply("", (RecordedCall("sleep", {"s": 30}, "slept"),)),
        RecordedReply("", (RecordedCall("status", {"job": 7}, "queued"),)),
    ]
    run = Trajectory(
        id="r",
        name="r",
        source="test",
        model="m",
        success=True,
        turns=((*(waiting * 5), RecordedReply("done")),),
        read_only=frozenset({"status", "sleep"}),
    )
    assert _judged(run).stops != ()  # type: ignore[attr-defined]  # polls with nothing between
    verdict = _judged(declared(waits=["sleep"]).apply(run))
    assert verdict.stops == () and verdict.loop is None  # type: ignore[attr-defined]


def test_results_declared_mistakes_and_failures() -> None:
    run = _polls(["Invalid arguments: job", "Error: down", "queued"])
    marked = declared(mistakes=["^Invalid"], failures=["^Error:"]).apply(run)
    calls = [(c.mistake, c.failed) for reply in marked.turns[0] for c in reply.calls]
    assert calls == [(True, False), (False, True), (False, False)]


def test_three_mistakes_in_a_row_stop_the_run_as_the_loop_would() -> None:
    run = declared(mistakes=["^Invalid"]).apply(
        _polls([f"Invalid arguments ({n})" for n in range(5)], tool="search")
    )
    verdict = _judged(run)
    stop = verdict.stop  # type: ignore[attr-defined]
    assert (stop.reason, stop.rule) == ("stalled", "max_mistakes")


def test_a_declaration_file_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(
        "read_only: [status, search]\nwrites: pay\nwaits: [sleep]\nmistakes: ['^Invalid']\n",
        encoding="utf-8",
    )
    found = load_declarations(path)
    assert (found.read_only, found.writes, found.waits) == (
        frozenset({"status", "search"}),
        frozenset({"pay"}),
        frozenset({"sleep"}),
    )
    assert [pattern.pattern for pattern in found.mistakes] == ["^Invalid"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("reads: [a]\n", "unknown key 'reads'; expected read_only, writes"),
        ("read_only: {a: 1}\n", "read_only must be a list of strings"),
        ("mistakes: ['(']\n", "mistakes '(': not a regular expression"),
        ("read_only: [a]\nwrites: [a]\n", "'a' is declared both read-only (read_only)"),
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
    polls = [("status", {"job": 1}, result, False) for result in ("q", "q", "r", "r", "done")]
    corpus = write_lines(tmp_path / "runs.jsonl", [labelled_run("polls", polls, True)])
    assert replay([corpus]).total.policy_faults == 1
    report = replay([corpus], declarations=declared(read_only=["status"]))
    assert report.total.successful_cut == 0
