"""`convergent hook stop` loads only the coordinator: no typer, rich, httpx or agent stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = (
    "typer",
    "rich",
    "httpx",
    "openai",
    "griffe",  # read only to build tools from docstrings
    "asyncio",  # loaded by the coordinator's controller, which the hook never runs
    "convergent.agent",
    "convergent.models",
    "convergent.tools",
)

PROBE = """
import json, sys
sys.argv = ["convergent", "hook", "stop"]
from convergent.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
loaded = sorted({name.split(".")[0] if not name.startswith("convergent") else name
                 for name in sys.modules})
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def test_the_hook_answers_without_loading_the_agent_stack(tmp_path: Path) -> None:
    payload = json.dumps({"session_id": "s", "cwd": str(tmp_path), "hook_event_name": "Stop"})
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        input=payload,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0
    assert done.stdout == "{}\n"  # no state file: the stop is allowed
    loaded = set(report["loaded"])
    assert "convergent.coordinator.hook" in loaded
    assert not [name for name in loaded if name.startswith(FORBIDDEN)], loaded


def test_hook_help_still_uses_the_full_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "convergent", "hook", "stop", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "--verify" in done.stdout and "--state" in done.stdout
