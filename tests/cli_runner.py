"""The ``convergent`` command line run in this process, the way the console script runs it.

`invoke` calls the console script's entry point (`convergent.cli.main`) under typer's
`CliRunner` isolation: standard input, output and error are captured, the exit code is
the one the process would end with, and the working folder is changed for the call.
It answers like `subprocess.run`, so a test can switch between the two. Commands that
start Temporal end their process at once (`convergent.cli._exit`) and must run in a
subprocess.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from convergent.cli import main


@dataclass(frozen=True)
class Ran:
    """What one command left behind."""

    args: tuple[str, ...]
    """The command line, without the program name."""
    returncode: int
    """The exit code the process would have ended with."""
    stdout: str
    """Everything written to standard output."""
    stderr: str
    """Everything written to standard error."""


def invoke(*args: str, cwd: Path | None = None, stdin: str | None = None) -> Ran:
    """Run ``convergent ARGS`` in this process, in ``cwd``, reading ``stdin``."""
    runner = CliRunner()
    before = Path.cwd()
    with runner.isolation(input=stdin) as (out, err, _):
        try:
            if cwd is not None:
                os.chdir(cwd)
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            os.chdir(before)
            sys.stdout.flush()
            sys.stderr.flush()
        return Ran(args, code, out.getvalue().decode(), err.getvalue().decode())
