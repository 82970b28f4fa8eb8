"""A third-party MCP server in an environment of its own, built once and kept.

`sqlite_server()` gives the ``mcp-server-sqlite`` command of PyPI's package, installed
with the MCP SDK 1.x it was written for (beside the SDK 2.x of the ``mcp`` extra it
fails to start) in a virtual environment of its own: ``python -m venv``, then ``pip
install`` from the package index this machine's pip uses. The environment is kept in
the user's cache folder, one per version of the server and of Python, so it is built
once; ``.ci/run`` builds it before the tests (``python tests/mcp/own_env.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

SERVER = "mcp-server-sqlite==2025.4.25"
"""The server, pinned."""
SDK = "mcp<2"
"""The MCP SDK it was written for."""


def cache() -> Path:
    """Where the environment is kept (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "convergent-tests"


def environment() -> Path:
    """The server's environment: this Python's version and the server's in its name."""
    version = SERVER.split("==")[1]
    return cache() / f"mcp-server-sqlite-{version}-py{sys.version_info[0]}{sys.version_info[1]}"


def site_packages(folder: Path) -> Path:
    """The environment's ``site-packages`` folder."""
    return folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def sqlite_server() -> Path:
    """The server's command, in its environment (built and kept on first use).

    Raises:
        RuntimeError: If the environment cannot be built (no package index, say).
    """
    folder = environment()
    command = folder / "bin" / "mcp-server-sqlite"
    ready = folder / "ready"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock", timeout=900):  # one builder among the test workers
        if ready.exists() and command.exists():
            return command
        shutil.rmtree(folder, ignore_errors=True)
        steps = (
            [sys.executable, "-m", "venv", str(folder)],
            [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", SERVER, SDK],
        )  # fmt: skip
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900, check=False)
            if done.returncode != 0:
                shutil.rmtree(folder, ignore_errors=True)
                raise RuntimeError(
                    f"could not build the environment of {SERVER}: {' '.join(step[:4])} "
                    f"failed: {done.stderr.strip()[-500:]}"
                )
        ready.write_text(f"{SERVER} {SDK}\n")
    return command


if __name__ == "__main__":
    print(sqlite_server())
