"""The budgets of a run: cycles, tokens, seconds, cost and tool calls.

They live apart from `convergent.stop` so that the stop decision loads without pydantic
(the Claude Code hook takes it at every stop); `convergent.Limits` is the usual way in.
The rules that judge progress (repeats, streaks, notes) are `convergent.StopPolicy`'s.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from convergent._deprecated import warn_old
from convergent._validation import raises_user_errors

__all__ = ["CapPolicy", "Limits", "without_legacy"]

CapPolicy = Literal["stop", "continue"]
"""What a tool-call cap does to a call past it: ``stop``: the call does not run and the
run stops ``budget_exhausted``; ``continue``: the call does not run, its result is a
note saying so, and the run goes on."""


def _non_negative(caps: int | dict[str, int] | None) -> int | dict[str, int] | None:
    values = caps.values() if isinstance(caps, Mapping) else () if caps is None else (caps,)
    for value in values:
        if value < 0:
            raise ValueError(f"a cap must be >= 0, got {value}")
    return caps


_Caps = Annotated[int | dict[str, int] | None, AfterValidator(_non_negative)]


@raises_user_errors
@pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="forbid"))
class Limits:
    """Objective budgets for one run: cycles, tokens, seconds, cost and tool calls.

    Cycles, tokens, seconds and cost are checked before every model request; tool calls
    before every call.

    ``None`` means unlimited. This class is the one place budgets are validated: a
    negative or non-finite value is refused when the object is built (`UserError`), or,
    inside an `AgentSpec`, when the spec is.
    """

    max_cycles: int | None = Field(default=50, ge=0)
    """Maximum number of model requests (cycles) in the run."""
    max_total_tokens: int | None = Field(default=None, ge=0)
    """Maximum input plus output tokens reported by the provider."""
    max_seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Maximum wall-clock seconds since the run started."""
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Maximum cost in the currency of the model's price table."""
    max_tool_calls: int | None = Field(default=None, ge=0)
    """Maximum tool calls the run may make, whatever the tools (calls past it do not
    run; ``on_max_tool_calls`` says what the run does then)."""
    max_calls_per_tool: _Caps = None
    """Maximum calls of each tool: one number for every tool, or a number per tool name
    (tools not named are not capped; ``on_max_calls_per_tool`` says what the run does
    with a call past its cap)."""
    on_max_tool_calls: CapPolicy = "stop"
    """``stop``: a call past ``max_tool_calls`` stops the run ``budget_exhausted``;
    ``continue``: it does not run, the model is told why as its result, and the run
    goes on (the other calls of its batch within the caps run)."""
    on_max_calls_per_tool: CapPolicy = "stop"
    """The same choice for a call past its tool's ``max_calls_per_tool``."""
    max_repeated_calls: int | None = Field(default=None, ge=1, exclude=True, repr=False)
    """Deprecated: `convergent.StopPolicy.max_repeated_calls`."""
    stall_nudges: int | None = Field(default=None, ge=0, exclude=True, repr=False)
    """Deprecated: `convergent.StopPolicy.notes`."""

    def __post_init__(self) -> None:
        legacy = [
            name
            for name in ("max_repeated_calls", "stall_nudges")
            if getattr(self, name) is not None
        ]
        if legacy:
            warn_old(
                f"Limits({', '.join(f'{name}=' for name in legacy)}...) moved to StopPolicy "
                "(max_repeated_calls, notes): pass policy=StopPolicy(...) instead",
                stacklevel=4,
            )

    def legacy_policy(self) -> dict[str, Any]:
        """The deprecated policy options this object was given, by their old names."""
        if self.max_repeated_calls is None and self.stall_nudges is None:
            return {}  # every run asks: the usual answer comes at once
        return {
            name: getattr(self, name)
            for name in ("max_repeated_calls", "stall_nudges")
            if getattr(self, name) is not None
        }

    def cap_policy(self, limit: str) -> CapPolicy:
        """What a call past the cap ``limit`` (``max_tool_calls``, ``max_calls_per_tool``) does."""
        return self.on_max_tool_calls if limit == "max_tool_calls" else self.on_max_calls_per_tool

    def tool_cap(self, name: str) -> int | None:
        """The cap on calls of the tool ``name`` (None: not capped)."""
        caps = self.max_calls_per_tool
        if isinstance(caps, Mapping):
            return caps.get(name)
        return caps


def without_legacy(limits: Limits) -> Limits:
    """``limits`` without the deprecated policy options (once they went to a policy)."""
    if limits.max_repeated_calls is None and limits.stall_nudges is None:
        return limits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return dataclasses.replace(limits, max_repeated_calls=None, stall_nudges=None)


_N = TypeVar("_N", int, float)


def least(own: _N | None, left: _N | None) -> _N | None:
    """The smaller of two budgets, None meaning unlimited."""
    if own is None:
        return left
    return own if left is None else min(own, left)


def _part(budget: int | None, parts: int) -> int | None:
    return None if budget is None else budget // parts


def narrowed(limits: Limits, remaining: Limits) -> Limits:
    """``limits`` with each budget cut to at most what ``remaining`` allows.

    A budget unset in ``limits`` takes the remaining one.
    """
    return dataclasses.replace(
        limits,
        max_cycles=least(limits.max_cycles, remaining.max_cycles),
        max_total_tokens=least(limits.max_total_tokens, remaining.max_total_tokens),
        max_seconds=least(limits.max_seconds, remaining.max_seconds),
        max_cost=least(limits.max_cost, remaining.max_cost),
        max_tool_calls=least(limits.max_tool_calls, remaining.max_tool_calls),
    )


def shared(remaining: Limits, parts: int) -> Limits:
    """One of ``parts`` equal shares of the cycle, token, cost and call budgets in ``remaining``.

    Calls that run side by side spend the same budgets, so none may have all of them;
    time passes for all at once, so ``max_seconds`` is not divided.
    """
    if parts <= 1:
        return remaining
    return dataclasses.replace(
        remaining,
        max_cycles=_part(remaining.max_cycles, parts),
        max_total_tokens=_part(remaining.max_total_tokens, parts),
        max_cost=None if remaining.max_cost is None else remaining.max_cost / parts,
        max_tool_calls=_part(remaining.max_tool_calls, parts),
    )
