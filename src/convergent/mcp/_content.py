"""An MCP tool result as the text the model sees (machinery)."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

__all__ = ["result_text"]


def _block_text(block: Any) -> str:
    match block:
        case types.TextContent():
            return block.text
        case types.ImageContent() | types.AudioContent():
            kind = "image" if isinstance(block, types.ImageContent) else "audio"
            size = len(block.data) * 3 // 4 - block.data[-2:].count("=")  # of the base64
            return f"[{kind}: {block.mime_type}, {size} bytes]"
        case types.ResourceLink():
            return f"[resource: {block.uri}]"
        case types.EmbeddedResource():
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                return resource.text
            return f"[resource: {resource.uri}, {resource.mime_type or 'binary'}]"
        case _:
            return str(block)


def result_text(result: types.CallToolResult) -> str:
    """The text of a ``tools/call`` result: its content blocks, else its structured content."""
    parts = [_block_text(block) for block in result.content]
    if not any(parts) and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return "\n".join(part for part in parts if part)
