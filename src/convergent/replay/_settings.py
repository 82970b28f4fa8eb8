"""Settings of the policy under test, by name, sent where the installed convergent takes them.

A setting is a flat ``name -> value`` (``max_repeated_calls=4``). Each name goes to the
first place that has it: a field of `convergent.StopPolicy` (where the installed
convergent has one), a field of `convergent.Limits`, or a keyword of `convergent.Agent`
whose value JSON can give (a flag, a number, a text; not the replay's own keywords).
So the same settings measure whichever version is installed, and a name no part of it
knows, or a value of the wrong type, is refused in one line instead of silently
ignored.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Mapping
from typing import Any

import convergent
from convergent.exceptions import UserError

__all__ = ["Settings", "agent_arguments", "placed", "same_policy", "setting_names"]

Settings = Mapping[str, Any]
"""Setting names and values; empty: the installed library's defaults."""

_NOT_SETTINGS = frozenset(
    {
        "self",
        "model",
        "tools",
        "limits",
        "policy",
        "spec",
        "store",
        "observers",
        "gate",
        "record_events",  # the replay sets these two itself
        "instrument",
    }
)
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "bool": (bool,),
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "None": (type(None),),
}
"""Types a keyword of `Agent` may have to be a setting: what JSON gives."""


@functools.cache
def _targets() -> tuple[tuple[str, frozenset[str]], ...]:
    found: list[tuple[str, frozenset[str]]] = []
    policy = getattr(convergent, "StopPolicy", None) if "StopPolicy" in convergent.__all__ else None
    # where a StopPolicy exists, the earlier spellings of its rules are not settings
    legacy = frozenset(_legacy_names()) if policy is not None else frozenset()
    if policy is not None:
        found.append(("StopPolicy", _fields(policy)))
    found.append(("Limits", _fields(convergent.Limits) - legacy))
    found.append(("Agent", frozenset(_agent_types()) - _NOT_SETTINGS - legacy))
    return tuple(found)


@functools.cache
def _agent_types() -> dict[str, tuple[type, ...]]:
    """The keywords of `Agent` JSON can give, with the types each takes."""
    found: dict[str, tuple[type, ...]] = {}
    for name, parameter in inspect.signature(convergent.Agent.__init__).parameters.items():
        annotation = parameter.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        parts = [part.strip() for part in str(text).split("|")]
        if parts and all(part in _JSON_TYPES for part in parts):
            found[name] = tuple(kind for part in parts for kind in _JSON_TYPES[part])
    return found


def _legacy_names() -> tuple[str, ...]:
    try:
        from convergent.policy import LEGACY_POLICY_FIELDS
    except ImportError:  # a convergent without a StopPolicy module
        return ()
    return tuple(LEGACY_POLICY_FIELDS)


def _fields(cls: Any) -> frozenset[str]:
    if dataclasses.is_dataclass(cls):
        return frozenset(field.name for field in dataclasses.fields(cls))
    return frozenset(getattr(cls, "model_fields", {}))


def setting_names() -> dict[str, str]:
    """Every setting the installed convergent takes, with where it goes."""
    names: dict[str, str] = {}
    for target, fields in _targets():
        for name in sorted(fields):
            names.setdefault(name, target)
    return names


def placed(settings: Settings) -> dict[str, dict[str, Any]]:
    """The settings grouped by where they go: ``{"StopPolicy": {...}, "Limits": {...}}``.

    Raises:
        UserError: If a name is not a setting of the installed convergent.
    """
    where = setting_names()
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in settings.items():
        if name not in where:
            known = ", ".join(sorted(where))
            raise UserError(f"unknown setting {name!r}; the installed convergent takes: {known}")
        if where[name] == "Agent":
            kinds = _agent_types()[name]
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                wanted = " or ".join(sorted({_JSON_NAMES[kind] for kind in kinds}))
                raise UserError(f"{name} must be {wanted}, got {value!r}")
        grouped.setdefault(where[name], {})[name] = value
    return grouped


_JSON_NAMES = {
    bool: "true/false",
    int: "a number",
    float: "a number",
    str: "a text",
    type(None): "null",
}


def agent_arguments(settings: Settings) -> dict[str, Any]:
    """`Agent` keyword arguments for ``settings`` (budgets unlimited unless set).

    Raises:
        UserError: If a name is unknown or a value is refused by the library.
    """
    grouped = placed(settings)
    arguments: dict[str, Any] = dict(grouped.get("Agent", {}))
    arguments["limits"] = convergent.Limits(**{"max_cycles": None, **grouped.get("Limits", {})})
    if "StopPolicy" in grouped:
        policy: Any = getattr(convergent, "StopPolicy")  # noqa: B009 (absent in older versions)
        arguments["policy"] = policy(**grouped["StopPolicy"])
    return arguments


def same_policy(settings: Settings, other: Settings) -> bool:
    """Whether two settings build the same agent (a value equal to a default is no change).

    Raises:
        UserError: If a name is unknown or a value is refused by the library.
    """
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(convergent.Agent.__init__).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    policy: Any = getattr(convergent, "StopPolicy", None)
    if policy is not None:  # no policy given is the default policy
        defaults["policy"] = policy()
    first = {**defaults, **agent_arguments(settings)}
    second = {**defaults, **agent_arguments(other)}
    return bool(first == second)
