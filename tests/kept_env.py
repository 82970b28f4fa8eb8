"""Virtual environments the slow tests run third-party packages in, built once and kept.

Some packages cannot sit beside the test suite's own: PyPI's ``mcp-server-sqlite`` and
``langchain-mcp-adapters`` need the MCP SDK 1.x, where the ``mcp`` extra installs 2.x.
`kept_environment` builds one with ``python -m venv`` and ``pip install`` from the
package index this machine's pip uses, keeps it in the user's cache folder under a name
that says this Python's version and what it holds, and builds it only once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock


def cache() -> Path:
    """Where the environments are kept (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "convergent-tests"


def site_packages(folder: Path) -> Path:
    """An environment's ``site-packages`` folder."""
    return folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def kept_environment(name: str, installs: Sequence[Sequence[str]]) -> Path:
    """The folder of the environment ``name``, built with each of ``installs`` in turn.

    Each item of ``installs`` is the arguments of one ``pip install`` (requirements,
    ``-r FILE``, ``--no-deps``...). A change to them builds a new environment.

    Raises:
        RuntimeError: If the environment cannot be built (no package index, say).
    """
    digest = hashlib.sha256(repr([list(step) for step in installs]).encode()).hexdigest()[:10]
    folder = cache() / f"{name}-py{sys.version_info[0]}{sys.version_info[1]}-{digest}"
    ready = folder / "ready"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock", timeout=900):  # one builder among the test workers
        if ready.exists():
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        steps = [[sys.executable, "-m", "venv", str(folder)]] + [
            [*pip, "--disable-pip-version-check", *step] for step in installs
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900, check=False)
            if done.returncode != 0:
                shutil.rmtree(folder, ignore_errors=True)
                raise RuntimeError(
                    f"could not build the environment {name}: {' '.join(step[:6])} "
                    f"failed: {done.stderr.strip()[-500:]}"
                )
        ready.write_text("\n".join(" ".join(step) for step in installs) + "\n")
    return folder
