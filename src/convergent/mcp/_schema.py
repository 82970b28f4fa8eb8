"""Checking a call's arguments against an MCP server's input schema, within bounds (machinery).

The schema comes from the server, so it is input from outside, and the check runs in
the agent's process. Three things keep it bounded:

- Regular expressions (``pattern``, ``patternProperties`` and the names
  ``additionalProperties`` compares with them) run on RE2, whose time grows linearly
  with the text: ``^(a+)+$`` cannot hold the process for minutes as it does with
  Python's backtracking engine. A pattern RE2 does not support (a backreference,
  lookaround) is not checked here.
- ``$ref`` resolves only within the schema itself (and the JSON Schema metaschemas);
  a remote or ``file:`` reference is never fetched, so a server cannot make this
  machine read its files or reach its network. A schema that needs one is not checked
  here.
- The whole check has a time budget, counted at every keyword, so a schema whose
  alternatives multiply (``anyOf`` over ``anyOf`` through ``$ref``) ends too; past the
  budget the arguments are not checked here.

Arguments that are not checked here go to the server, which checks its own schema.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import re2
from jsonschema import validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import Unresolvable

from convergent.exceptions import ConvergentError, ToolArgumentsError

__all__ = ["CHECK_BUDGET", "ArgumentCheck"]

CHECK_BUDGET = 1.0
"""Seconds one check of a call's arguments may take before it is given up."""

Keyword = Callable[[Any, Any, Any, dict[str, Any]], Iterator[ValidationError]]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an unsupported pattern is a result here, not a line on stderr
_DEADLINE: ContextVar[float] = ContextVar("convergent_mcp_check_deadline", default=0.0)
_MAX_SHOWN = 200


class _OutOfTime(ConvergentError):
    """The check used up its budget."""


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error:
        return None


def _matches(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` finds a match in ``text``; None if RE2 cannot run the pattern."""
    compiled = _compiled(pattern)
    return None if compiled is None else compiled.search(text) is not None


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and _matches(pattern, instance) is False:
        yield ValidationError(f"{_shown(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _matches(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _extra_names(instance: dict[str, Any], schema: dict[str, Any]) -> list[str] | None:
    """Names neither listed in ``properties`` nor matched by a pattern; None if unknowable."""
    listed = schema.get("properties", {})
    extras = []
    for name in instance:
        if name in listed:
            continue
        found = [_matches(pattern, name) for pattern in schema["patternProperties"]]
        if None in found:
            return None
        if not any(found):
            extras.append(name)
    return extras


def _additional_properties(original: Keyword) -> Keyword:
    def keyword(
        validator: Any, allowed: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        if "patternProperties" not in schema:  # no pattern to run: the original is safe
            yield from original(validator, allowed, instance, schema)
            return
        if not validator.is_type(instance, "object"):
            return
        extras = _extra_names(instance, schema)
        if extras is None:
            return
        if validator.is_type(allowed, "object"):
            for name in extras:
                yield from validator.descend(instance[name], allowed, path=name)
        elif not allowed and extras:
            names = ", ".join(repr(name) for name in sorted(extras))
            yield ValidationError(f"{names} not allowed (matched by no property or pattern)")

    return keyword


def _skipped(
    validator: Any, value: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """A keyword not checked here (the server checks it)."""
    return iter(())


def _budgeted(keyword: Keyword) -> Keyword:
    def counted(
        validator: Any, value: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        if time.monotonic() > _DEADLINE.get():
            raise _OutOfTime
        yield from keyword(validator, value, instance, schema)

    return counted


def _has_key(schema: Any, key: str) -> bool:
    """Whether ``key`` is a keyword anywhere in ``schema`` (walked without recursion)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if key in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _clipped(text: str, limit: int = _MAX_SHOWN) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def _shown(value: Any) -> str:
    return _clipped(repr(value))


def _validator(schema: dict[str, Any]) -> Any:
    """A validator of ``schema`` with the bounds above; None if the schema is not valid."""
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None  # the server's own schema is broken: let the server judge the call
    keywords: dict[str, Keyword] = dict(cls.VALIDATORS)
    keywords["pattern"] = _pattern
    keywords["patternProperties"] = _pattern_properties
    if "additionalProperties" in keywords:
        keywords["additionalProperties"] = _additional_properties(keywords["additionalProperties"])
    if "unevaluatedProperties" in keywords and _has_key(schema, "patternProperties"):
        # which names a pattern evaluated is worked out with Python's engine there
        keywords["unevaluatedProperties"] = _skipped
    bounded = validators.extend(cls, {name: _budgeted(check) for name, check in keywords.items()})
    # an empty registry: references resolve within the schema, nothing is retrieved
    return bounded(schema, registry=Registry())


class ArgumentCheck:
    """Checks one tool's arguments against its schema; thread-safe, so it may run off the loop.

    Args:
        tool_name: The tool's name, for messages.
        schema: Its input schema.
    """

    def __init__(self, tool_name: str, schema: dict[str, Any]) -> None:
        self.tool_name = tool_name
        self._validator = _validator(schema)

    def __call__(self, arguments: dict[str, Any], budget: float = CHECK_BUDGET) -> None:
        """Raise `ToolArgumentsError` if ``arguments`` break the schema.

        Returns without a verdict when the schema cannot be checked here (see above).
        """
        if self._validator is None:
            return
        _DEADLINE.set(time.monotonic() + budget)
        try:
            errors = sorted(
                self._validator.iter_errors(arguments), key=lambda e: list(e.absolute_path)
            )
        except (_OutOfTime, Unresolvable, RecursionError):
            return
        if errors:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error.absolute_path) or 'arguments'}: "
                + _clipped(error.message, 2 * _MAX_SHOWN)
                for error in errors[:3]
            )
            raise ToolArgumentsError(f"invalid arguments for {self.tool_name}: {problems}")
