"""Help texts: a flag shows no value type, and arguments read as click writes them.

typer's rich help prints a type beside every option, ``<bool>`` for flags too
(``--json <bool>``, ``--help <bool>``), which reads as if the flag took a value. A flag
takes none, so its type column is left empty, as click's plain help does.

typer writes a required argument in braces on the usage line (``convergent run
[OPTIONS] {task}``), which reads like a template placeholder; it is written as click
and most tools write it, in capitals (``TASK``), optional ones in brackets.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperOption

__all__ = ["hide_flag_types", "name_arguments_plainly"]

_typed = TyperOption.display_type_rich


def _flag_untyped(self: TyperOption, ctx: Any) -> str | None:
    if self.is_flag and self.metavar is None:
        return None
    return _typed(self, ctx)


def hide_flag_types() -> None:
    """Leave the type column of flags empty in every command's help."""
    TyperOption.display_type_rich = _flag_untyped  # type: ignore[method-assign]


def _plain_usage_name(self: TyperArgument) -> str:
    name = (self.metavar or self.name or "").upper()
    if not self.required:
        name = f"[{name}]"
    if self.nargs != 1:
        name += "..."
    return name


def name_arguments_plainly() -> None:
    """Write arguments on every command's usage line as ``TASK``, ``[MESSAGE]``."""
    TyperArgument._usage_display_name = _plain_usage_name  # type: ignore[method-assign]
