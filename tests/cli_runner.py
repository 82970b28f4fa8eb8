"""The ``convergent`` command line run in this process, the way the console script runs it.

`invoke` calls the console script's entry point (`convergent.cli.main`) under typer's
`CliRunner` isolation: standard input, output and error are captured, the exit code is
the one the process would end with, and the working folder is changed for the call.
It answers like `subprocess.run`, so a test can switch between the two. A test of the
console script itself, of a real standard input (a file descriptor, not a stream in
memory) or of a command that starts Temporal (its process ends at once, see
`convergent.cli._exit`) runs the installed script with `console_script` instead.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
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


def invoke(
    *args: str,
    cwd: Path | None = None,
    stdin: str | None = None,
    env: Mapping[str, str | None] | None = None,
) -> Ran:
    """Run ``convergent ARGS`` in this process, in ``cwd``, reading ``stdin``.

    ``env`` changes environment variables for the call (None removes one).
    """
    runner = CliRunner()
    before = Path.cwd()
    with runner.isolation(input=stdin, env=env) as (out, err, _):
        try:
            if cwd is not None:
                os.chdir(cwd)
            code = _exit_code(list(args))
        finally:
            os.chdir(before)
            sys.stdout.flush()
            sys.stderr.flush()
        return Ran(args, code, out.getvalue().decode(), err.getvalue().decode())


def _exit_code(args: list[str]) -> int:
    """Run the entry point; from an async test, in a thread, as the CLI runs its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _main(args)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_main, args).result()


def _main(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return 0


EXE = shutil.which("convergent") or str(Path(sys.executable).with_name("convergent"))
"""The installed console script."""


def console_script(
    *args: str, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``convergent ARGS`` in a process of its own."""
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False, input=stdin
    )
