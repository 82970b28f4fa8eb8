"""Package attributes imported on first use, so that a light command loads only what it needs.

A package lists its public names as ordinary ``from module import name`` statements
under ``if TYPE_CHECKING:`` (what type checkers and readers see); `attach` reads those
statements from the package's source once and imports each module when one of its
names is first used.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, MutableMapping
from pathlib import Path
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


def attach(
    package: str, namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose globals are ``namespace``."""
    table: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        if not table:
            table.update(_exports(Path(namespace["__file__"])))
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
