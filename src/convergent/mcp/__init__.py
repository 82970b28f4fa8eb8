"""MCP tool servers as tool sources: ``Agent(model, tools, mcp_servers=[...])``.

A server is a command spoken to over stdio, or a streamable HTTP endpoint
(`MCPServer`); `load_mcp_config` reads the ``mcpServers`` JSON of Claude Desktop and
Claude Code. Their tools are called through the same loop, timeouts, stall detection
and checkpoints as any tool; each records its server as its ``source`` (``mcp:NAME``).

Configuring servers needs only convergent; running them needs the ``mcp`` extra
(``pip install 'mcp>=2.3.0,<3' 'google-re2>=1.1.20251105,<2'``).
"""

from convergent.mcp.config import (
    MCPServer,
    load_mcp_config,
    mcp_config,
    parse_mcp_servers,
    server_from_command,
)
from convergent.mcp.toolset import MCPToolset

__all__ = [
    "MCPServer",
    "MCPToolset",
    "load_mcp_config",
    "mcp_config",
    "parse_mcp_servers",
    "server_from_command",
]
