"""Running a benchmark's plan under other trees of convergent's sources, to compare them.

A benchmark with ``--source LABEL=SRC`` (repeatable) runs its plan once per source, each
in a child process whose ``convergent`` is imported from ``SRC`` (``--worker`` makes the
child print its runs as JSON); without one, it runs in this process, as ``installed``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["add_source_arguments", "runs_by_source"]

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """``--source LABEL=SRC``, ``--json`` and the hidden ``--worker``."""
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="LABEL=SRC",
        help="run under the convergent sources in SRC (repeat to compare)",
    )
    parser.add_argument("--json", action="store_true", help="print every run as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


def runs_by_source(
    name: str,
    sources: Sequence[str],
    child_argv: Sequence[str],
    run_here: Callable[[], list[T]],
    load: Callable[[dict[str, Any]], T],
) -> dict[str, list[T]] | None:
    """Each source's runs by its label (``installed`` without any); None for a bad one.

    Args:
        name: The benchmark's module, ``benchmarks.NAME``.
        sources: The ``--source`` values.
        child_argv: The arguments that make a child run the same plan.
        run_here: Runs the plan in this process.
        load: One run from the JSON a child printed.
    """
    runs: dict[str, list[T]] = {}
    if not sources:
        runs["installed"] = run_here()
    for spec in sources:
        label, sep, src = spec.partition("=")
        if not sep or not Path(src).is_dir():
            print(f"{name}: --source {spec!r}: expected LABEL=SRC", file=sys.stderr)
            return None
        folder = Path(src).resolve()
        print(f"{label}: convergent from {folder}", file=sys.stderr, flush=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(ROOT)]))
        done = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{name}", *child_argv, "--worker"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{name}: the runs under {folder} failed")
        runs[label] = [load(row) for row in json.loads(done.stdout)]
    return runs
