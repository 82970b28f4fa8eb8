"""Eight ``convergent resume`` processes started at once on one run: exactly one runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resume_race import assert_resumed_once, race_processes, stopped_run

CLAIMANTS = 8


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["needs_user", "max_cycles"])
def test_one_of_many_resume_commands_runs_the_run(tmp_path: Path, scenario: str) -> None:
    db = tmp_path / "runs.db"
    run_id = stopped_run(db, tmp_path, scenario)
    answer = scenario == "needs_user"
    claims = [
        [
            "cli",
            "resume",
            run_id,
            "--db",
            str(db),
            "--json",
            "--no-steer",
            "--max-cycles",
            "5",
            *([f"--answer=answer {index}"] if answer else []),
        ]
        for index in range(CLAIMANTS)
    ]
    outcomes = race_processes(tmp_path, claims)
    (winner,) = [index for index, (code, _, _) in enumerate(outcomes) if code == 0]
    assert json.loads(outcomes[winner][1])["stop_reason"] == "completed"
    assert_resumed_once(db, run_id, f"answer {winner}" if answer else None, CLAIMANTS)
