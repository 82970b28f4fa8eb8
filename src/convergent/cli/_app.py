"""The ``convergent`` command group: the typer app every command module adds itself to."""

from __future__ import annotations

import importlib

import typer

from convergent.cli._help import hide_flag_types

__all__ = ["app"]

app = typer.Typer(
    name="convergent",
    help="LLM agent loops that stop for objective reasons.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """LLM agent loops that stop for objective reasons."""


def _register() -> None:
    """Import the command modules; each adds its commands to `app`."""
    for module in (
        "run",
        "coordinator",
        "hook",
        "synthesize",
        "runs",
        "bench",
        "worker",
        "ui",
        "mcp_tools",
    ):
        importlib.import_module(f"convergent.cli.{module}")


hide_flag_types()
_register()
