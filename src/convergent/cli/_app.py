"""The ``convergent`` command group: the typer app every command module adds itself to."""

from __future__ import annotations

import importlib

import typer
import typer.main
from typer.core import TyperGroup

from convergent.cli._help import hide_flag_types, name_arguments_plainly

__all__ = ["COMMAND_MODULES", "app", "command_for", "register"]

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


COMMAND_MODULES: dict[str, str] = {
    "run": "run",
    "coordinator": "coordinator",
    "hook": "hook",
    "synthesize": "synthesize",
    "runs": "runs",
    "resume": "runs",
    "rewind": "runs",
    "steer": "runs",
    "bench": "bench",
    "worker": "worker",
    "ui": "ui",
    "mcp": "mcp_tools",
    "replay": "replay",
}
"""The module of `convergent.cli` that defines each top-level command (or group)."""


def register(command: str | None = None) -> typer.Typer:
    """`app` with the commands that ``command`` needs: its own module, or every module.

    Each module adds its commands to `app` when imported. A known command loads only its
    module, so ``convergent coordinator record resolve X`` (which agents run often)
    does not load the agent stack; anything else (``--help``, a typo that typer answers
    with suggestions) loads them all.
    """
    known = COMMAND_MODULES.get(command) if command else None
    for module in [known] if known else dict.fromkeys(COMMAND_MODULES.values()):
        importlib.import_module(f"convergent.cli.{module}")
    return app


_built: dict[tuple[int, int], TyperGroup] = {}


def command_for(command: str | None = None) -> TyperGroup:
    """The command group of `register(command)`, built once per set of registered commands.

    typer builds a command from each function's signature and type hints, some 30 ms for
    every command at once; a process that runs the command line more than once (a test
    suite, a program calling `convergent.cli.main`) builds it again only when a module has
    added commands since.
    """
    registered = register(command)
    key = (len(registered.registered_commands), len(registered.registered_groups))
    if key not in _built:
        _built[key] = typer.main.get_group(registered)
    return _built[key]


hide_flag_types()
name_arguments_plainly()
