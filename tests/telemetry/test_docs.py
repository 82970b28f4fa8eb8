"""The Python examples of docs/telemetry.md run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "telemetry.md"


def test_the_python_examples_print_the_span_tree(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2
    # in a process of its own: the first example sets the global tracer provider
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(blocks)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    names = [line.split("  ")[0] for line in lines[:-1]]
    assert sorted(names) == sorted(
        ["chat scripted"] * 2 + ["execute_tool calculator"] * 2 + ["invoke_agent sums"]
    )
    assert names[-1] == "invoke_agent sums"
    assert "'convergent.stop_reason': 'completed'" in lines[-2]
    assert "'convergent.cycles': 2" in lines[-2]
    assert lines[-1] == "completed"
