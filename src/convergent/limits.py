"""The budgets of a run: cycles, tokens, seconds and cost, checked before every request.

They live apart from `convergent.stop` so that the stop decision loads without pydantic
(the Claude Code hook takes it at every stop); `convergent.Limits` is the usual way in.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from convergent._validation import raises_user_errors
from convergent.stop import LimitReached

__all__ = ["Limits"]


@raises_user_errors
@pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="forbid"))
class Limits:
    """Objective budgets for one run, checked before every model request.

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
    max_repeated_calls: int = Field(default=3, ge=1)
    """A call repeated this often with the same result while nothing changed (or a
    short cycle of calls repeated this often) stalls the run."""
    stall_nudges: int = Field(default=1, ge=0)
    """Notes the model gets when a stall or a streak of tool errors reaches its
    threshold, before the run stops on it (per stretch without progress); 0 stops at
    once."""

    def reached(
        self,
        cycles: int,
        total_tokens: int,
        elapsed: float,
        cost: float,
        reserved_tokens: int = 0,
        reserved_cost: float = 0.0,
    ) -> LimitReached | None:
        """The first budget that forbids another model request, if any.

        Args:
            cycles: Model requests already made in this run.
            total_tokens: Input plus output tokens used so far.
            elapsed: Seconds since the run started.
            cost: Cost accrued so far.
            reserved_tokens: Tokens that must stay free after this point.
            reserved_cost: Cost that must stay free after this point.
        """
        if self.max_cycles is not None and cycles >= self.max_cycles:
            return LimitReached(limit="max_cycles", used=cycles, maximum=self.max_cycles)
        if self.max_total_tokens is not None and (
            total_tokens + reserved_tokens >= self.max_total_tokens
        ):
            return LimitReached(
                limit="max_total_tokens",
                used=total_tokens,
                maximum=self.max_total_tokens,
                reserved=reserved_tokens,
            )
        if self.max_seconds is not None and elapsed >= self.max_seconds:
            return LimitReached(limit="max_seconds", used=elapsed, maximum=self.max_seconds)
        if self.max_cost is not None and cost + reserved_cost >= self.max_cost:
            return LimitReached(
                limit="max_cost", used=cost, maximum=self.max_cost, reserved=reserved_cost
            )
        return None
