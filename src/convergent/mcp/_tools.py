"""An MCP server's listed tool as a convergent `Tool` (machinery).

The listed JSON schema is what the model sees; the arguments are checked against it
here, so that a bad call is the model's mistake (``invalid``) rather than a failure
of the server. A result the server marks ``isError`` is a `ToolError`: a tool failure
under the run's tool-error policy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import mcp_types as types

from convergent.exceptions import ToolArgumentsError, ToolError
from convergent.mcp._connection import ServerConnection
from convergent.mcp._content import result_text
from convergent.tools import Tool

__all__ = ["local_name", "mcp_tool"]

Check = Callable[[dict[str, Any]], None]


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


def _checker(tool_name: str, schema: dict[str, Any]) -> Check | None:
    """A function raising `ToolArgumentsError` for arguments that break ``schema``."""
    try:
        from jsonschema import validators
        from jsonschema.exceptions import SchemaError
    except ImportError:  # pragma: no cover - installed with the mcp extra
        return None
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None  # the server's own schema is broken: let the server judge the call
    validator = cls(schema)

    def check(arguments: dict[str, Any]) -> None:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error.absolute_path) or 'arguments'}: {error.message}"
                for error in errors[:3]
            )
            raise ToolArgumentsError(f"invalid arguments for {tool_name}: {problems}")

    return check


def mcp_tool(connection: ServerConnection, listed: types.Tool) -> Tool:
    """The `Tool` that calls ``listed`` on the server behind ``connection``."""
    server = connection.server
    name = local_name(listed.name, server.prefix)
    remote = listed.name
    schema = _object_schema(dict(listed.input_schema))
    check = _checker(name, schema)

    async def call(**arguments: Any) -> str:
        if check is not None:
            check(arguments)
        result = await connection.call(remote, arguments)
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"MCP server {server.name!r} reported an error")
        return text

    hints = listed.annotations
    idempotent = hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)
    # readOnlyHint absent: unknown (MCP's own default, false, is a hint, not a declaration)
    read_only = hints.read_only_hint if hints is not None else None
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
