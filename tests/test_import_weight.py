"""What importing the loop loads: neither SQLite nor MCP until a run uses them."""

from __future__ import annotations

from cli._probe import imported_by


def test_the_loop_imports_no_store_and_no_mcp() -> None:
    loaded = imported_by("import convergent.agent")
    assert "convergent.agent" in loaded and "convergent.durability.protocol" in loaded
    heavy = sorted(
        name
        for name in loaded
        if name.split(".")[0] in ("sqlite3", "_sqlite3", "mcp")
        or name.startswith(("convergent.durability.sqlite", "convergent.mcp"))
    )
    assert heavy == []


def test_a_store_or_an_mcp_server_loads_them_when_used() -> None:
    loaded = imported_by(
        "import convergent.agent\n"
        "from convergent.durability import RunStore\n"
        "from convergent.mcp import MCPServer"
    )
    assert {"sqlite3", "convergent.durability.sqlite.runs", "convergent.mcp.config"} <= loaded
