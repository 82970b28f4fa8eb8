"""The likely cause of a server that failed to start, from its last words (machinery).

A stdio server that dies at start-up leaves its last line on standard error; some
lines tell why clearly enough to say what to do. The most common: a server written for
the MCP SDK 1.x started with the SDK 2.x installed beside it (``AttributeError:
'Server' object has no attribute 'list_resources'``), which works when the server runs
from an environment of its own.
"""

from __future__ import annotations

import re

__all__ = ["likely_cause"]

OWN_ENVIRONMENT = (
    "run it from an environment of its own (uvx, pipx run, or another venv; see docs/mcp.md)"
)
"""What to do about a server whose packages do not match the environment it runs in."""

_MISSING = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_SDK_MISMATCH = re.compile(
    r"(AttributeError|ImportError|TypeError)\b.*\b(Server|mcp|FastMCP|ClientSession|"
    r"cannot import name|unexpected keyword)",
)


def likely_cause(last_output: str, reason: str) -> str:
    """The likely cause of a failed start, as words to add to its error; empty if unknown.

    Args:
        last_output: The last line the server wrote to its standard error.
        reason: Why the start failed, as `convergent.mcp._connection` says it.
    """
    missing = _MISSING.search(last_output)
    if missing is not None:
        return (
            f"a package it needs ({missing.group(1)}) is missing where it runs: {OWN_ENVIRONMENT}"
        )
    if _SDK_MISMATCH.search(last_output):
        return (
            "it was written for another version of the MCP SDK than the one it runs with: "
            f"{OWN_ENVIRONMENT}"
        )
    if last_output.startswith("SyntaxError"):
        return "it needs a newer Python than the one it runs with"
    if reason.startswith("no answer within"):
        return (
            "it is still starting (uvx and pipx install it on first use: give it a longer "
            "startup_timeout), or it does not speak MCP on its standard output"
        )
    return ""
