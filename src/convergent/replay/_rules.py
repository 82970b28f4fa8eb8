"""Which rule of the policy ended a turn: the setting a reader can look up and change.

The loop's result says why it stopped (`StopReason`) and how, in words; the rule is the
setting behind those words (``max_repeated_calls`` for a call repeated with the same
result, ``max_cycle_length`` for a cycle of calls, ``max_failing_steps`` for a failure
streak...), the name ``--set`` and ``--calibrate`` use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["rule_of"]

_LIMIT = re.compile(r"\b(max_[a-z_]+)=")
_STALLED = (
    ("calls the run cannot make", "max_mistakes"),
    ("was rejected", "max_rejected_answers"),
    ("the cycle of", "max_cycle_length"),
)
_TOOL_ERROR = (
    ("each repeating a failed call", "max_repeated_failures"),
    ("steps in a row", "max_failing_steps"),
)


def rule_of(reason: str, detail: str, settings: Mapping[str, Any] | None = None) -> str:
    """The setting whose rule gave this stop (``""`` for a stop no setting gives)."""
    if reason == "stalled":
        found = next((rule for words, rule in _STALLED if words in detail), None)
        return found or "max_repeated_calls"
    if reason == "tool_error":
        found = next((rule for words, rule in _TOOL_ERROR if words in detail), None)
        if found is not None:
            return found
        given = settings or {}
        if given.get("on_tool_error") == "stop":
            return "on_tool_error"
        # a streak limit of 1 stops at the first failure, in these words
        return (
            "max_failing_steps" if given.get("max_failing_steps") == 1 else "max_repeated_failures"
        )
    if reason == "model_error" and "times in a row" in detail:
        return "max_continuations"
    if reason in ("max_cycles", "budget_exhausted"):
        limit = _LIMIT.search(detail)
        return limit.group(1) if limit else reason
    return ""
