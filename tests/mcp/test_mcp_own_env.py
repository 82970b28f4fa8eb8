"""A third-party MCP server run from an environment of its own, and one that cannot start.

PyPI's ``mcp-server-sqlite`` needs the MCP SDK 1.x; the ``mcp`` extra installs 2.x. Run
from a virtual environment of its own (see ``own_env.py``), it serves a run; started
beside the SDK 2.x, it fails with one line that names it and the likely cause.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from mcp_helpers import descendants
from own_env import site_packages, sqlite_server

from cli_runner import invoke
from convergent import Agent, StopReason, UserError
from convergent.mcp import MCPServer
from convergent.mcp.toolset import MCPToolset
from convergent.testing import call, scripted

if importlib.util.find_spec("mcp") is None:  # found, not imported: collecting stays light
    pytest.skip("needs the mcp extra", allow_module_level=True)
pytestmark = pytest.mark.slow  # builds (once) and starts a server from a venv of its own

MISMATCH = "AttributeError: 'Server' object has no attribute 'list_resources'"


@pytest.fixture(scope="module")
def server_command() -> Path:
    return sqlite_server()


@pytest.fixture(autouse=True)
def _no_server_outlives_its_test() -> object:
    before = descendants()
    yield None
    assert descendants() - before == set()


async def test_a_server_from_its_own_environment_serves_a_run(
    server_command: Path, tmp_path: Path
) -> None:
    database = tmp_path / "shop.db"
    sqlite = MCPServer.stdio("sqlite", str(server_command), ["--db-path", str(database)])
    model = scripted(
        call("create_table", query="CREATE TABLE fruit (name TEXT, price REAL)"),
        call("write_query", query="INSERT INTO fruit VALUES ('pear', 1.5)"),
        call("read_query", query="SELECT name, price FROM fruit"),
        "A pear costs 1.5.",
    )
    result = await Agent(model, [], mcp_servers=[sqlite]).run("what does a pear cost?")
    assert result.stop_reason is StopReason.COMPLETED
    assert all(record.ok for record in result.tool_calls), result.tool_calls
    assert "pear" in result.tool_calls[-1].result and "1.5" in result.tool_calls[-1].result


def test_the_command_line_runs_it_by_its_path(server_command: Path, tmp_path: Path) -> None:
    listed = invoke(
        "mcp", "tools", f"{server_command} --db-path {tmp_path / 'x.db'}", "--json", cwd=tmp_path
    )
    assert listed.returncode == 0, listed.stderr
    names = {tool["name"] for tool in json.loads(listed.stdout)}
    assert {"read_query", "write_query", "create_table"} <= names


async def test_beside_the_sdk_2_it_fails_in_one_line_naming_the_likely_cause(
    server_command: Path, tmp_path: Path
) -> None:
    # the same server's code, started by this Python: it imports the SDK 2.x installed here
    only = tmp_path / "only-the-server"
    only.mkdir()
    package = site_packages(server_command.parents[1]) / "mcp_server_sqlite"
    (only / "mcp_server_sqlite").symlink_to(package)
    start = "import sys; from mcp_server_sqlite import main; sys.exit(main())"
    beside = MCPServer.stdio(
        "sqlite",
        sys.executable,
        ["-c", start, "--db-path", str(tmp_path / "x.db")],
        env={"PYTHONPATH": str(only)},
    )
    toolset = MCPToolset([beside])
    with pytest.raises(UserError) as failed:
        await toolset.acquire()
    await toolset.release()
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("MCP server 'sqlite' failed to start: ")
    assert MISMATCH in message
    assert "likely cause: it was written for another version of the MCP SDK" in message
    assert "run it from an environment of its own" in message
