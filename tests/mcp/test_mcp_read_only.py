"""MCP's ``readOnlyHint`` annotation becomes the tool's ``read_only`` flag."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest

from convergent.mcp._tools import mcp_tool


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
    server = SimpleNamespace(prefix=None, timeout=30.0, source="mcp:test", name="test")
    connection: Any = SimpleNamespace(server=server)
    assert mcp_tool(connection, listed(annotations)).read_only is expected
