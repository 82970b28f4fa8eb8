"""A third-party MCP server in an environment of its own, built once and kept.

`sqlite_server()` gives the ``mcp-server-sqlite`` command of PyPI's package, installed
with the MCP SDK 1.x it was written for (beside the SDK 2.x of the ``mcp`` extra it
fails to start) in an environment of its own (`kept_env.kept_environment`);
``scripts/test --all`` builds it before the tests (``python tests/mcp/own_env.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: tests/

from kept_env import kept_environment, site_packages

__all__ = ["SDK", "SERVER", "site_packages", "sqlite_server"]

SERVER = "mcp-server-sqlite==2025.4.25"
"""The server, pinned."""
SDK = "mcp<2"
"""The MCP SDK it was written for."""


def sqlite_server() -> Path:
    """The server's command, in its environment (built and kept on first use).

    Raises:
        RuntimeError: If the environment cannot be built (no package index, say).
    """
    return kept_environment("mcp-server-sqlite", [[SERVER, SDK]]) / "bin" / "mcp-server-sqlite"


if __name__ == "__main__":
    print(sqlite_server())
