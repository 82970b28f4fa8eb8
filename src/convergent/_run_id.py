"""The one rule for run ids, shared by the store, the command line, the console and `resume`.

A run id names files (the console's resume logs), addresses (``/runs/ID``) and command
lines (``convergent resume ID``), so it may hold only characters that are safe in all
three: letters, digits, ``.``, ``_`` and ``-``, starting with a letter or a digit (a
leading ``-`` would read as an option), at most `MAX_RUN_ID` characters (a file name
has room for it and a date).
"""

from __future__ import annotations

import hashlib
import re

from convergent.exceptions import UserError

__all__ = ["MAX_RUN_ID", "RUN_ID_RULE", "check_run_id", "child_run_id"]

MAX_RUN_ID = 128
"""Longest run id accepted."""
RUN_ID_RULE = f"1-{MAX_RUN_ID} letters, digits, '.', '_' or '-', starting with a letter or digit"
"""The rule in words, as error messages state it."""
_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_RUN_ID - 1}}}")
_PLAIN_CALL_ID = re.compile(r"[A-Za-z0-9_-]+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
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


def child_run_id(parent_run_id: str, cycle: int, call_id: str) -> str:
    """The id of the child run a call starts: ``PARENT.CYCLE.CALL``.

    The same call always names the same child, so a resumed parent finds it, and two
    calls never name one child, whatever their ids: a call id with characters a run id
    cannot hold (or none) has them replaced and a digest of the whole id added, after a
    ``.`` that no plain call id contains (``call/1`` and ``call-1`` name two children).
    An id too long for the rule ends in a digest instead.
    """
    if _PLAIN_CALL_ID.fullmatch(call_id):
        call = call_id
    else:
        call = f"{_UNSAFE.sub('-', call_id)}.{_digest(call_id, 16)}"
    made = f"{parent_run_id}.{cycle}.{call}"
    if len(made) <= MAX_RUN_ID:
        return made
    digest = _digest(made, 24)
    return f"{made[: MAX_RUN_ID - len(digest) - 1]}.{digest}"


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]
