"""An MCP server's listed tool as a convergent `Tool` (machinery).

The listed JSON schema is what the model sees; the arguments are checked against it
here, within bounds (`convergent.mcp._schema`), so that a bad call is the model's
mistake (``invalid``) rather than a failure of the server. A result the server marks
``isError`` is a `ToolError`: a tool failure under the run's tool-error policy.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection
from typing import Any

import mcp_types as types

from convergent.effects import Effect, annotated_effect
from convergent.exceptions import ToolError
from convergent.mcp._connection import ServerConnection
from convergent.mcp._content import result_text
from convergent.mcp._schema import ArgumentCheck
from convergent.tools import Tool

__all__ = ["local_name", "mcp_tool"]

_FLAGS: dict[Effect, tuple[bool | None, bool]] = {
    Effect.READ: (True, True),
    Effect.IDEMPOTENT: (False, True),
    Effect.WRITE: (False, False),
    Effect.UNDECLARED: (None, False),
}
"""Each effect as a `Tool`'s flags (a read is idempotent too: it may run again on resume)."""


def local_name(name: str, prefix: str | None) -> str:
    """The name the model calls a server's tool by: prefixed, with unusable characters ``_``."""
    full = f"{prefix}_{name}" if prefix else name
    full = re.sub(r"[^A-Za-z0-9_.-]", "_", full)
    if not re.match(r"[A-Za-z_]", full):
        full = f"_{full}"
    return full[:64]


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    cleaned = {key: value for key, value in schema.items() if key not in ("title", "$schema")}
    cleaned["type"] = "object"
    cleaned.setdefault("properties", {})
    return cleaned


def mcp_tool(connection: ServerConnection, listed: types.Tool, taken: Collection[str] = ()) -> Tool:
    """The `Tool` that calls ``listed`` on the server behind ``connection``.

    What a call does is what the server's ``effects`` say of it, else what its
    annotations declare (`convergent.effects.annotated_effect`, the one reading of them
    every host uses too). Its name is the listed one (after the server's ``prefix``),
    or, if that is in ``taken``, that name after the server's own name: ``NAME_TOOL``.
    """
    server = connection.server
    name = local_name(listed.name, server.prefix)
    if name in taken:
        name = local_name(name, server.name)
    remote = listed.name
    schema = _object_schema(dict(listed.input_schema))
    check = ArgumentCheck(name, schema)

    async def call(**arguments: Any) -> str:
        # off the loop: the check is bounded, and the loop keeps answering signals meanwhile
        await asyncio.to_thread(check, arguments)
        result = await connection.call(remote, arguments)
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"MCP server {server.name!r} reported an error")
        return text

    effect = server.effects.get(remote) or annotated_effect(listed.annotations)
    read_only, idempotent = _FLAGS[effect]
    return Tool.from_schema(
        name=name,
        description=listed.description or listed.title or remote,
        parameters=schema,
        function=call,
        timeout=server.timeout,
        idempotent=idempotent,
        read_only=read_only,
        source=server.source,
    )
