"""Why a run stopped, and the objective limits that can stop it.

Every run ends with exactly one `StopReason`. When several conditions hold at the
same cycle boundary the highest-priority one wins, in the order of `STOP_PRIORITY`:
an outside stop request first, then completion, a hand-off by a terminal tool, tool
error, stall, the limits and finally model failure. The model's self-reported
confidence is never a stop signal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from convergent.exceptions import UserError

__all__ = [
    "STOP_PRIORITY",
    "Limits",
    "StallDetector",
    "StopReason",
    "canonical_call_key",
]


class StopReason(StrEnum):
    """The objective reason a run (or a coordinated iteration) ended."""

    STOPPED = "stopped"
    """A stop was requested from outside: API, CLI, steering queue or signal."""
    COMPLETED = "completed"
    """The model answered without tool calls (and any declared verifier passed)."""
    HANDED_OFF = "handed_off"
    """A terminal tool (a hand-off such as a transfer to a human) ran successfully."""
    TOOL_ERROR = "tool_error"
    """Tool failures persisted: ``max_consecutive_tool_errors`` in a row, a failure the
    tool marked fatal, or any failure under the policy ``stop``."""
    STALLED = "stalled"
    """No progress: the same call repeated, or the unresolved work did not shrink."""
    MAX_CYCLES = "max_cycles"
    """The cycle (or iteration) limit was reached."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """A token, wall-time or cost budget was used up."""
    MODEL_ERROR = "model_error"
    """The model backend failed after its retries."""
    NEEDS_USER = "needs_user"
    """The run is waiting for a user's answer it cannot get here; resumable."""

    @property
    def resumable(self) -> bool:
        """Whether a run that ended this way can be continued from its checkpoint."""
        return self not in (StopReason.COMPLETED,)


STOP_PRIORITY: tuple[StopReason, ...] = (
    StopReason.STOPPED,
    StopReason.COMPLETED,
    StopReason.HANDED_OFF,
    StopReason.TOOL_ERROR,
    StopReason.STALLED,
    StopReason.MAX_CYCLES,
    StopReason.BUDGET_EXHAUSTED,
    StopReason.MODEL_ERROR,
    StopReason.NEEDS_USER,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Objective budgets for one run, checked before every model request.

    ``None`` means unlimited. Negative values are rejected when the object is built
    (`UserError`).
    """

    max_cycles: int | None = 50
    """Maximum number of model requests (cycles) in the run."""
    max_total_tokens: int | None = None
    """Maximum input plus output tokens reported by the provider."""
    max_seconds: float | None = None
    """Maximum wall-clock seconds since the run started."""
    max_cost: float | None = None
    """Maximum cost in the currency of the model's price table."""
    max_repeated_calls: int = 3
    """A call with the same name and canonical arguments seen this often stalls the run."""

    def __post_init__(self) -> None:
        for name in ("max_cycles", "max_total_tokens", "max_seconds", "max_cost"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UserError(f"{name} must be >= 0, got {value}")
            if isinstance(value, float) and value != value:
                raise UserError(f"{name} must be a number, got nan")
        if self.max_repeated_calls < 1:
            raise UserError(f"max_repeated_calls must be >= 1, got {self.max_repeated_calls}")

    def exceeded(
        self, *, cycles: int, total_tokens: int, elapsed: float, cost: float
    ) -> tuple[StopReason, str] | None:
        """Return the limit that forbids another model request, if any.

        Args:
            cycles: Model requests already made in this run.
            total_tokens: Input plus output tokens used so far.
            elapsed: Seconds since the run started.
            cost: Cost accrued so far.
        """
        if self.max_cycles is not None and cycles >= self.max_cycles:
            return StopReason.MAX_CYCLES, f"reached max_cycles={self.max_cycles}"
        if self.max_total_tokens is not None and total_tokens >= self.max_total_tokens:
            return (
                StopReason.BUDGET_EXHAUSTED,
                f"used {total_tokens} tokens of max_total_tokens={self.max_total_tokens}",
            )
        if self.max_seconds is not None and elapsed >= self.max_seconds:
            return (
                StopReason.BUDGET_EXHAUSTED,
                f"ran {elapsed:.1f}s of max_seconds={self.max_seconds}",
            )
        if self.max_cost is not None and cost >= self.max_cost:
            return StopReason.BUDGET_EXHAUSTED, f"cost {cost:.4f} reached max_cost={self.max_cost}"
        return None


def canonical_call_key(name: str, arguments: Mapping[str, Any]) -> str:
    """A stable key for a tool call: same name and same arguments give the same key."""
    items = sorted(arguments.items()) if len(arguments) > 1 else list(arguments.items())
    for _, value in items:
        if type(value) not in _SCALARS:
            return (
                name
                + "\x01"
                + json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
            )
    return f"{name}\x00{items!r}"


_SCALARS = frozenset({str, int, float, bool, type(None)})


class StallDetector:
    """Counts identical tool calls across a run and reports the first repeated too often.

    The counts live in the caller's dict (a run state's ``call_counts``), updated in place
    so that checkpoints see them without a copy per cycle.
    """

    __slots__ = ("counts", "threshold")

    def __init__(self, threshold: int, counts: dict[str, int] | None = None) -> None:
        self.threshold = threshold
        self.counts: dict[str, int] = counts if counts is not None else {}

    def observe(self, name: str, arguments: Mapping[str, Any]) -> bool:
        """Record one call; return True when it has now been seen ``threshold`` times."""
        key = canonical_call_key(name, arguments)
        counts = self.counts
        seen = counts[key] = counts.get(key, 0) + 1
        return seen >= self.threshold
