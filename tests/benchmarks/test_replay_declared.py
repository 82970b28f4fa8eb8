"""Replays with every tool declared as a user declares them, writes included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.replay.declared_tools import declared
from benchmarks.replay_declared import main

from convergent.replay._recording import Trajectory
from convergent.replay._tool_kinds import BFCL_READ_ONLY, SWE_AGENT_READ_ONLY, TAU_READ_ONLY

FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures"


def run(read_only: frozenset[str]) -> Trajectory:
    return Trajectory("r", "r", "test", "m", True, (), read_only=read_only)


@pytest.mark.parametrize(
    ("name", "read_only", "expected"),
    [
        ("get_user_details", TAU_READ_ONLY, (True, True)),
        ("book_reservation", TAU_READ_ONLY, (False, False)),
        ("transfer_to_human_agents", TAU_READ_ONLY, (None, False)),
        ("ls", BFCL_READ_ONLY, (True, True)),
        ("setHeadlights", BFCL_READ_ONLY, (False, True)),
        ("post_tweet", BFCL_READ_ONLY, (False, False)),
        ("edit", SWE_AGENT_READ_ONLY, (False, False)),
        ("cd", SWE_AGENT_READ_ONLY, (None, False)),
        ("cd", BFCL_READ_ONLY, (False, False)),
        ("get_user_details", SWE_AGENT_READ_ONLY, (None, False)),
        ("bash", frozenset(), (None, False)),
    ],
)
def test_each_tool_is_declared_by_what_it_does(
    name: str, read_only: frozenset[str], expected: tuple[bool | None, bool]
) -> None:
    assert declared(name, run(read_only)) == expected


def test_a_corpus_replays_with_its_tools_declared(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([str(FIXTURES / "tau_bench_excerpt.json"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"]["runs"]["successful"] + report["total"]["runs"]["failed"] > 0
    assert main([str(FIXTURES / "tau_bench_excerpt.json")]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].startswith("| corpus |") and "| all |" in table
