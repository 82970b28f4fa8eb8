"""Command-line options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "BaseUrlOption",
    "JsonOption",
    "McpConfigOption",
    "McpEffectOption",
    "ModelOption",
    "OtlpFileOption",
    "OtlpOption",
    "TraceOption",
]

ModelOption = Annotated[
    str | None,
    typer.Option(help="scripted:PATH, openai:MODEL, anthropic:MODEL, local, local:PATH.gguf"),
]
BaseUrlOption = Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")]
TraceOption = Annotated[
    Path | None,
    typer.Option(help="Write every event as JSON Lines here (not the streaming deltas)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object, nothing else.")]
OtlpOption = Annotated[
    str | None,
    typer.Option(
        "--otlp",
        metavar="ENDPOINT",
        help="Send OpenTelemetry traces of the run to this OTLP/HTTP collector, e.g. "
        "http://localhost:4318 (needs the otel extra).",
    ),
]
OtlpFileOption = Annotated[
    Path | None,
    typer.Option(
        "--otlp-file",
        metavar="PATH",
        help="Append OpenTelemetry traces of the run to this file as OTLP JSON lines, as "
        "the Collector's file exporter writes them (convergent replay reads it).",
    ),
]
McpConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--mcp-config",
        metavar="FILE",
        help="The MCP servers in this mcpServers JSON file "
        "(the format of Claude Desktop and Claude Code).",
    ),
]
McpEffectOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp-effect",
        metavar="[SERVER:]TOOL=EFFECT",
        help="What a call of an MCP server's tool does: read, idempotent, write or "
        "undeclared, over the server's annotations (repeatable; SERVER: when there are "
        "several servers).",
    ),
]
