"""The one rule for run ids, shared by the store, the command line, the console and `resume`.

A run id names files (the console's resume logs), addresses (``/runs/ID``) and command
lines (``convergent resume ID``), so it may hold only characters that are safe in all
three: letters, digits, ``.``, ``_`` and ``-``, starting with a letter or a digit (a
leading ``-`` would read as an option), at most `MAX_RUN_ID` characters (a file name
has room for it and a date).
"""

from __future__ import annotations

import re

from convergent.exceptions import UserError

__all__ = ["MAX_RUN_ID", "RUN_ID_RULE", "check_run_id"]

MAX_RUN_ID = 128
"""Longest run id accepted."""
RUN_ID_RULE = f"1-{MAX_RUN_ID} letters, digits, '.', '_' or '-', starting with a letter or digit"
"""The rule in words, as error messages state it."""
_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_RUN_ID - 1}}}")
_SHOWN = 40


def check_run_id(run_id: object, *, name: str = "run id") -> str:
    """Return ``run_id`` if it follows the rule (see the module).

    Args:
        run_id: The id to check.
        name: What the message calls it (``--run-id`` on the command line).

    Raises:
        UserError: One line naming the id (shortened when long) and the rule.
    """
    if isinstance(run_id, str) and _PATTERN.fullmatch(run_id):
        return run_id
    if isinstance(run_id, str):
        given = repr(run_id)
        if len(run_id) > _SHOWN:
            given = f"{run_id[:_SHOWN]!r}… ({len(run_id)} characters)"
    else:
        given = f"a {type(run_id).__name__}"
    raise UserError(f"{name} must be {RUN_ID_RULE}, got {given}")
