"""MCP's annotations become the tool's ``read_only`` and ``idempotent`` flags, and so its
`Effect`: ``readOnlyHint``, ``idempotentHint`` and ``destructiveHint``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest

from convergent import Effect
from convergent.mcp import MCPServer


def listed(annotations: types.ToolAnnotations | None) -> types.Tool:
    return types.Tool(
        name="lookup",
        input_schema={"type": "object", "properties": {}},
        annotations=annotations,
    )


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (types.ToolAnnotations(read_only_hint=True), True),
        (types.ToolAnnotations(read_only_hint=False), False),
        (types.ToolAnnotations(title="Lookup"), None),
        (None, None),
    ],
)
def test_read_only_hint_maps_to_read_only(
    annotations: types.ToolAnnotations | None, expected: bool | None
) -> None:
    from convergent.mcp._tools import mcp_tool  # loads the MCP SDK

    server = MCPServer.stdio("test", "never-started", timeout=30.0)
    connection: Any = SimpleNamespace(server=server)
    assert mcp_tool(connection, listed(annotations)).read_only is expected


@pytest.mark.parametrize(
    ("annotations", "effect"),
    [
        (types.ToolAnnotations(read_only_hint=True), Effect.READ),
        (types.ToolAnnotations(read_only_hint=True, idempotent_hint=False), Effect.READ),
        (types.ToolAnnotations(read_only_hint=False), Effect.WRITE),
        (types.ToolAnnotations(read_only_hint=False, idempotent_hint=True), Effect.IDEMPOTENT),
        # the hints that mean something only for a tool that is not read-only declare one
        (types.ToolAnnotations(idempotent_hint=True), Effect.IDEMPOTENT),
        (types.ToolAnnotations(idempotent_hint=False), Effect.WRITE),
        (types.ToolAnnotations(destructive_hint=True), Effect.WRITE),
        (types.ToolAnnotations(destructive_hint=False), Effect.WRITE),
        # destructive or not, a repeat of an idempotent tool adds nothing
        (types.ToolAnnotations(destructive_hint=True, idempotent_hint=True), Effect.IDEMPOTENT),
        (types.ToolAnnotations(title="Lookup", open_world_hint=True), Effect.UNDECLARED),
        (None, Effect.UNDECLARED),
    ],
)
def test_the_annotations_declare_the_effect(
    annotations: types.ToolAnnotations | None, effect: Effect
) -> None:
    from convergent.mcp._tools import mcp_tool  # loads the MCP SDK

    server = MCPServer.stdio("test", "never-started", timeout=30.0)
    connection: Any = SimpleNamespace(server=server)
    assert mcp_tool(connection, listed(annotations)).effect is effect
