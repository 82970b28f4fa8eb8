"""What importing the loop loads: neither SQLite nor MCP until a run uses them."""

from __future__ import annotations

from cli._probe import imported_by, printed_by


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


_COUNTING_ADAPTERS = (
    "import pydantic\n"
    "built = []\n"
    "init = pydantic.TypeAdapter.__init__\n"
    "def counted(self, kind, *args, **kwargs):\n"
    "    built.append(repr(kind))\n"
    "    init(self, kind, *args, **kwargs)\n"
    "pydantic.TypeAdapter.__init__ = counted\n"
)


def adapters_built_by(statements: str) -> str:
    """The types a fresh interpreter built a pydantic adapter for while running ``statements``."""
    return printed_by(_COUNTING_ADAPTERS + statements + "print(built)\n")


def test_importing_the_loop_builds_no_pydantic_schema() -> None:
    """Each adapter is built when first used (the run state's took about 10 ms)."""
    assert adapters_built_by("import convergent.agent\n") == "[]\n"
    stored = "convergent.agent.RunState(run_id='r', task='t').to_jsonable()\n"
    assert adapters_built_by("import convergent.agent\n" + stored) == (
        "[\"<class 'convergent.state.RunState'>\"]\n"
    )


def test_a_store_or_an_mcp_server_loads_them_when_used() -> None:
    loaded = imported_by(
        "import convergent.agent\n"
        "from convergent.durability import RunStore\n"
        "from convergent.mcp import MCPServer"
    )
    assert {"sqlite3", "convergent.durability.sqlite.runs", "convergent.mcp.config"} <= loaded


BACKENDS = ("anthropic", "local", "openai", "registry", "scripted", "structured")


def test_the_budget_loads_no_model_backend_and_no_terminal_or_http_library() -> None:
    loaded = imported_by("import convergent.loop.budget")
    assert "convergent.loop.budget" in loaded and "convergent.models._prices" in loaded
    heavy = sorted(
        name
        for name in loaded
        if name.split(".")[0] in ("httpx", "rich", "click", "jinja2")
        or name in {f"convergent.models.{backend}" for backend in BACKENDS}
    )
    assert heavy == []


def test_a_backend_loads_when_its_name_is_first_used() -> None:
    loaded = imported_by(
        "import convergent.models as models\n"
        "assert 'convergent.models.anthropic' not in __import__('sys').modules\n"
        "assert models.AnthropicModel.__module__ == 'convergent.models.anthropic'"
    )
    assert "convergent.models.anthropic" in loaded
    assert "convergent.models.local" not in loaded
