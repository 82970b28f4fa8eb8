"""What Claude Code itself does that convergent's hooks and adapter must account for.

Claude Code delivers only so many stop-hook blocks in a row; past its cap it ends the
agent's turn whatever the hook answers. The coordinator's hook and the Claude Agent SDK
adapter both count their blocks against it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["BLOCK_CAP_VARIABLE", "CLAUDE_CODE_BLOCK_CAP", "claude_code_block_cap"]

BLOCK_CAP_VARIABLE = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
"""Claude Code's setting for how many stop-hook blocks in a row it delivers."""

CLAUDE_CODE_BLOCK_CAP = 8
"""Claude Code's cap when `BLOCK_CAP_VARIABLE` is unset or not a number."""


def claude_code_block_cap(environ: Mapping[str, str]) -> int | None:
    """How many stop-hook blocks in a row Claude Code delivers; None when it has no cap.

    Read as Claude Code reads `BLOCK_CAP_VARIABLE`: the leading integer of the value
    (``"12"``, ``" 12"``, ``"12.5"`` all give 12), `CLAUDE_CODE_BLOCK_CAP` when there is
    none, and no cap at all for zero or a negative number. Past its cap Claude Code ends
    the turn whatever the hook answers.
    """
    match = re.match(r"\s*([+-]?\d+)", environ.get(BLOCK_CAP_VARIABLE, ""))
    if match is None:
        return CLAUDE_CODE_BLOCK_CAP
    cap = int(match.group(1))
    return cap if cap > 0 else None
