"""Options checked by the spec they fill: one line that names the option, never a traceback.

The command line does not check the numbers and choices an `AgentSpec` (or `Limits`)
checks: it builds the spec, and a `ValidationError` becomes one `UserError` here, with
the field called by its option's name (``--max-cycles must be >= 0, got -1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from convergent._validation import problem
from convergent.exceptions import UserError
from convergent.policy import POLICY_RULES

__all__ = ["LIMIT_OPTIONS", "SPEC_OPTIONS", "checked"]

T = TypeVar("T")

LIMIT_OPTIONS = {
    "max_cycles": "--max-cycles",
    "max_total_tokens": "--max-tokens",
    "max_seconds": "--max-seconds",
    "max_cost": "--max-cost",
    "max_tool_calls": "--max-tool-calls",
    "max_calls_per_tool": "--max-calls-per-tool",
    "on_max_tool_calls": "--on-max-tool-calls",
    "on_max_calls_per_tool": "--on-max-calls-per-tool",
}
"""The options of `Limits`' fields, by field."""

SPEC_OPTIONS = {
    "model": "--model",
    "base_url": "--base-url",
    "price": "--price",
    "protocol": "--protocol",
    "temperature": "--temperature",
    "system_prompt": "--system",
    "workspace": "--workspace",
    "skills": "--skills",
    "gate.threshold": "--gate",
    "gate.model": "--gate-model",
    "ask_via": "--ask-via",
    "ask_timeout": "--ask-timeout",
    "output_schema": "--output-schema",
    **{f"limits.{field}": option for field, option in LIMIT_OPTIONS.items()},
    **{f"policy.{rule}": f"--policy {rule}" for rule in POLICY_RULES},
    "policy.on_tool_error": "--tool-error",
    "policy.max_repeated_failures": "--max-tool-errors",
}
"""The options of `AgentSpec`'s fields, by dotted path."""


def checked(kind: type[T], values: Mapping[str, Any], options: Mapping[str, str]) -> T:
    """``values`` validated as a ``kind`` (`AgentSpec`, `Limits`).

    Args:
        kind: What to build.
        values: Its fields, from the options.
        options: The option of each field, by dotted path, for the message.

    Raises:
        UserError: For the first bad value, naming its option.
    """
    try:
        return TypeAdapter(kind).validate_python(values)
    except ValidationError as exc:
        raise UserError(problem(exc, options)) from None
