"""Two runs side by side: their settings, their cycles, where they diverged, their cost.

A comparison lines the runs' cycles up by number. A cycle's *step* is what its request
produced: the calls it asked for (names and arguments) or, without calls, its answer.
The runs *diverge* at the first cycle whose steps differ; before it they did the same.
Settings are the agent specs the runs stored, flattened to dotted names
(``limits.max_cycles``), with the system prompt, the tools and the first request's
model settings (``request.temperature``) the runs recorded, so that a changed limit or
prompt shows as one row. Cost (or
tokens, or time, when the model reported no cost) is drawn cycle by cycle, added up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from convergent.durability.sqlite import RunStore, RunSummary
from convergent.durability.sqlite._codec import parse_usage
from convergent.ui.timeline import CLIP, CycleView, RunView, load_run_view

__all__ = ["COMPARED", "Comparison", "compare_runs"]

COMPARED = 100
"""Cycles compared (the first ones of each run)."""
SETTING_CHARS = 300
"""Characters of one setting shown (a long system prompt is cut)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting of the two runs."""

    name: str
    """Its dotted name (``limits.max_cycles``)."""
    left: str
    """Its value in the first run (``-``: not set)."""
    right: str
    """Its value in the second run."""

    @property
    def same(self) -> bool:
        """Whether both runs had the same value."""
        return self.left == self.right


@dataclass(frozen=True, slots=True)
class Row:
    """One cycle of both runs."""

    number: int
    """The cycle."""
    left: CycleView | None
    """The first run's (None: it made no such cycle)."""
    right: CycleView | None
    """The second run's."""
    same: bool
    """Whether both made the same step."""


@dataclass(frozen=True, slots=True)
class Line:
    """A run's spend added up cycle by cycle, as a polyline."""

    points: str
    """``x,y`` pairs."""
    total: float
    """What it came to over the cycles compared."""


@dataclass(slots=True)
class Comparison:
    """Everything the comparison page shows."""

    left: RunSummary
    right: RunSummary
    settings: list[Setting]
    rows: list[Row]
    diverged: int | None
    """The first cycle whose steps differ (None: the same, as far as both went)."""
    measure: str
    """What the chart adds up: ``cost``, ``tokens`` or ``seconds``."""
    lines: tuple[Line, Line]
    top: float
    """The chart's scale: the larger of the two totals."""
    more: int
    """Cycles of the longer run past `COMPARED`, not compared."""

    @property
    def differing(self) -> list[Setting]:
        """The settings the runs do not share."""
        return [setting for setting in self.settings if not setting.same]


def _flat(value: Any, prefix: str = "") -> dict[str, str]:
    """A spec's values by dotted name, each as short text."""
    if isinstance(value, dict) and value:
        found: dict[str, str] = {}
        for key, inner in value.items():
            found.update(_flat(inner, f"{prefix}.{key}" if prefix else str(key)))
        return found
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > SETTING_CHARS:
        text = f"{text[:SETTING_CHARS]}… ({len(text) - SETTING_CHARS:,} more characters)"
    return {prefix: text}


def _stored(store: RunStore, run: RunSummary) -> dict[str, str]:
    """A run's settings: its spec, and what its first start and request recorded.

    A run started from Python without a spec still has its system prompt (the first
    message), its tools (its start) and its first request's model settings.
    """
    found = {"model": run.model, **_flat(run.spec or {})}
    rows = store.query(
        "SELECT type, data FROM events WHERE run_id = ? AND type IN ('run_started', "
        "'model_responded') ORDER BY seq LIMIT 2",
        [run.run_id],
    )
    for kind, data in rows:
        event = json.loads(data)
        if kind == "run_started" and "tools" not in found:
            found["tools"] = ", ".join(event.get("tools") or ()) or "none"
        elif kind == "model_responded":
            found.update(_flat(event.get("settings") or {}, "request"))
    if "system_prompt" not in found:
        first = store.query(
            "SELECT json_extract(data, '$.content') FROM messages WHERE run_id = ? AND seq = 0 "
            "AND json_extract(data, '$.role') = 'system' ORDER BY epoch LIMIT 1",
            [run.run_id],
        )
        if first:
            found.update(_flat(str(first[0][0] or ""), "system_prompt"))
    return found


def _settings(store: RunStore, left: RunSummary, right: RunSummary) -> list[Setting]:
    ones, others = _stored(store, left), _stored(store, right)
    names = sorted(set(ones) | set(others), key=lambda name: (name != "model", name))
    return [Setting(name, ones.get(name, "-"), others.get(name, "-")) for name in names]


def _step(cycle: CycleView | None) -> Any:
    """What a cycle's request produced, to compare: its calls, or its answer."""
    if cycle is None:
        return None
    if cycle.calls:
        return tuple((call.name, call.arguments) for call in cycle.calls)
    return ("answer", cycle.text)


def _view(store: RunStore, run_id: str) -> RunView:
    return load_run_view(store, run_id, upto=COMPARED, count=COMPARED)


def _spend(store: RunStore, run_id: str, measure: str) -> list[float]:
    """The run's spend at the end of each cycle compared, added up."""
    rows = store.query(
        "SELECT usage, elapsed FROM checkpoints WHERE run_id = ? AND cycle BETWEEN 1 AND ? "
        "ORDER BY cycle",
        [run_id, COMPARED],
    )
    spent = []
    for usage, elapsed in rows:
        used = parse_usage(usage)
        spent.append(
            used.cost
            if measure == "cost"
            else used.total_tokens
            if measure == "tokens"
            else elapsed
        )
    return spent


WIDTH, HEIGHT = 640, 140
"""Size of the spend chart, in SVG units."""


def _line(spent: list[float], top: float, cycles: int) -> Line:
    step = WIDTH / max(1, cycles)
    points = " ".join(
        f"{round((index + 1) * step, 2)},{round(HEIGHT - value / top * (HEIGHT - 4), 2)}"
        for index, value in enumerate(spent)
    )
    return Line(f"0,{HEIGHT} {points}" if points else "", spent[-1] if spent else 0.0)


def compare_runs(store: RunStore, left_id: str, right_id: str) -> Comparison:
    """Compare two stored runs.

    Raises:
        UserError: If either run is not stored.
    """
    left = store.get_run(left_id, clip=CLIP)
    right = store.get_run(right_id, clip=CLIP)
    views = (_view(store, left_id), _view(store, right_id))
    cycles = [{cycle.number: cycle for cycle in view.cycles} for view in views]
    count = max(len(cycles[0]), len(cycles[1]))
    rows = []
    diverged = None
    for number in range(1, count + 1):
        one, other = cycles[0].get(number), cycles[1].get(number)
        same = _step(one) == _step(other)
        if not same and diverged is None:
            diverged = number
        rows.append(Row(number, one, other, same))
    measure = "cost" if left.usage.cost or right.usage.cost else "tokens"
    if measure == "tokens" and not (left.usage.total_tokens or right.usage.total_tokens):
        measure = "seconds"
    spent = (_spend(store, left_id, measure), _spend(store, right_id, measure))
    top = max([*spent[0], *spent[1], 0.0]) or 1.0
    return Comparison(
        left=left,
        right=right,
        settings=_settings(store, left, right),
        rows=rows,
        diverged=diverged,
        measure=measure,
        lines=(_line(spent[0], top, count), _line(spent[1], top, count)),
        top=top,
        more=max(left.cycles, right.cycles) - count,
    )
