"""The Jinja2 templates and the helpers they use (autoescaping always on).

Everything a model or a tool produced reaches the page only through an autoescaped
template expression, so text such as ``<script>`` is shown, never run.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader

from convergent.durability.sqlite import RunSummary
from convergent.models._prices import format_cost
from convergent.models.registry import costs_nothing
from convergent.result import output_label
from convergent.ui.timeline import CALLS_PER_CYCLE, CycleView
from convergent.ui.trace import MAX_ROWS

__all__ = ["Chart", "build_chart", "environment"]

TEMPLATES = Path(__file__).with_name("templates")


def age(timestamp: float) -> str:
    """How long ago a Unix time was, shortly (``5s``, ``3m``, ``2h``, ``4d``)."""
    seconds = max(0.0, time.time() - timestamp)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def since(timestamp: float) -> float:
    """Seconds since a Unix time (the page's script counts an age on from it)."""
    return max(0.0, time.time() - timestamp)


def seconds(value: float | None) -> str:
    """A duration (``0.42 s``, ``1m 05s``)."""
    if value is None:
        return ""
    if value < 60:
        return f"{value:.2f} s"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes}m {rest:02d}s"


def run_cost(run: RunSummary) -> str:
    """A run's cost for people: ``$0`` for a free model, ``-`` when no price is known."""
    return format_cost(run.usage.cost, free=costs_nothing(run.spec))


def round_seconds(value: float) -> str:
    """A duration that counts up on the page (``12 s``, ``1m 05s``), as the script writes it."""
    whole = int(value)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m {rest:02d}s"


def clock(timestamp: float) -> str:
    """A Unix time as local date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


def environment() -> Environment:
    """The template environment: autoescaping on for every template."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        age=age,
        since=since,
        seconds=seconds,
        cost=run_cost,
        clock=clock,
        round_seconds=round_seconds,
    )
    env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False, indent=2)
    env.globals.update(output_label=output_label, max_rows=MAX_ROWS, calls_shown=CALLS_PER_CYCLE)
    return env


@dataclass(frozen=True, slots=True)
class Chart:
    """A small bar-and-line chart of tokens and duration per cycle, in SVG units."""

    width: int
    """Width of the drawing."""
    height: int
    """Height of the drawing."""
    bars: list[tuple[float, float, float, float, str]]
    """Token bars: x, y, width, height and a tooltip."""
    line: str
    """Points of the duration line (``x,y x,y ...``)."""
    max_tokens: int
    """Tokens at the top of the scale."""
    max_seconds: float
    """Seconds at the top of the scale."""
    tokens_known: bool = True
    """Whether the model reported token counts (without any, the chart draws no bars
    and the page says so, instead of a row of zeros)."""


def build_chart(cycles: list[CycleView], *, width: int = 640, height: int = 120) -> Chart | None:
    """Scale the cycles' tokens (bars) and durations (line); None without measured cycles.

    A run whose model reported no usage (a scripted model, a server that sends none)
    has zero tokens in every cycle: it gets no bars, only the duration line.
    """
    measured = [c for c in cycles if c.tokens is not None or c.seconds is not None]
    if not measured:
        return None
    most_tokens = max((c.tokens or 0 for c in measured), default=0)
    most_seconds = max((c.seconds or 0.0 for c in measured), default=0.0)
    top_tokens, top_seconds = most_tokens or 1, most_seconds or 1.0
    step = width / len(measured)
    bars: list[tuple[float, float, float, float, str]] = []
    points: list[str] = []
    for index, cycle in enumerate(measured):
        x = index * step
        if most_tokens:
            bar = (cycle.tokens or 0) / top_tokens * (height - 4)
            tip = f"cycle {cycle.number}: {cycle.tokens or 0} tokens, {seconds(cycle.seconds)}"
            bars.append(
                (
                    round(x + step * 0.15, 2),
                    round(height - bar, 2),
                    round(step * 0.7, 2),
                    round(bar, 2),
                    tip,
                )
            )
        y = height - (cycle.seconds or 0.0) / top_seconds * (height - 4)
        points.append(f"{round(x + step / 2, 2)},{round(y, 2)}")
    return Chart(
        width, height, bars, " ".join(points), most_tokens, most_seconds, bool(most_tokens)
    )
