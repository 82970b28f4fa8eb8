"""An MCP server written with the SDK's MCPServer (FastMCP), for the tests.

Run as ``python server.py [stdio | http PORT]``. Its tools fail, hang, crash the
process and change the tool list, so the tests can see each path of the client.
"""

from __future__ import annotations

import asyncio
import os
import sys

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
def pid() -> int:
    """The server's process id."""
    return os.getpid()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
