"""`convergent hook stop` loads only the coordinator: no typer, rich, httpx, pydantic, agent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from convergent.coordinator import (
    DEFAULT_STATE_FILE,
    ArtifactCheck,
    Atom,
    BaseCase,
    StateStore,
    WorkflowState,
)

from ._probe import probe

FORBIDDEN = (
    "typer",
    "rich",
    "httpx",
    "openai",
    "griffe",  # read only to build tools from docstrings
    "asyncio",  # loaded by the coordinator's controller, which the hook never runs
    "pydantic",  # about 100 ms to import; the state file is read with msgspec
    "convergent.limits",
    "convergent.agent",
    "convergent.models",
    "convergent.tools",
)


def _probe(folder: Path) -> tuple[str, frozenset[str]]:
    """The hook's stdout for a Stop in ``folder``, and the modules it loaded."""
    payload = json.dumps({"session_id": "s", "cwd": str(folder), "hook_event_name": "Stop"})
    done = probe(folder, "hook", "stop", stdin=payload)
    assert done.code == 0
    return done.stdout, done.loaded


def test_the_hook_answers_without_loading_the_agent_stack(tmp_path: Path) -> None:
    stdout, loaded = _probe(tmp_path)
    assert stdout == "{}\n"  # no state file: the stop is allowed
    assert "convergent.coordinator.hook" in loaded
    assert not [name for name in loaded if name.startswith(FORBIDDEN)], loaded


def test_reading_deciding_and_writing_the_state_loads_no_more(tmp_path: Path) -> None:
    state = WorkflowState(
        goal="ship it",
        atoms=[Atom(id="a1", title="write it")],
        base_case=BaseCase(checks=[ArtifactCheck(name="built", path="dist/app")]),
    )
    store = StateStore(tmp_path / DEFAULT_STATE_FILE)
    store.create(state)
    stdout, loaded = _probe(tmp_path)
    assert json.loads(stdout)["decision"] == "block"
    assert store.load().control.hook.consecutive_blocks == 1
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
