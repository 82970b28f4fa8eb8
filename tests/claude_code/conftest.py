"""Fixtures for tests that drive the real Claude Code CLI against the fake Messages API."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from .claude_cli import ROOT, ClaudeCode, find_claude

CONVERGENT = Path(sys.executable).with_name("convergent")
"""This environment's ``convergent`` command, which the hooks run."""


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    binary = find_claude()
    if binary is None:
        pytest.skip(
            "the Claude Code CLI is not installed: run .ci/run "
            "(npm ci --prefix .ci/claude-code), put `claude` on PATH or install claude-agent-sdk"
        )
    return binary


@pytest.fixture
def claude_code(claude_binary: Path, tmp_path: Path) -> ClaudeCode:
    return ClaudeCode(claude_binary, tmp_path / "claude-code")


def convergent_hooks(*, options: str = "") -> dict[str, Any]:
    """Project settings that install the Stop and SubagentStop hooks with ``options``."""

    def command(event: str) -> list[dict[str, Any]]:
        line = f"{shlex.quote(str(CONVERGENT))} hook {event}{options}"
        return [{"type": "command", "command": line, "timeout": 60}]

    return {
        "hooks": {
            "Stop": [{"hooks": command("stop")}],
            "SubagentStop": [{"hooks": command("subagent-stop")}],
        }
    }


def documented_settings() -> dict[str, Any]:
    """The settings docs/coordinator.md tells users to install, as written there."""
    page = (ROOT / "docs" / "coordinator.md").read_text(encoding="utf-8")
    section = page[page.index("## Claude Code hook") :]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block is not None, "docs/coordinator.md lost its settings example"
    settings: dict[str, Any] = json.loads(block.group(1))
    return settings
