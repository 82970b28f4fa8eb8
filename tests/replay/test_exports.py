"""Real exports of every format: the readers report what expected.json says, run by run.

The files are in fixtures/exports (README.md there says where each comes from); the
counts were checked against the files themselves (the editor's refusals, the score
file's failed entries, the format errors, the runs each excerpt was cut for).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from convergent.replay import FORMATS, Malformed, Skipped, Trajectory, read_runs, replay

EXPORTS = Path(__file__).parent / "fixtures" / "exports"
EXPECTED: dict[str, Any] = json.loads((EXPORTS / "expected.json").read_text(encoding="utf-8"))


def test_every_format_the_docs_name_has_real_exports() -> None:
    # Claude Code's transcripts are written at test time by the real CLI instead
    assert set(FORMATS) - set(EXPECTED) == {"claude-code"}


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_the_readers_report_every_run_and_gap(folder: str) -> None:
    expected = EXPECTED[folder]
    items = list(read_runs([EXPORTS / folder]))
    runs = [item for item in items if isinstance(item, Trajectory)]
    assert sum(isinstance(item, Malformed) for item in items) == expected["malformed"]
    assert sum(isinstance(item, Skipped) for item in items) == expected["skipped"]
    assert sorted(run.name for run in runs) == expected["names"]
    calls = [call for run in runs for turn in run.turns for reply in turn for call in reply.calls]
    assert (len(calls), sum(c.failed for c in calls), sum(c.mistake for c in calls)) == (
        expected["calls"],
        expected["failed_calls"],
        expected["mistakes"],
    )
    assert sum(run.final_answer is None for run in runs) == expected["no_final_answer"]


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_the_replay_of_each_export(folder: str) -> None:
    expected = EXPECTED[folder]
    report = replay([EXPORTS / folder], success_if=expected["success_if"])
    total = report.to_dict()["total"]
    assert total["runs"] == expected["runs"]
    assert {key: count for key, count in total["reading"]["gaps"].items() if count} == expected[
        "gaps"
    ]
    assert {key: count for key, count in total["verdicts"].items() if count} == expected["verdicts"]
    assert report.headline() == expected["headline"]
