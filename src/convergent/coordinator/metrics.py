"""Convergence metrics and the health check built on them.

Healthy means the unresolved count is not trending up, the stall counter is not near
its limit, the iteration limit is not reached and no atom keeps failing. Unhealthy
comes with the list of problems, so a status view can say what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from convergent.coordinator.advice import find_inertia
from convergent.coordinator.progress import pending_count, resolved_count
from convergent.coordinator.state import ProgressKind, WorkflowState, WorkflowStatus

__all__ = ["Health", "Metrics", "Trend", "health", "metrics"]

_TREND_WINDOW = 3

Trend = Literal["down", "flat", "up", "unknown"]
"""Direction of the unresolved count; ``"unknown"`` with fewer than two observations."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics:
    """The numbers the seed tracks for a converging loop."""

    iteration: int
    """Iterations completed."""
    max_iterations: int
    """Iteration limit."""
    pending_count: int
    """Unresolved units of work now."""
    resolved_count: int
    """Atoms resolved."""
    stall_count: int
    """Consecutive iterations without progress."""
    max_stall_count: int
    """Stall limit."""
    or_switches: int
    """OR-branch switches made."""
    pending_trend: Trend
    """Direction of the unresolved count over the last few iterations."""
    last_progress: ProgressKind | None
    """Progress, stall or expansion in the latest iteration."""
    status: WorkflowStatus
    """Running, completed or stopped."""


@dataclass(frozen=True, slots=True)
class Health:
    """Whether the loop looks like it is converging, with the reasons when not."""

    healthy: bool
    """True when no problem was found."""
    problems: tuple[str, ...]
    """What is wrong, one sentence each."""


def _trend(history: list[int]) -> Trend:
    window = history[-_TREND_WINDOW:]
    if len(window) < 2:
        return "unknown"
    if window[-1] < window[0]:
        return "down"
    if window[-1] > window[0]:
        return "up"
    return "flat"


def metrics(state: WorkflowState) -> Metrics:
    """Compute the current metrics from the state."""
    control = state.control
    return Metrics(
        iteration=control.iteration,
        max_iterations=control.max_iterations,
        pending_count=pending_count(state.atoms),
        resolved_count=resolved_count(state.atoms),
        stall_count=control.stall_count,
        max_stall_count=control.max_stall_count,
        or_switches=control.or_switches,
        pending_trend=_trend(control.pending_history),
        last_progress=control.last_progress,
        status=control.status,
    )


def health(state: WorkflowState) -> Health:
    """Judge health per the seed: trend, stall margin, iteration limit, repeated failures."""
    m = metrics(state)
    problems: list[str] = []
    if m.pending_trend == "up":
        problems.append("unresolved count is trending up")
    if m.stall_count >= m.max_stall_count:
        problems.append(f"stall_count {m.stall_count} reached max_stall_count {m.max_stall_count}")
    elif m.max_stall_count > 1 and m.stall_count >= m.max_stall_count - 1:
        problems.append(
            f"stall_count {m.stall_count} is approaching max_stall_count {m.max_stall_count}"
        )
    if m.iteration >= m.max_iterations:
        problems.append(f"iteration {m.iteration} reached max_iterations {m.max_iterations}")
    for flag in find_inertia(state):
        if flag.kind == "atom":
            problems.append(f"atom {flag.subject} failed {flag.failures} times")
    return Health(not problems, tuple(problems))
