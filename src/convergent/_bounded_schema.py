"""JSON Schema checks of data from outside, within bounds (machinery).

A schema and the data it checks may both come from outside the process: an MCP
server's input schema and a model's arguments, an agent's output schema and a model's
answer. `BoundedValidator` is the one validator for both, and these bounds hold:

- Regular expressions (``pattern``, ``patternProperties`` and the names
  ``additionalProperties`` compares with them) run on RE2, whose time grows linearly
  with the text: ``^(a+)+$`` cannot hold the process for minutes as it does with
  Python's backtracking engine. A pattern RE2 does not support (a backreference,
  lookaround) is not checked (`unsupported_patterns` lists them).
- ``$ref`` resolves only within the schema itself (and the JSON Schema metaschemas);
  a remote or ``file:`` reference is never fetched, so a schema cannot make this
  machine read its files or reach its network.
- Data nested deeper than `MAX_DEPTH` levels is not walked (a deep walk would exhaust
  the interpreter's stack).
- The check has a budget, counted at every keyword: a number of steps, and optionally
  seconds, so that a schema whose alternatives multiply (``anyOf`` over ``anyOf``
  through ``$ref``) ends, in time and in memory. Steps alone give the same verdict on
  every machine and every replay (a Temporal workflow checks typed output).

Past any bound the check ends with `Unchecked`, whose reason says which; each caller
decides what an unchecked value means (an MCP server checks its own arguments; a typed
answer that cannot be checked is not accepted).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2
from jsonschema import validators
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012

from convergent.exceptions import ConvergentError

__all__ = [
    "MAX_DEPTH",
    "BoundedValidator",
    "Budget",
    "Unchecked",
    "foreign_references",
    "shown_error",
    "unsupported_patterns",
]

MAX_DEPTH = 100
"""Levels of nesting a checked value may have (arrays and objects)."""

Keyword = Callable[[Any, Any, Any, dict[str, Any]], Iterator[ValidationError]]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an unsupported pattern is a result here, not a line on stderr
_MAX_SHOWN = 200


class Unchecked(ConvergentError):
    """The value could not be checked within the bounds; the message says why."""


@dataclass(frozen=True, slots=True)
class Budget:
    """How much one check may do: steps, and optionally seconds.

    A step is one keyword evaluated, or one error it makes.
    """

    steps: int
    """Steps for any value."""
    steps_per_item: int = 0
    """More steps for each array and object the value holds (a big value takes longer)."""
    seconds: float | None = None
    """Wall time (None: steps only, which gives the same verdict on every replay)."""

    def for_value(self, items: int) -> int:
        """The steps a value with ``items`` arrays and objects may take."""
        return self.steps + self.steps_per_item * items


class _Spending:
    """What is left of one check's budget."""

    __slots__ = ("deadline", "left")

    def __init__(self, steps: int, seconds: float | None) -> None:
        self.left = steps
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _OutOfSteps
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _OutOfTime


class _OutOfSteps(Unchecked):
    """The check used up its steps."""


class _OutOfTime(Unchecked):
    """The check used up its seconds."""


_SPENDING: ContextVar[_Spending | None] = ContextVar("convergent_schema_budget", default=None)


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
    """A keyword not checked here (which names a pattern evaluated is Python's work)."""
    return iter(())


def _budgeted(keyword: Keyword) -> Keyword:
    def counted(
        validator: Any, value: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        spending = _SPENDING.get()
        if spending is None:
            yield from keyword(validator, value, instance, schema)
            return
        spending.spend()
        for error in keyword(validator, value, instance, schema):
            spending.spend()  # errors cost too: alternatives that multiply make many
            yield error

    return counted


def _walk(value: Any) -> Iterator[Any]:
    """Every dict and list in ``value``, walked without recursion."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            yield node
            stack.extend(node)


def _has_key(schema: Any, key: str) -> bool:
    """Whether ``key`` is a keyword anywhere in ``schema``."""
    return any(isinstance(node, dict) and key in node for node in _walk(schema))


def _shape(value: Any, limit: int = MAX_DEPTH) -> tuple[int, int]:
    """How deeply ``value`` nests (counted up to ``limit + 1``) and its arrays and objects."""
    deepest = items = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list) and level <= limit:
            items += 1
            deepest = max(deepest, level + 1)
            stack.extend((item, level + 1) for item in _items(node))
    return deepest, items


def _items(node: dict[str, Any] | list[Any]) -> Iterator[Any]:
    return iter(node.values()) if isinstance(node, dict) else iter(node)


def unsupported_patterns(schema: Mapping[str, Any]) -> list[str]:
    """The regular expressions of ``schema`` that RE2 cannot run (they go unchecked)."""
    found: list[str] = []
    for node in _walk(dict(schema)):
        if not isinstance(node, dict):
            continue
        patterns = [node.get("pattern")]
        named = node.get("patternProperties")
        if isinstance(named, dict):
            patterns.extend(named)
        found.extend(p for p in patterns if isinstance(p, str) and _compiled(p) is None)
    return found


def foreign_references(schema: Mapping[str, Any]) -> list[str]:
    """The ``$ref`` / ``$dynamicRef`` values of ``schema`` that do not resolve within it.

    References resolve within the schema (its ``$defs``, its ``$id`` resources) and the
    JSON Schema metaschemas; any other (``http:``, ``file:``, a missing ``#/...``) is
    returned, in the order met.
    """
    registry = _local_registry(schema)
    resolver = registry.resolver(base_uri=_root_uri(schema))
    foreign = []
    for node in _walk(dict(schema)):
        if not isinstance(node, dict):
            continue
        for key in ("$ref", "$dynamicRef"):
            reference = node.get(key)
            if not isinstance(reference, str):
                continue
            try:
                resolver.lookup(reference)
            except (Unresolvable, NoSuchResource):
                foreign.append(reference)
    return foreign


def _root_uri(schema: Mapping[str, Any]) -> str:
    given = schema.get("$id")
    return given if isinstance(given, str) else ""


def _local_registry(schema: Mapping[str, Any]) -> Registry[Any]:
    resource: Resource[Any] = Resource.from_contents(
        dict(schema), default_specification=DRAFT202012
    )
    registry: Registry[Any] = Registry().with_resource(_root_uri(schema), resource)
    return registry.crawl()


def _clipped(text: str, limit: int = _MAX_SHOWN) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def _shown(value: Any) -> str:
    return _clipped(repr(value))


def shown_error(error: ValidationError, root: str) -> str:
    """One validation error in a line: where (``root`` for the value itself), and what."""
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where or root}: {_clipped(error.message, 2 * _MAX_SHOWN)}"


class BoundedValidator:
    """A JSON Schema validator with the bounds above; thread-safe.

    Args:
        schema: The schema (any draft jsonschema knows; 2020-12 when it names none).
        budget: What one check may spend.

    Raises:
        jsonschema.exceptions.SchemaError: If ``schema`` is not a valid schema.
    """

    def __init__(self, schema: Mapping[str, Any], budget: Budget) -> None:
        schema = dict(schema)
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
        keywords: dict[str, Keyword] = dict(cls.VALIDATORS)
        keywords["pattern"] = _pattern
        keywords["patternProperties"] = _pattern_properties
        if "additionalProperties" in keywords:
            keywords["additionalProperties"] = _additional_properties(
                keywords["additionalProperties"]
            )
        if "unevaluatedProperties" in keywords and _has_key(schema, "patternProperties"):
            keywords["unevaluatedProperties"] = _skipped
        bounded = validators.extend(
            cls, {name: _budgeted(check) for name, check in keywords.items()}
        )
        # an empty registry: references resolve within the schema, nothing is retrieved
        self._validator = bounded(schema, registry=Registry())
        self.budget = budget

    def errors(self, instance: Any) -> list[ValidationError]:
        """What in ``instance`` breaks the schema, ordered by where (empty: valid).

        Raises:
            Unchecked: If ``instance`` cannot be checked within the bounds.
        """
        nesting, items = _shape(instance)
        if nesting > MAX_DEPTH:
            raise Unchecked(f"it is nested more than {MAX_DEPTH} levels deep")
        steps = self.budget.for_value(items)
        token = _SPENDING.set(_Spending(steps, self.budget.seconds))
        try:
            found = list(self._validator.iter_errors(instance))
        except _OutOfSteps:
            raise Unchecked(
                f"checking it took more than {steps:,} steps (the schema's alternatives multiply)"
            ) from None
        except _OutOfTime:
            raise Unchecked(
                f"checking it took more than {self.budget.seconds:g}s "
                "(the schema's alternatives multiply, or the value is too big)"
            ) from None
        except Unresolvable as exc:
            raise Unchecked(f"the schema refers to {exc.ref!r}, which is not within it") from None
        except RecursionError:
            raise Unchecked("it is nested too deeply to check") from None
        finally:
            _SPENDING.reset(token)
        return sorted(found, key=lambda error: list(error.absolute_path))
