"""Listed MCP tools as convergent tools: names, schemas, results."""

from __future__ import annotations

from typing import Any

import pytest

from convergent import Tool, ToolArgumentsError

types = pytest.importorskip("mcp_types")

from convergent.mcp._content import result_text  # noqa: E402


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("get_time", None, "get_time"),
        ("get_time", "t", "t_get_time"),
        ("files/read", None, "files_read"),
        ("9lives", None, "_9lives"),
        ("x" * 80, None, "x" * 64),
    ],
)
def test_local_names_are_usable_by_every_provider(
    name: str, prefix: str | None, expected: str
) -> None:
    from convergent.mcp._tools import local_name  # loads the MCP SDK

    assert local_name(name, prefix) == expected


def test_result_text_joins_blocks_and_falls_back_to_structured_content() -> None:
    blocks: list[Any] = [
        types.TextContent(type="text", text="one"),
        types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
        types.ResourceLink(type="resource_link", name="r", uri="file:///a.txt"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="file:///b.txt", text="inside"),
        ),
    ]
    text = result_text(types.CallToolResult(content=blocks))
    assert text == "one\n[image: image/png, 5 bytes]\n[resource: file:///a.txt]\ninside"
    structured = types.CallToolResult(content=[], structured_content={"n": 1})
    assert result_text(structured) == '{"n": 1}'


async def test_a_schema_tool_passes_its_arguments_whole() -> None:
    async def run(**arguments: Any) -> str:
        if "x" not in arguments:
            raise ToolArgumentsError("x is required")
        return f"{sorted(arguments.items())}"

    made = Tool.from_schema(
        name="t",
        description="d",
        parameters={"type": "object", "properties": {"x": {"type": "integer"}}},
        function=run,
        source="mcp:s",
    )
    assert made.source == "mcp:s" and made.is_async
    assert made.spec.parameters == {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert await made.call({"x": 1, "odd-name": "y"}) == "[('odd-name', 'y'), ('x', 1)]"
    with pytest.raises(ToolArgumentsError):
        await made.call({})
