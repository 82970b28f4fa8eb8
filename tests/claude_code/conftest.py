"""Fixtures for tests that drive the real Claude Code CLI against the fake Messages API."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from .claude_cli import ClaudeCode, find_claude

CONVERGENT = Path(sys.executable).with_name("convergent")
"""This environment's ``convergent`` command, which the hooks run."""


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    binary = find_claude()
    if binary is None:
        pytest.skip(
            "the Claude Code CLI is not installed: run .ci/run "
            "(npm ci --prefix .ci/claude-code) or put `claude` on PATH"
        )
    return binary


@pytest.fixture
def claude_code(claude_binary: Path, tmp_path: Path) -> ClaudeCode:
    return ClaudeCode(claude_binary, tmp_path / "claude-code")


def convergent_hooks(*, options: str = "", post_tool_use: bool = False) -> dict[str, Any]:
    """Project settings that install convergent's hooks, as docs/coordinator.md shows."""

    def command(event: str, extra: str = "") -> list[dict[str, Any]]:
        line = f"{shlex.quote(str(CONVERGENT))} hook {event}{extra}"
        return [{"type": "command", "command": line, "timeout": 60}]

    hooks: dict[str, Any] = {
        "Stop": [{"hooks": command("stop", options)}],
        "SubagentStop": [{"hooks": command("subagent-stop", options)}],
    }
    if post_tool_use:
        hooks["PostToolUse"] = [{"matcher": "Agent|Task", "hooks": command("post-tool-use")}]
    return {"hooks": hooks}
