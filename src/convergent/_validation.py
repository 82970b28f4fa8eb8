"""Pydantic's validation errors as one line that names what was wrong.

`Limits` and `AgentSpec` are validated by pydantic; whatever reports one of their errors
(`Limits` built from Python, a stored spec, a command-line option) says it the same way:
``max_cycles must be >= 0, got -1``. The command line names its options instead of the
fields (``--max-cycles must be >= 0, got -1``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from convergent.exceptions import UserError

__all__ = ["problem", "raises_user_errors"]

_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}
_SHOWN_CHARS = 60

T = TypeVar("T")


def problem(exc: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """The first error of ``exc`` as one line.

    Args:
        exc: The validation error.
        names: What to call a field in the message, by its dotted path
            (``limits.max_cycles``); a field not named here is called by its path.
    """
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return _sentence((names or {}).get(where, where) or "the value", error)


def _sentence(name: str, error: ErrorDetails) -> str:
    kind, value = error["type"], error.get("input")
    context: dict[str, Any] = error.get("ctx") or {}
    unit = " seconds" if "seconds" in name or "timeout" in name else ""
    if kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        return f"{name} must be {sign} {_shown(context[key])}{unit}, got {_shown(value)}"
    if kind == "finite_number":
        if value != value:
            return f"{name} must be a number, got nan"
        return f"{name} must be a finite number, got {_shown(value)}"
    if kind == "literal_error":
        return f"{name} must be {context['expected']}, got {_shown(value)}"
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        return f"{name} is not a known field"
    if kind == "missing":
        return f"{name} is required"
    if kind == "value_error":
        return f"{name}: {context['error']}"
    message = error["msg"]
    return f"{name}: {message[:1].lower()}{message[1:]}"


def _shown(value: Any) -> str:
    """A value as the message shows it: numbers plainly, anything else as its repr, cut."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}"
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def raises_user_errors(cls: type[T]) -> type[T]:
    """Make building a pydantic dataclass from Python raise `UserError`, in one line.

    Only the class's own constructor changes: validated as a field of a model (a
    `Limits` inside an `AgentSpec`), it still raises pydantic's `ValidationError`, whose
    location says where in the model the bad value is.
    """
    validated: Callable[..., None] = cls.__init__

    @functools.wraps(validated)
    def __init__(self: T, *args: Any, **kwargs: Any) -> None:
        try:
            validated(self, *args, **kwargs)
        except ValidationError as exc:
            raise UserError(problem(exc)) from None

    cls.__init__ = __init__  # type: ignore[method-assign,assignment]
    return cls
