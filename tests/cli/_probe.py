"""A fresh process that reports what it imported: the ``convergent`` command line, or an import."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_PROBE = """
import json, os, sys
def exit_now(code):  # a command that ends its process at once: report first
    raise SystemExit(code)
os._exit = exit_now
from convergent.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(sys.modules)}), file=sys.stderr)
"""


@dataclass(frozen=True)
class Probed:
    """What one command did, and every module its process had imported at the end."""

    code: int
    """The exit code."""
    stdout: str
    """Everything written to standard output."""
    loaded: frozenset[str]
    """The names in ``sys.modules`` once the command ended."""


def probe(folder: Path, *args: str, stdin: str = "") -> Probed:
    """Run ``convergent ARGS`` in ``folder`` in a fresh interpreter, reading ``stdin``."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=folder,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return Probed(report["code"], done.stdout, frozenset(report["loaded"]))


def printed_by(code: str) -> str:
    """What ``code`` printed, run by a fresh interpreter (which must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def imported_by(statement: str) -> frozenset[str]:
    """The names in ``sys.modules`` of a fresh interpreter after ``statement`` ran."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    return frozenset(json.loads(printed_by(code)))
