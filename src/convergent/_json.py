"""Parsing JSON from outside: files, stdin, providers and models.

Malformed or hostile input is a result with a short reason, never a crash.
"""

from __future__ import annotations

import json
from typing import Any

from convergent.exceptions import ConvergentError

__all__ = ["UnusableJson", "load_json", "unusable_reason"]


class UnusableJson(ConvergentError, ValueError):
    """Text that is not JSON, or JSON nested deeper than the parser can follow.

    Not a `UserError`: the text may come from a provider or a model as well as from a
    person, so each caller turns it into its own layer's error. It stays a `ValueError`
    for the callers that read a model's reply and catch that.
    """


def unusable_reason(exc: BaseException) -> str:
    """Say in a few words why a JSON document could not be read (``not valid JSON (...)``)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    return f"not valid JSON ({exc})"


def load_json(text: str | bytes) -> Any:
    """`json.loads` that raises only `UnusableJson`, also for too deeply nested input.

    Raises:
        UnusableJson: The text is not JSON or is nested too deeply; its message is the
            reason, to follow "... is".
    """
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UnusableJson(unusable_reason(exc)) from None
