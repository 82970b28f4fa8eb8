"""The ``convergent`` command line.

Each command group lives in its own module; this module assembles them and turns
caller mistakes into a one-line message and a non-zero exit instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from convergent.exceptions import ConvergentError

__all__ = ["app", "main"]

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
    for module in ("run", "coordinator", "hook", "synthesize", "runs", "bench", "worker", "ui"):
        importlib.import_module(f"convergent.cli.{module}")


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: run the app, map user errors to exit code 2."""
    from convergent.cli._exit import leave

    try:
        _run(argv)
    except SystemExit as exc:
        leave(exc.code if isinstance(exc.code, int) else 1)


def _run(argv: list[str] | None) -> None:
    try:
        from convergent.cli._gate import expand_gate_flag

        args = expand_gate_flag(sys.argv[1:] if argv is None else argv)
        app(args=args, standalone_mode=True)
    except ConvergentError as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
