"""The ``convergent`` command line.

Each command group lives in its own module; this module assembles them and turns
caller mistakes into a one-line message and a non-zero exit instead of a traceback.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import NoReturn

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
    for module in ("run", "coordinator", "hook", "synthesize", "runs", "bench", "worker"):
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
    from convergent.cli._gate import expand_gate_flag

    args = expand_gate_flag(sys.argv[1:] if argv is None else argv)
    json_output = "--json" in args
    try:
        result = app(args=args, standalone_mode=False)
    except typer.TyperException as exc:  # a usage mistake, shown the way typer shows it
        if json_output:
            _print_error(exc.format_message(), exc.exit_code)
        _show_usage_error(exc)
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        _fail("aborted", 1, json_output)
    except ConvergentError as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _fail(message, 2, json_output)
    except KeyboardInterrupt:
        _fail("interrupted", 130, json_output)
    raise SystemExit(result if isinstance(result, int) else 0)


def _fail(message: str, code: int, json_output: bool) -> NoReturn:
    """One line on stderr and, under ``--json``, one ``{"error": ...}`` object on stdout."""
    print(f"error: {message}", file=sys.stderr)
    if json_output:
        _print_error(message, code)
    raise SystemExit(code) from None


def _print_error(message: str, code: int) -> None:
    line = " ".join(message.split())
    print(json.dumps({"error": line, "exit_code": code}), flush=True)


def _show_usage_error(exc: typer.TyperException) -> None:
    from typer import rich_utils

    show = getattr(exc, "show", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and show is not None:
        show()
    else:
        rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
