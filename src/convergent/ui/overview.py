"""What happens across runs: stop reasons, notes, cost and cycles, by model, tool and day.

The overview answers the questions a user asks once many runs are stored: how often
each stop reason fires, which tools are called, fail or are refused as repeats, what
the runs cost and what their stops left unspent, by model and by day. It is filtered
by time, stop reason, model and tool, over the runs started by the user (``top``: a
child run's spend is its parent's) or over every run (``all``: each run counted with
what it spent itself, its children's spend taken out).

Every figure comes from a few grouped queries over the ``runs`` table (and, for tools
and notes, the rows of the runs selected), never from reading runs one by one, so the
page costs about the same for ten runs as for ten thousand.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from convergent.durability.sqlite import RunStore
from convergent.stop import StopReason

__all__ = ["WINDOWS", "Overview", "OverviewQuery", "load_overview", "overview_query", "share"]

WINDOWS: dict[str, tuple[str, int | None]] = {
    "1d": ("last 24 hours", 86_400),
    "7d": ("last 7 days", 7 * 86_400),
    "30d": ("last 30 days", 30 * 86_400),
    "all": ("all time", None),
}
"""The time windows the overview offers: a label and its length in seconds."""
UNFINISHED = "unfinished"
"""The reason filter's name for runs with no stop reason (running, or interrupted)."""
REASONS = (*(reason.value for reason in StopReason), UNFINISHED)
"""Every reason a run can be filtered by, in the order the charts use."""
EARLY = ("stalled", "tool_error")
"""Stops that end a run before its cycle limit because it made no progress."""
ROWS = 50
"""Models and tools listed at most (the most used first)."""


@dataclass(frozen=True, slots=True)
class OverviewQuery:
    """What the overview shows: a time window, a reason, a model, a tool, which runs."""

    since: str = "30d"
    """One of `WINDOWS`."""
    reason: str = ""
    """A stop reason, `UNFINISHED`, or empty for all."""
    model: str = ""
    """Only runs of this model (empty: all)."""
    tool: str = ""
    """Only runs that called this tool (empty: all)."""
    scope: str = "top"
    """``top``: the runs users started (a child run counts in its parent); ``all``: every
    run, each with its own spend."""

    def where(self, now: float) -> tuple[str, list[Any]]:
        """The conditions on ``runs r`` for this query, and their parameters."""
        terms: list[str] = ["1"]
        params: list[Any] = []
        seconds = WINDOWS[self.since][1]
        if seconds is not None:
            terms.append("r.started_at >= ?")
            params.append(now - seconds)
        if self.scope == "top":
            terms.append("r.parent_run_id IS NULL")
        if self.reason == UNFINISHED:
            terms.append("r.stop_reason IS NULL")
        elif self.reason:
            terms.append("r.stop_reason = ?")
            params.append(self.reason)
        if self.model:
            terms.append("r.model = ?")
            params.append(self.model)
        if self.tool:
            terms.append(
                "EXISTS (SELECT 1 FROM finished_calls f WHERE f.run_id = r.run_id AND f.name = ?)"
            )
            params.append(self.tool)
        return " AND ".join(terms), params


@dataclass(slots=True)
class Tally:
    """Runs counted together, with what they spent."""

    runs: int = 0
    """How many."""
    cost: float = 0.0
    """Dollars they spent (0 where no price is known)."""
    tokens: int = 0
    """Tokens they used."""
    cycles: int = 0
    """Cycles they ran."""
    reasons: Counter[str] = field(default_factory=Counter)
    """How many stopped for each reason (`UNFINISHED` for none)."""

    def add(self, reason: str, runs: int, cost: float, tokens: int, cycles: int) -> None:
        """Count a group of runs that stopped for ``reason``."""
        self.runs += runs
        self.cost += cost
        self.tokens += tokens
        self.cycles += cycles
        self.reasons[reason] += runs

    @property
    def completed(self) -> float:
        """The share of the runs that completed (0 to 1)."""
        return self.reasons["completed"] / self.runs if self.runs else 0.0

    @property
    def mean_cycles(self) -> float:
        """Cycles per run."""
        return self.cycles / self.runs if self.runs else 0.0


@dataclass(frozen=True, slots=True)
class Segment:
    """One reason's part of a stacked bar, in SVG units."""

    reason: str
    """The stop reason (its colour)."""
    y: float
    """Top."""
    height: float
    """Height."""
    count: int
    """Runs."""


@dataclass(frozen=True, slots=True)
class Column:
    """One period of the runs-per-period chart: a stacked bar and its cost."""

    label: str
    """The period (a day, a week or a month)."""
    x: float
    """Left edge."""
    width: float
    """Width."""
    segments: list[Segment]
    """The bar, by reason, bottom first."""
    tally: Tally
    """What the period's runs were and spent."""
    cost_y: float
    """Where its cost lies on the cost line."""


@dataclass(slots=True)
class ToolRow:
    """One tool, across the runs selected."""

    name: str
    calls: int
    runs: int
    failed: int
    """Calls that failed, were invalid or were interrupted."""
    refused: int
    """Calls refused as repeats (``not_executed``)."""
    mean_seconds: float
    max_seconds: float
    stalled_runs: int
    """Runs that called it and ended ``stalled``."""


@dataclass(slots=True)
class NoteRow:
    """Notes the runs were given instead of a stop, about one thing."""

    about: str
    """``stalled``, ``tool_error``, ``budget``..."""
    notes: int
    runs: int
    completed: int
    """Runs given such a note that still completed."""


@dataclass(slots=True)
class Overview:
    """Everything the overview page shows."""

    query: OverviewQuery
    total: Tally
    by_model: list[tuple[str, Tally]]
    columns: list[Column]
    period: str
    """``day``, ``week`` or ``month``: what a column is."""
    max_runs: int
    """Runs of the busiest period (the top of the chart's scale)."""
    max_cost: float
    """Cost of the costliest period."""
    tools: list[ToolRow]
    notes: list[NoteRow]
    left_cycles: int
    """Cycles the runs that stopped ``stalled`` or ``tool_error`` had left under their
    own cycle limit."""
    left_cost: float
    """What those cycles would have cost at each run's own cost per cycle."""
    early_runs: int
    """Runs that stopped ``stalled`` or ``tool_error``."""
    early_known: int
    """Those of them whose cycle limit is stored (with their agent spec)."""
    models: list[tuple[str, int]]
    """Every model of the window with its runs (for the filter)."""
    tool_names: list[str]
    """Every tool name (for the filter)."""
    taken_at: float
    """When the figures were read."""
    seconds: float = 0.0
    """How long reading them took."""

    @property
    def reasons(self) -> list[tuple[str, int, float]]:
        """Each reason that occurred: its runs and their share, most frequent first."""
        total = self.total.runs or 1
        found = [(r, n, n / total) for r, n in self.total.reasons.items() if n]
        return sorted(found, key=lambda item: (-item[1], REASONS.index(item[0])))


def _spend(scope: str) -> tuple[str, str]:
    """The cost and token expressions of a run, its children's spend taken out for ``all``."""
    cost = "COALESCE(json_extract(r.usage, '$.cost'), 0)"
    tokens = (
        "COALESCE(json_extract(r.usage, '$.input_tokens'), 0) + "
        "COALESCE(json_extract(r.usage, '$.output_tokens'), 0)"
    )
    if scope == "top":
        return cost, tokens
    return f"({cost} - COALESCE(k.cost, 0))", f"({tokens} - COALESCE(k.tokens, 0))"


_KIDS = (
    "LEFT JOIN (SELECT parent_run_id AS id, SUM(COALESCE(json_extract(usage, '$.cost'), 0)) AS "
    "cost, SUM(COALESCE(json_extract(usage, '$.input_tokens'), 0) + COALESCE(json_extract("
    "usage, '$.output_tokens'), 0)) AS tokens FROM runs WHERE parent_run_id IS NOT NULL "
    "GROUP BY parent_run_id) k ON k.id = r.run_id"
)


def _period(store: RunStore, query: OverviewQuery, now: float) -> tuple[str, str]:
    """The chart's period (and its strftime format) for the window's length."""
    window = WINDOWS[query.since][1]
    if window is None:
        ((first,),) = store.query("SELECT MIN(started_at) FROM runs")
        seconds = now - (first or now)
    else:
        seconds = float(window)
    if seconds <= 62 * 86_400:
        return "day", "%Y-%m-%d"
    if seconds <= 2 * 366 * 86_400:
        return "week", "%Y week %W"
    return "month", "%Y-%m"


def load_overview(store: RunStore, query: OverviewQuery) -> Overview:
    """Read the overview of the runs ``query`` selects."""
    began = time.perf_counter()
    now = time.time()
    where, params = query.where(now)
    period, fmt = _period(store, query, now)
    cost, tokens = _spend(query.scope)
    kids = _KIDS if query.scope == "all" else ""
    limit = "json_extract(r.recipe, '$.limits.max_cycles')"
    early = f"r.stop_reason IN ('stalled', 'tool_error') AND {limit} > r.cycles"
    rows = store.query(
        f"SELECT r.model, COALESCE(r.stop_reason, ?), strftime(?, r.started_at, 'unixepoch', "
        f"'localtime'), COUNT(*), SUM({cost}), SUM({tokens}), SUM(r.cycles), "
        f"SUM(CASE WHEN {early} THEN {limit} - r.cycles ELSE 0 END), "
        f"SUM(CASE WHEN {early} AND r.cycles > 0 THEN ({limit} - r.cycles) * {cost} / r.cycles "
        f"ELSE 0 END), SUM(r.stop_reason IN ('stalled', 'tool_error')), "
        f"SUM(r.stop_reason IN ('stalled', 'tool_error') AND {limit} IS NOT NULL) "
        f"FROM runs r {kids} WHERE {where} GROUP BY 1, 2, 3",
        [UNFINISHED, fmt, *params],
    )
    total = Tally()
    models: dict[str, Tally] = defaultdict(Tally)
    periods: dict[str, Tally] = defaultdict(Tally)
    left_cycles, left_cost, early_runs, early_known = 0, 0.0, 0, 0
    for row in rows:
        model, reason, when, runs, spent, used, cycles, left, left_spent, early, known = row
        figures = (reason, runs, float(spent or 0.0), int(used or 0), int(cycles or 0))
        total.add(*figures)
        models[model].add(*figures)
        periods[when].add(*figures)
        left_cycles += int(left or 0)
        left_cost += float(left_spent or 0.0)
        early_runs += int(early or 0)
        early_known += int(known or 0)
    by_model = sorted(models.items(), key=lambda item: -item[1].runs)[:ROWS]
    columns, max_runs, max_cost = _columns(periods)
    return Overview(
        query=query,
        total=total,
        by_model=by_model,
        columns=columns,
        period=period,
        max_runs=max_runs,
        max_cost=max_cost,
        tools=_tools(store, where, params),
        notes=_notes(store, where, params),
        left_cycles=left_cycles,
        left_cost=max(0.0, left_cost),
        early_runs=early_runs,
        early_known=early_known,
        models=_model_choices(store, query, now),
        tool_names=store.tool_names(),
        taken_at=now,
        seconds=time.perf_counter() - began,
    )


CHART_WIDTH = 720
"""Width of the runs-per-period chart, in SVG units."""
CHART_HEIGHT = 160
"""Height of its bars' area."""


def _columns(periods: dict[str, Tally]) -> tuple[list[Column], int, float]:
    """Lay the periods out as stacked columns, oldest first (the most recent 62)."""
    shown = sorted(periods)[-62:]
    if not shown:
        return [], 0, 0.0
    max_runs = max(periods[p].runs for p in shown)
    max_cost = max(periods[p].cost for p in shown)
    step = CHART_WIDTH / len(shown)
    width = min(48.0, max(1.0, step * 0.7))
    columns = []
    for index, label in enumerate(shown):
        tally = periods[label]
        bottom = float(CHART_HEIGHT)
        segments = []
        for reason in REASONS:
            count = tally.reasons[reason]
            if not count:
                continue
            height = count / max_runs * (CHART_HEIGHT - 4)
            bottom -= height
            segments.append(Segment(reason, round(bottom, 2), round(height, 2), count))
        cost_y = CHART_HEIGHT - (tally.cost / max_cost * (CHART_HEIGHT - 4) if max_cost else 0)
        columns.append(
            Column(
                label,
                round(index * step + step * 0.5 - width / 2, 2),
                round(width, 2),
                segments,
                tally,
                round(cost_y, 2),
            )
        )
    return columns, max_runs, max_cost


def _tools(store: RunStore, where: str, params: list[Any]) -> list[ToolRow]:
    rows = store.query(
        "SELECT f.name, COUNT(*), COUNT(DISTINCT f.run_id), "
        "SUM(f.outcome IN ('failed', 'invalid', 'interrupted')), "
        "SUM(f.outcome = 'not_executed'), AVG(f.duration), MAX(f.duration), "
        "COUNT(DISTINCT CASE WHEN r.stop_reason = 'stalled' THEN f.run_id END) "
        f"FROM runs r JOIN finished_calls f ON f.run_id = r.run_id WHERE {where} "
        "GROUP BY f.name ORDER BY COUNT(*) DESC, f.name LIMIT ?",
        [*params, ROWS],
    )
    return [
        ToolRow(name, calls, runs, int(failed), int(refused), mean or 0.0, most or 0.0, stalled)
        for name, calls, runs, failed, refused, mean, most, stalled in rows
    ]


def _notes(store: RunStore, where: str, params: list[Any]) -> list[NoteRow]:
    rows = store.query(
        "SELECT json_extract(e.data, '$.about'), COUNT(*), COUNT(DISTINCT e.run_id), "
        "COUNT(DISTINCT CASE WHEN r.stop_reason = 'completed' THEN e.run_id END) "
        "FROM runs r JOIN events e ON e.run_id = r.run_id AND e.type = 'nudged' "
        f"WHERE {where} GROUP BY 1 ORDER BY 2 DESC",
        params,
    )
    return [NoteRow(str(about), notes, runs, completed) for about, notes, runs, completed in rows]


def _model_choices(store: RunStore, query: OverviewQuery, now: float) -> list[tuple[str, int]]:
    """The models of the window (other filters aside), most used first."""
    wide = OverviewQuery(since=query.since, scope=query.scope)
    where, params = wide.where(now)
    rows = store.query(
        f"SELECT r.model, COUNT(*) FROM runs r WHERE {where} GROUP BY 1 ORDER BY 2 DESC LIMIT ?",
        [*params, ROWS],
    )
    return [(str(model), int(count)) for model, count in rows]


def overview_query(values: dict[str, str]) -> OverviewQuery:
    """The query of the overview's address (unknown values fall back to the defaults)."""
    since = values.get("since", "30d")
    reason = values.get("reason", "")
    scope = values.get("scope", "top")
    return OverviewQuery(
        since=since if since in WINDOWS else "30d",
        reason=reason if reason in REASONS else "",
        model=values.get("model", "").strip()[:200],
        tool=values.get("tool", "").strip()[:200],
        scope=scope if scope in ("top", "all") else "top",
    )


def share(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole`` (``12 %``; ``-`` of nothing)."""
    if not whole:
        return "-"
    value = part / whole * 100
    return f"{value:.0f} %" if value >= 1 or value == 0 else "<1 %"
