"""The ``convergent`` command line.

Each command group lives in its own module and adds itself to the app in `_app`; this
module runs it and turns caller mistakes into a one-line message and a non-zero exit
instead of a traceback. The Claude Code hook takes a shorter path that loads neither
typer nor the agent stack, because it runs at every stop of an agent.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from convergent.exceptions import ConvergentError

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":
        from convergent.cli._app import register

        return register()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: run the app, map user errors to exit code 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    from convergent.cli._hook_entry import hook_event

    event = hook_event(args)
    if event is not None:
        from convergent.cli._exit import leave_now
        from convergent.cli._hook_entry import run_hook

        leave_now(run_hook(event, args[2:]))
    from convergent.cli._exit import leave

    try:
        _run(args)
    except SystemExit as exc:
        leave(exc.code if isinstance(exc.code, int) else 1)


def _run(argv: list[str]) -> None:
    import typer

    from convergent.cli._app import command_for

    args = argv
    if "--gate" in args:  # the gate package is loaded only by commands that take it
        from convergent.cli._gate import expand_gate_flag

        args = expand_gate_flag(args)
    command = command_for(args[0] if args and not args[0].startswith("-") else None)
    # tools named package.module:attribute import from the current folder, as they would
    # under `python -m convergent`; appended, so the folder never shadows an installed module
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    json_output = "--json" in args
    try:
        result = command.main(args=args, standalone_mode=False)
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
    """Print a usage mistake the way typer's standalone mode does."""
    from typer import rich_utils

    show = getattr(exc, "show", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and show is not None:
        show()
    else:
        rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
