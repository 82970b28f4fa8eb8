"""Deprecated: `resume` and its helpers moved to `convergent.resuming`.

They rebuild agents from their specs, so they sit beside the builder, above the loop
and this package. Each old name still resolves here when it is used, with a
`DeprecationWarning`; nothing above this package is imported before that.
"""

from __future__ import annotations

import importlib

from convergent._deprecated import warn_old

__all__: list[str] = []

_MOVED = frozenset(
    {
        "Continuation",
        "answers_for",
        "pending_answers",
        "prepare_resume",
        "resumable_run",
        "resume",
        "spec_of",
        "steerable_run",
    }
)
"""The names that moved to `convergent.resuming`."""


def __getattr__(name: str) -> object:
    """The moved name from `convergent.resuming`, with a `DeprecationWarning` (PEP 562)."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warn_old(f"convergent.durability.resuming.{name} moved: import it from convergent.resuming")
    return getattr(importlib.import_module("convergent.resuming"), name)
