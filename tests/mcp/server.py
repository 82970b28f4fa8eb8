"""An MCP server written with the SDK's MCPServer (FastMCP), for the tests.

Run as ``python server.py [stdio | http PORT]``. Its tools fail, hang, crash the
process, start processes of their own and change the tool list, so the tests can see
each path of the client.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import psutil
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("testing")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def refuse(reason: str) -> str:
    """Always fail with the given reason (the result is marked isError)."""
    raise ToolError(f"refused: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def crash() -> str:
    """Kill this server process in the middle of the call."""
    sys.stderr.write("about to crash\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def grow(name: str) -> str:
    """Add a tool called ``name`` that answers with its own name."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"A tool added at run time: {name}.")
    return f"added {name}"


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of the server, or "unset"."""
    return os.environ.get(name, "unset")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def spawn(leave_group: bool = False) -> int:
    """Start a process that sleeps for five minutes and return its id.

    With ``leave_group`` it starts a session of its own, as a daemon does, and so is
    outside the server's process group.
    """
    child = subprocess.Popen(
        ["sleep", "300"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=leave_group,
    )
    return child.pid


@server.tool()
def gone(pid: int, within: float) -> bool:
    """Whether process ``pid`` ends within ``within`` seconds (checked every 50 ms)."""
    for _ in range(int(within / 0.05)):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
