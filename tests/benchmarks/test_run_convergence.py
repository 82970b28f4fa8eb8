"""The convergence script: the suite here, and this benchmark against another library tree."""

from __future__ import annotations

import json
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import pytest
from benchmarks.run_convergence import main

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
RULES_BEFORE = "361b87a"
"""The commit before `StopPolicy`: the rules the before rows of docs/benchmark.md show."""


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_source_tree_runs_this_benchmark_in_its_own_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["0", "2", "--scenario=timestamped_status", "--scenario=max_tool_calls", "--json"]
    code, here, _ = run_cli(capsys, *argv, "--policy=objective")
    assert code == 0
    code, there, err = run_cli(capsys, *argv, f"--source=tree={SRC}")
    assert code == 0 and "tree: convergent from" in err
    assert json.loads(there) == {"tree": json.loads(here)}


def test_the_side_by_side_table_has_a_row_per_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "0", "1", "--scenario=cycle_of_2", f"--source=a={SRC}")
    assert code == 0
    header, rule, row = out.splitlines()
    assert header == "| scenario | what the model does | a |" and rule.count("---") == 3
    assert row.startswith("| cycle_of_2 | ") and "1 correct; `stalled` 1; cycle 6; 1 notes" in row


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--source=nolabel"], "expected LABEL=SRC"),
        (["--source=x=/no/such"], "expected LABEL=SRC"),
        (["--scenario=nope"], "unknown scenario 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def _sources_of(commit: str, folder: Path) -> Path | None:
    """``commit``'s ``src`` folder, unpacked into ``folder`` (None: not in this clone)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit, "src"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def test_the_rules_before_the_policy_run_this_benchmark(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = _sources_of(RULES_BEFORE, tmp_path)
    if before is None:
        pytest.skip(f"{RULES_BEFORE} is not in this clone")
    scenarios = ["--scenario=timestamped_status", "--scenario=max_tool_calls"]
    code, out, _ = run_cli(
        capsys, "0", "2", *scenarios, f"--source=before={before}", f"--source=now={SRC}", "--json"
    )
    assert code == 0
    runs = json.loads(out)
    ends = {
        label: {(run["scenario"], run["stop"], run["correct"]) for run in rows}
        for label, rows in runs.items()
    }
    # the earlier rules compared results byte for byte and had no cap on tool calls
    assert ends["before"] == {
        ("timestamped_status", "max_cycles", False),
        ("max_tool_calls", "completed", False),
    }
    assert ends["now"] == {
        ("timestamped_status", "stalled", True),
        ("max_tool_calls", "budget_exhausted", True),
    }
