"""`convergent bench` as a user runs it: the console script's entry point in this process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_runner import Ran, invoke
from convergent.bench.convergence import POLICIES, SCENARIOS

RATE_KEYS = {"false_positive_rate", "false_negative_rate", "accuracy", "tasks"}


def run_cli(*args: str) -> Ran:
    return invoke("bench", *args)


@pytest.mark.slow
def test_json_is_one_object_with_rates_per_suite_and_policy() -> None:
    pytest.importorskip("bfcl_eval")
    done = run_cli(
        "convergence", "bfcl", "--json", "--tasks-per-scenario", "2", "--bfcl-limit", "1"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert done.stdout.strip().count("\n") == 0
    assert set(report["suites"]) == {"convergence", "bfcl"}
    convergence = report["suites"]["convergence"]["policies"]
    assert set(convergence) == {"objective", "objective_verified", "counting", "subjective"}
    for suite in report["suites"].values():
        for stats in suite["policies"].values():
            assert RATE_KEYS <= set(stats)
            assert 0.0 <= stats["accuracy"] <= 1.0
    assert convergence["objective"]["tasks"] == 2 * len(SCENARIOS)
    bfcl = report["suites"]["bfcl"]
    assert bfcl["pass_counts"]["base"]["batched"] == {
        "entries": 1,
        "entries_passed": 1,
        "entries_failed_with_dataset_issue": 0,
        "turns": bfcl["pass_counts"]["base"]["batched"]["turns"],
        "turns_passed": bfcl["pass_counts"]["base"]["batched"]["turns"],
    }


@pytest.mark.slow
def test_out_writes_json_markdown_and_charts(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "report"
    done = run_cli("convergence", "--tasks-per-scenario", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "objective" in done.stdout and "subjective" in done.stdout
    data = json.loads((out / "bench.json").read_text())
    assert data["command"] == "convergent bench convergence --seed 0"
    assert "| objective |" in (out / "bench.md").read_text()
    assert (out / "convergence_rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_same_seed_same_numbers() -> None:
    first = run_cli("convergence", "--json", "--tasks-per-scenario", "2", "--seed", "5")
    second = run_cli("convergence", "--json", "--tasks-per-scenario", "2", "--seed", "5")
    assert first.returncode == second.returncode == 0
    assert json.loads(first.stdout) == json.loads(second.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nonsense"], "unknown suite 'nonsense'"),
        (["convergence", "--seed", "-1"], "--seed must be >= 0"),
        (["convergence", "--tasks-per-scenario", "0"], "--tasks-per-scenario must be >= 1"),
        (["live", "--model", "nope:x"], "unknown model 'nope:x'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


def test_out_must_be_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    done = run_cli("convergence", "--out", str(target))
    assert done.returncode == 2 and "--out must be a folder" in done.stderr


def test_out_without_matplotlib_is_refused_before_the_suites_run(tmp_path: Path) -> None:
    out = tmp_path / "report"
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from convergent.cli import main\n"
        f"main(['bench', 'convergence', '--out', {str(out)!r}])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: --out draws PNG charts with matplotlib")
    assert done.stderr.count("\n") == 1
    assert not out.exists()


@pytest.mark.slow  # runs the convergence suite
def test_without_a_terminal_progress_is_lines_and_the_table_is_whole() -> None:
    done = invoke("bench", "convergence", "--tasks-per-scenario", "1", env={"COLUMNS": "40"})
    assert done.returncode == 0, done.stderr
    progress = done.stderr.splitlines()
    runs = len(SCENARIOS) * len(POLICIES)  # one task per scenario, under every policy
    assert progress[0] == f"convergence: 0/{runs}"
    assert progress[-1] == f"convergence: {runs}/{runs}"
    assert "…" not in done.stdout
    rows = [line for line in done.stdout.splitlines() if "objective_verified" in line]
    assert len(rows) == 1 and rows[0].rstrip().endswith("│")
    assert "accuracy" in done.stdout
