"""Help texts: a flag shows no value type.

typer's rich help prints a type beside every option, ``<bool>`` for flags too
(``--json <bool>``, ``--help <bool>``), which reads as if the flag took a value. A flag
takes none, so its type column is left empty, as click's plain help does.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperOption

__all__ = ["hide_flag_types"]

_typed = TyperOption.display_type_rich


def _flag_untyped(self: TyperOption, ctx: Any) -> str | None:
    if self.is_flag and self.metavar is None:
        return None
    return _typed(self, ctx)


def hide_flag_types() -> None:
    """Leave the type column of flags empty in every command's help."""
    TyperOption.display_type_rich = _flag_untyped  # type: ignore[method-assign]
