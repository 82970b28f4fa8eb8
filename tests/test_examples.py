"""Every example runs and prints what it promises."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / "quickstart.py"), run_name="__main__")
    assert capsys.readouterr().out.startswith("completed after 2 cycles")


def test_parallel_tools(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / "parallel_tools.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "completed: True" in out and "stalled: True" in out
    assert "['ToolStarted', 'ToolStarted', 'ToolStarted', 'ToolFinished'" in out


@pytest.mark.slow
def test_scripted_run_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "convergent",
            "run",
            "(17*23)+4",
            "--json",
            "--model",
            f"scripted:{EXAMPLES / 'scripted_run.json'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    data = json.loads(proc.stdout)
    assert data["stop_reason"] == "completed" and data["cycles"] == 3
    assert [c["arguments"]["expression"] for c in data["tool_calls"]] == ["17 * 23", "391 + 4"]
