"""Each package's ``__all__`` is exactly the public surface it holds, checked here.

The names live once, where they are exported (httpx's way: the test reads the package
instead of repeating its list). A package that imports its names on first use (PEP 562)
names each one's module in ``_MODULE_OF`` and imports it for type checkers under
``TYPE_CHECKING``: the two must agree, and the core namespace (`convergent`) holds the
loop, models, tools, stop reasons, results, events, durability and errors, each product
its own names in its own subpackage.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from types import ModuleType

import pytest

import convergent

PACKAGES = [
    "convergent",
    "convergent.adapters",
    "convergent.coordinator",
    "convergent.durability",
    "convergent.gate",
    "convergent.mcp",
    "convergent.models",
    "convergent.replay",
    "convergent.synthesis",
    "convergent.telemetry",
    "convergent.temporal",
    "convergent.testing",
    "convergent.ui",
]

CORE = [
    "Agent",
    "AgentSpec",
    "AnthropicModel",
    "ConvergentError",
    "CycleStarted",
    "Effect",
    "Event",
    "Limits",
    "LocalModel",
    "Model",
    "ModelError",
    "ModelHTTPError",
    "ModelResponded",
    "ModelResponse",
    "ModelSettings",
    "NeedsUserInput",
    "OpenAIChatModel",
    "RunJournal",
    "RunResult",
    "RunStarted",
    "RunState",
    "RunStopped",
    "RunStore",
    "RunStream",
    "ScriptedModel",
    "StopPolicy",
    "StopReason",
    "StorageError",
    "TextDelta",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolError",
    "ToolFinished",
    "ToolStarted",
    "Usage",
    "UserError",
    "Verification",
    "Verifier",
    "__version__",
    "build_agent",
    "calculator",
    "default_tools",
    "file_tools",
    "model_from_string",
    "resume",
    "tool",
]
"""The core API, pinned name by name: a name added to or taken from `convergent` is a
decision this list records."""

NOT_EXPORTS = {"annotations", "TYPE_CHECKING"}
"""Names that ``from __future__``/``typing`` imports leave in a namespace."""


def _exported(package: ModuleType) -> set[str]:
    """The public names ``package`` holds, once every listed name has been used."""
    for name in package.__all__:
        getattr(package, name)
    return {
        name
        for name, value in vars(package).items()
        if (not name.startswith("_") or name == "__version__")
        and name not in NOT_EXPORTS
        and not isinstance(value, ModuleType)  # a submodule someone imported
    }


def _typing_imports(package: ModuleType) -> dict[str, str]:
    """The names the package imports under ``if TYPE_CHECKING:``, with their modules."""
    tree = ast.parse(inspect.getsource(package))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for item in node.body:
                assert isinstance(item, ast.ImportFrom) and item.module is not None
                for alias in item.names:
                    found[alias.asname or alias.name] = item.module
    return found


@pytest.mark.parametrize("package_name", PACKAGES)
def test_each_package_exports_exactly_what_it_lists(package_name: str) -> None:
    package = importlib.import_module(package_name)
    listed = list(package.__all__)
    assert len(listed) == len(set(listed))
    for name in listed:
        assert getattr(package, name) is not None, f"{package_name}.{name}"
    assert _exported(package) == set(listed)


@pytest.mark.parametrize("package_name", PACKAGES)
def test_names_imported_on_first_use_are_the_ones_type_checkers_see(package_name: str) -> None:
    package = importlib.import_module(package_name)
    lazy: dict[str, str] = getattr(package, "_MODULE_OF", {})
    assert set(lazy) <= set(package.__all__)
    for name, module in lazy.items():
        assert getattr(importlib.import_module(module), name) is getattr(package, name), name
    typing = _typing_imports(package)
    assert set(typing) - {"__version__"} == set(lazy)
    for name, module in typing.items():
        if name in lazy:
            assert module == lazy[name] or module.startswith(f"{lazy[name]}."), name


def test_the_core_api_is_pinned() -> None:
    assert convergent.__all__ == CORE


def test_the_core_holds_the_loop_and_no_product() -> None:
    products = ("coordinator", "synthesis", "gate", "ui", "temporal", "mcp", "telemetry")
    for name in convergent.__all__:
        module = getattr(convergent, name).__module__ if name != "__version__" else ""
        assert not any(module.startswith(f"convergent.{product}") for product in products)


@pytest.mark.parametrize(
    "name", ["Coordinator", "WorkflowState", "ExecutiveGate", "Archetype", "fail", "Message"]
)
def test_names_outside_the_core_are_not_exported_by_it(name: str) -> None:
    with pytest.raises(AttributeError, match=name):
        getattr(convergent, name)


PROBE = """
import sys
import convergent.coordinator.decide, convergent.coordinator.metrics  # the submodules first
from convergent.coordinator import decide, metrics
assert callable(decide) and callable(metrics)
assert decide.__module__ == "convergent.coordinator.decide"
import convergent
assert "convergent.agent" not in sys.modules     # neither loads the agent stack
assert convergent.Agent.__module__ == "convergent.agent"
assert "convergent.agent" in sys.modules
"""


def test_exports_load_on_first_use_and_keep_their_meaning() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
