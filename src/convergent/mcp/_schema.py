"""Checking a call's arguments against an MCP server's input schema, within bounds (machinery).

The schema comes from the server, so it is input from outside, and the check runs in
the agent's process: it is `convergent._bounded_schema.BoundedValidator`'s (RE2 for
patterns, references only within the schema, a nesting limit, a budget of steps and
of `CHECK_BUDGET` seconds). Arguments it cannot check within those bounds, and
arguments under a schema that is itself invalid, go to the server, which checks its
own schema.
"""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import SchemaError

from convergent._bounded_schema import BoundedValidator, Budget, Unchecked, shown_error
from convergent.exceptions import ToolArgumentsError

__all__ = ["CHECK_BUDGET", "CHECK_STEPS", "ArgumentCheck"]

CHECK_BUDGET = 1.0
"""Seconds one check of a call's arguments may take before it is given up."""

CHECK_STEPS = 1_000_000
"""Keyword evaluations one check of a call's arguments may make before it is given up."""


class ArgumentCheck:
    """Checks one tool's arguments against its schema; thread-safe, so it may run off the loop.

    Args:
        tool_name: The tool's name, for messages.
        schema: Its input schema.
    """

    def __init__(self, tool_name: str, schema: dict[str, Any]) -> None:
        self.tool_name = tool_name
        try:
            self._validator: BoundedValidator | None = BoundedValidator(
                schema, Budget(CHECK_STEPS, seconds=CHECK_BUDGET)
            )
        except SchemaError:
            self._validator = None  # the server's own schema is broken: let it judge the call

    def __call__(self, arguments: dict[str, Any]) -> None:
        """Raise `ToolArgumentsError` if ``arguments`` break the schema.

        Returns without a verdict when the schema cannot be checked here (see above).
        """
        if self._validator is None:
            return
        try:
            errors = self._validator.errors(arguments)
        except Unchecked:
            return
        if errors:
            problems = "; ".join(shown_error(error, "arguments") for error in errors[:3])
            raise ToolArgumentsError(f"invalid arguments for {self.tool_name}: {problems}")
