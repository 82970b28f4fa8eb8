"""``convergent mcp tools``: what an MCP server offers, before a run depends on it."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from convergent._printable import printable
from convergent.cli._app import app
from convergent.cli._options import JsonOption, McpConfigOption, McpEffectOption
from convergent.cli.run import mcp_servers
from convergent.effects import Effect
from convergent.exceptions import UserError
from convergent.mcp.config import MCPServer
from convergent.mcp.toolset import MCPToolset
from convergent.tools import Tool

__all__ = ["mcp_app", "tools_command"]

mcp_app = typer.Typer(
    name="mcp",
    help="MCP tool servers: see what they offer.",
    no_args_is_help=True,
    add_completion=False,
)


async def _listed(servers: list[MCPServer]) -> list[Tool]:
    """Start the servers, list their tools, stop them."""
    toolset = MCPToolset(servers)
    try:
        return await toolset.acquire()
    finally:
        await toolset.release()


@mcp_app.command("tools")
def tools_command(
    commands: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[COMMAND]...",
            help="A server's command line, e.g. 'mcp-server-time' (one argument each).",
            show_default=False,
        ),
    ] = None,
    mcp_config_file: McpConfigOption = None,
    mcp_effect: McpEffectOption = None,
    json_output: JsonOption = False,
) -> None:
    """Start MCP servers, list their tools (name, effect, description), stop them."""
    servers = mcp_servers(commands, mcp_config_file, mcp_effect)
    if not servers:
        raise UserError('give a server: convergent mcp tools "COMMAND" or --mcp-config FILE')
    tools = asyncio.run(_listed(servers))
    rows = [
        {
            "name": item.name,
            "server": (item.source or "").removeprefix("mcp:"),
            "effect": item.effect.value,
            "read_only": item.read_only,
            "description": item.description,
        }
        for item in tools
    ]
    if json_output:
        print(json.dumps(rows, ensure_ascii=False))
        return
    if not rows:
        print("the servers offer no tools")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("name", "server", "effect", "description"):
        table.add_column(column)
    for row in rows:
        description = str(row["description"]).strip().splitlines()
        table.add_row(
            escape(printable(str(row["name"]), one_line=True)),
            escape(printable(str(row["server"]), one_line=True)),
            str(row["effect"]),
            escape(printable(description[0] if description else "", one_line=True)),
        )
    console = Console(highlight=False)
    console.print(table)
    if any(row["effect"] == Effect.UNDECLARED for row in rows):
        console.print(
            "undeclared: a repeat is judged on its result, and refused after its note; "
            "declare what such a tool does with --mcp-effect TOOL=EFFECT or in its "
            'server\'s "effects" (--mcp-config; docs/mcp.md)'
        )


app.add_typer(mcp_app, name="mcp")
