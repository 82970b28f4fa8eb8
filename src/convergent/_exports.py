"""Exported names imported only when first used (PEP 562), so light commands start fast."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, MutableMapping


def load_export(
    namespace: MutableMapping[str, object], module_of: Mapping[str, str], name: str
) -> object:
    """Import ``name`` from the module ``module_of`` names for it, and keep it in ``namespace``.

    Args:
        namespace: The package's globals; the name is stored there so that later uses
            do not come back here.
        module_of: The module that defines each lazily exported name.
        name: The attribute asked for.

    Raises:
        AttributeError: If ``name`` is not a lazily exported name.
    """
    module = module_of.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value


def listed_names(namespace: Mapping[str, object], exported: Iterable[str]) -> list[str]:
    """The names already in ``namespace`` and the exported ones not yet used, sorted."""
    return sorted({*namespace, *exported})
