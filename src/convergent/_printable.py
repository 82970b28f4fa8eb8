r"""Text from models, tools and servers made safe to print on a terminal.

A model's reply, a tool's result or an MCP server's description may hold terminal
control sequences: ``ESC ] 52`` writes the clipboard, ``ESC ] 0`` sets the window
title, ``ESC [ 2 J`` clears the screen, and bidirectional overrides reorder what the
reader sees. Printed as they are, they act on the user's terminal. `printable`
shows every such character as a visible escape (``\x1b``, ``\u202e``) instead, so the
text reads the same and does nothing; line breaks and tabs stay.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1 (CSI, OSC, ...)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks and overrides
    "\u2028\u2029]"  # line and paragraph separators (a terminal's own line breaks only)
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character shown as an escape, never sent raw.

    Args:
        text: What a model, a tool or a server wrote.
        one_line: Also fold line breaks and tabs into single spaces (for tables).
    """
    if one_line:
        text = " ".join(text.split())
    if text.isprintable() or not _CONTROL.search(text):
        return text
    return _CONTROL.sub(_visible, text)
