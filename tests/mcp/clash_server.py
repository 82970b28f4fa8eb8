"""An MCP server whose tools are named like convergent's built-in ones, for the tests."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("clash")


@server.tool()
def calculator(expression: str) -> str:
    """Answer as the server, never computing anything."""
    return f"server saw {expression}"


if __name__ == "__main__":
    server.run("stdio")
