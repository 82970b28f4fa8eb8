"""docs/mcp.md: its Python examples run; the extra's absence is one clear line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_helpers import descendants

from cli._probe import printed_by

DOC = Path(__file__).parents[2] / "docs" / "mcp.md"


def blocks() -> list[str]:
    found = []
    lines = DOC.read_text().splitlines()
    for index, line in enumerate(lines):
        if line == "```python" and not (index and lines[index - 1].startswith("<!-- not-run:")):
            end = lines.index("```", index + 1)
            found.append("\n".join(lines[index + 1 : end]))
    return found


def test_the_page_has_runnable_examples() -> None:
    assert len(blocks()) == 2
    assert "<!-- not-run: needs an MCP server" in DOC.read_text()


@pytest.mark.parametrize("code", blocks(), ids=lambda code: re.sub(r"\W+", "-", code[:40]))
@pytest.mark.slow
def test_each_python_example_runs(code: str) -> None:
    pytest.importorskip("mcp")
    before = descendants()
    exec(compile(code, str(DOC), "exec"), {"__name__": "__main__"})
    assert descendants() - before == set()


def test_without_the_sdk_a_run_with_servers_is_one_clear_line() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "from convergent import Agent, ScriptedModel, UserError\n"
        "from convergent.mcp import MCPServer\n"
        "agent = Agent(ScriptedModel(['x']), mcp_servers=[MCPServer.stdio('t', 'cmd')])\n"
        "try:\n"
        "    agent.run_sync('x')\n"
        "except UserError as exc:\n"
        "    print(exc)\n"
    )
    assert printed_by(code) == "MCP servers need the mcp package: pip install 'mcp>=2.3.0,<3'\n"


@pytest.mark.slow
def test_the_command_line_examples_need_only_packages_the_page_names() -> None:
    pytest.importorskip("mcp")
    text = DOC.read_text()
    # uvx and pipx appear only where the page says how to run a server in its own environment
    own = text.split("## Servers in their own environment")[1].split("\n## ")[0]
    assert text.count("uvx") == own.count("uvx") and text.count("pipx") == own.count("pipx")
    assert "pip install mcp-server-time" in text
    listings = [line for line in text.splitlines() if line.startswith("convergent mcp tools ")]
    assert listings == [
        "convergent mcp tools mcp-server-time                  # what the server offers"
    ]
    command = listings[0].split("#")[0].split()
    proc = subprocess.run(
        [sys.executable, "-m", "convergent", *command[1:], "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert [tool["name"] for tool in json.loads(proc.stdout)] == [
        "get_current_time",
        "convert_time",
    ]
