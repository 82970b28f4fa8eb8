"""The ``--policy RULE=VALUE`` and ``--max-calls-per-tool [TOOL=]N`` options, read."""

from __future__ import annotations

from convergent.exceptions import UserError
from convergent.policy import POLICY_RULES

__all__ = ["parse_policy", "parse_tool_caps"]

_NONE = ("none", "null", "off")


def parse_policy(items: list[str]) -> dict[str, object]:
    """``RULE=VALUE`` pairs as the fields of a `convergent.StopPolicy` (checked by it).

    ``none`` turns a rule off; numbers are given as numbers.

    Raises:
        UserError: For an item that is not ``RULE=VALUE``, or an unknown rule.
    """
    rules: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UserError(f"--policy takes RULE=VALUE, got {item!r}")
        if name not in POLICY_RULES:
            raise UserError(f"--policy: unknown rule {name!r}; rules are {', '.join(POLICY_RULES)}")
        rules[name] = _value(value.strip())
    return rules


def parse_tool_caps(items: list[str]) -> int | dict[str, int] | None:
    """``N`` (every tool) or ``TOOL=N`` items as `convergent.Limits.max_calls_per_tool`.

    Raises:
        UserError: For a count that is not a whole number, or a mix of both forms.
    """
    if not items:
        return None
    caps: dict[str, int] = {}
    every: int | None = None
    for item in items:
        name, sep, count = item.rpartition("=")
        number = _count(count.strip(), item)
        if sep:
            caps[name.strip()] = number
        else:
            every = number
    if every is not None and caps:
        raise UserError("--max-calls-per-tool takes N for every tool, or TOOL=N items, not both")
    return every if every is not None else caps


def _count(text: str, item: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"--max-calls-per-tool takes [TOOL=]N, got {item!r}") from None


def _value(text: str) -> object:
    if text.lower() in _NONE:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
