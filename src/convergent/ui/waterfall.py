"""The run page's timing waterfall: where each cycle's time went.

Each cycle is one row for the model and one per tool call, on a common time scale
so that cycles can be compared. The tool bars come from the stored calls (each one's
duration and the time it finished, so calls that ran side by side overlap); the
cycle's length comes from its checkpoint. The model bar is the cycle's length less
the span of its tool calls: the model request, plus the loop's own work around it
(verification, steering, writing the checkpoint), which is small beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from convergent.ui.timeline import CycleView

__all__ = ["Bar", "Waterfall", "build_waterfall"]

ROW = 18
"""Height of one row, in SVG units."""
LABEL = 200
"""Width of the labels' column."""


@dataclass(frozen=True, slots=True)
class Bar:
    """One row of the waterfall: the model's part of a cycle, or one tool call."""

    y: float
    """Top of the row."""
    x: float
    """Where the bar starts."""
    width: float
    """Length of the bar (at least one unit, so a very short call stays visible)."""
    label: str
    """``cycle N model`` or the tool's name."""
    kind: str
    """``model`` or ``tool``: how the page colours it."""
    tip: str
    """The bar's tooltip: what it is and how long it took."""


@dataclass(frozen=True, slots=True)
class Waterfall:
    """Every bar of the cycles shown, scaled to one drawing."""

    width: int
    """Width of the drawing."""
    height: int
    """Height of the drawing."""
    bars: list[Bar]
    """The rows, top to bottom."""
    longest: float
    """Seconds of the longest cycle (the full width of the bar area)."""
    label_width: int = LABEL
    """Where the bars begin (left of it: the labels)."""


@dataclass(frozen=True, slots=True)
class _Timed:
    """One cycle's parts in seconds from its start."""

    number: int
    model: float | None
    calls: list[tuple[str, float, float]]
    """Each call's name, start and duration."""


def _timed(cycle: CycleView) -> _Timed | None:
    """The cycle's model time and calls, or None when nothing of it was measured."""
    finished = [
        (call.name, call.finished_at - call.duration, call.duration)
        for call in cycle.calls
        if call.finished_at is not None and call.duration is not None
    ]
    if not finished and cycle.seconds is None:
        return None
    first = min((start for _, start, _ in finished), default=0.0)
    span = max((start + took for _, start, took in finished), default=first) - first
    model = None if cycle.seconds is None else max(0.0, cycle.seconds - span)
    offset = model or 0.0
    calls = [(name, offset + start - first, took) for name, start, took in finished]
    return _Timed(cycle.number, model, calls)


def build_waterfall(cycles: Sequence[CycleView], *, width: int = 720) -> Waterfall | None:
    """Lay out the cycles' model and tool times; None when no cycle was measured."""
    timed = [t for t in map(_timed, cycles) if t is not None]
    if not timed:
        return None
    ends = [max([t.model or 0.0, *(start + took for _, start, took in t.calls)]) for t in timed]
    longest = max(ends) or 1.0
    scale = (width - LABEL) / longest
    bars: list[Bar] = []
    for cycle in timed:
        if cycle.model is not None:
            bars.append(
                Bar(
                    len(bars) * ROW,
                    LABEL,
                    max(1.0, round(cycle.model * scale, 2)),
                    f"cycle {cycle.number} model",
                    "model",
                    f"cycle {cycle.number}: model and loop {cycle.model:.3f} s",
                )
            )
        for name, start, took in cycle.calls:
            bars.append(
                Bar(
                    len(bars) * ROW,
                    round(LABEL + start * scale, 2),
                    max(1.0, round(took * scale, 2)),
                    name,
                    "tool",
                    f"cycle {cycle.number}: {name} {took:.3f} s",
                )
            )
    return Waterfall(width, len(bars) * ROW, bars, longest)
