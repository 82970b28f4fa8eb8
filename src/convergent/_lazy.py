"""Package attributes imported on first use, so that a light command loads only what it needs.

A package lists its public names as ordinary ``from module import name`` statements
under ``if TYPE_CHECKING:`` (what type checkers and readers see); `attach` reads those
statements from the package's source and imports each module when one of its names is
first used.

A name exported from a submodule of the same name (``coordinator.decide`` holding
``decide``) needs more: importing the submodule sets the package attribute to the
module. Such names (exported, and the name of a submodule) become properties of the
package's module type, so they always mean the exported object, whichever import ran
first.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["attach"]


def _exports(source: Path) -> dict[str, str]:
    """``{name: module}`` from the ``from ... import ...`` lines under ``if TYPE_CHECKING:``."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    where: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        where[alias.asname or alias.name] = statement.module
    return where


def _shadowed(name: str, module: str) -> property:
    def get(package: ModuleType) -> Any:
        return getattr(importlib.import_module(module), name)

    def set_(package: ModuleType, value: Any) -> None:
        """The import system sets the submodule here; the name keeps its meaning."""

    return property(get, set_)


def _submodules(folder: Path) -> set[str]:
    return {
        entry.name.removesuffix(".py")
        for entry in folder.iterdir()
        if entry.suffix == ".py" or (entry / "__init__.py").exists()
    }


def attach(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, called from its ``__init__``.

    The source is read only when a lazy name is first used; at import, one listing of
    the package's folder finds the names that need a property.
    """
    module = sys.modules[package]
    source = Path(str(module.__file__))
    shadowed = set(getattr(module, "__all__", ())) & _submodules(source.parent)
    if shadowed:
        properties = {name: _shadowed(name, f"{package}.{name}") for name in shadowed}
        module.__class__ = type(f"{package}.module", (ModuleType,), properties)
    table: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        if not table:
            table.update(_exports(source))
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(module), *getattr(module, "__all__", ())})

    return __getattr__, __dir__
