"""The figures of a replay, per corpus and in total, counted as the verdicts stream in.

Counts are kept for every run; the runs themselves only where there is something to
show (a stop, a real loop), so a report's size follows its stops, not its runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from convergent.replay._recording import Malformed
from convergent.replay._verdict import (
    CUT_FAULT,
    CUT_REAL_LOOP,
    FAILED_STOPPED,
    PLAYED_THROUGH,
    UNLABELLED_STOPPED,
    RunVerdict,
)

__all__ = ["CorpusFigures", "ReplayReport", "report_of"]

_SIDES = ("successful", "failed", "unlabelled")


def _side(success: bool | None) -> str:
    return {True: "successful", False: "failed", None: "unlabelled"}[success]


@dataclass
class CorpusFigures:
    """What one policy did to one corpus (or to all of them)."""

    name: str
    """The corpus: the path given, or ``all``."""
    runs: Counter[str] = field(default_factory=Counter)
    """Runs by side: ``successful``, ``failed``, ``unlabelled``."""
    verdicts: Counter[str] = field(default_factory=Counter)
    """Runs by verdict."""
    reasons: Counter[str] = field(default_factory=Counter)
    """Cut turns by stop reason."""
    models: Counter[str] = field(default_factory=Counter)
    """Runs by recorded model."""
    turns: int = 0
    """Recorded turns."""
    replies: Counter[str] = field(default_factory=Counter)
    """Recorded replies by side."""
    tokens: Counter[str] = field(default_factory=Counter)
    """Recorded tokens by side, where recordings have usage."""
    saved_replies: Counter[str] = field(default_factory=Counter)
    """Recorded replies the stops left unplayed, by side (cycles saved or lost)."""
    saved_tokens: Counter[str] = field(default_factory=Counter)
    """Their tokens, where recordings have usage."""
    saved_cost: dict[str, float] = field(default_factory=dict)
    """Their cost, where recordings have it."""
    loops: Counter[str] = field(default_factory=Counter)
    """Runs with a real loop, by ``side fate`` (``failed stopped``...)."""
    notes: int = 0
    """Calls answered with a note, the run going on."""
    answered_after_stop: int = 0
    """Cut turns in which the loop asked for an answer after the stop."""
    malformed: int = 0
    """Runs (or files) that could not be read and were skipped."""
    stopped: list[RunVerdict] = field(default_factory=list)
    """Every run the loop cut, in input order."""
    looping: list[RunVerdict] = field(default_factory=list)
    """Every run whose real loop was nudged or missed (stopped ones are in ``stopped``)."""
    nudged: list[RunVerdict] = field(default_factory=list)
    """Every other run the loop answered with a note and did not stop."""

    def add(self, verdict: RunVerdict) -> None:
        """Count one judged run."""
        side = _side(verdict.success)
        self.runs[side] += 1
        self.verdicts[verdict.verdict] += 1
        self.models[verdict.model or "(unnamed)"] += 1
        self.turns += verdict.turns
        self.replies[side] += verdict.replies
        self.tokens[side] += verdict.tokens or 0
        self.notes += verdict.notes
        for stop in verdict.stops:
            self.reasons[stop.reason] += 1
            self.answered_after_stop += stop.answered
        if verdict.stops:
            self.saved_replies[side] += verdict.replies_saved
            self.saved_tokens[side] += verdict.tokens_saved or 0
            if verdict.cost_saved is not None:
                self.saved_cost[side] = self.saved_cost.get(side, 0.0) + verdict.cost_saved
            self.stopped.append(verdict)
        if verdict.loop is not None:
            self.loops[f"{side} {verdict.loop.fate}"] += 1
            if not verdict.stops and verdict.loop.fate != "stopped":
                self.looping.append(verdict)
        shown = bool(verdict.stops) or (verdict.loop is not None and verdict.loop.fate != "stopped")
        if verdict.nudges and not shown:
            self.nudged.append(verdict)

    def merge(self, other: CorpusFigures) -> None:
        """Add another corpus's figures to these."""
        for name in ("runs", "verdicts", "reasons", "models", "replies", "tokens"):
            getattr(self, name).update(getattr(other, name))
        for name in ("saved_replies", "saved_tokens", "loops"):
            getattr(self, name).update(getattr(other, name))
        for side, cost in other.saved_cost.items():
            self.saved_cost[side] = self.saved_cost.get(side, 0.0) + cost
        self.turns += other.turns
        self.notes += other.notes
        self.answered_after_stop += other.answered_after_stop
        self.malformed += other.malformed
        self.stopped += other.stopped
        self.looping += other.looping
        self.nudged += other.nudged

    @property
    def successful_cut(self) -> int:
        """Successful runs cut short (real loops and the policy's fault)."""
        return self.verdicts[CUT_REAL_LOOP] + self.verdicts[CUT_FAULT]

    @property
    def policy_faults(self) -> int:
        """Successful runs cut without a real loop."""
        return self.verdicts[CUT_FAULT]

    @property
    def failed_stopped(self) -> int:
        """Failed runs the loop stopped."""
        return self.verdicts[FAILED_STOPPED]

    def loop_counts(self, side: str = "failed") -> tuple[int, int, int]:
        """Real loops of one side's runs: stopped, nudged, missed."""
        return tuple(self.loops[f"{side} {fate}"] for fate in ("stopped", "nudged", "missed"))  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: the counts, and every stop and loop with its evidence."""
        return {
            "name": self.name,
            "runs": {side: self.runs[side] for side in _SIDES},
            "malformed": self.malformed,
            "models": dict(self.models.most_common()),
            "turns": self.turns,
            "replies": {side: self.replies[side] for side in _SIDES},
            "verdicts": {
                key: self.verdicts[key]
                for key in (
                    PLAYED_THROUGH,
                    CUT_REAL_LOOP,
                    CUT_FAULT,
                    FAILED_STOPPED,
                    UNLABELLED_STOPPED,
                )
            },
            "successful_cut": self.successful_cut,
            "policy_faults": self.policy_faults,
            "failed_stopped": self.failed_stopped,
            "stop_reasons": dict(self.reasons.most_common()),
            "real_loops": {
                side: dict(
                    zip(("stopped", "nudged", "missed"), self.loop_counts(side), strict=True)
                )
                for side in _SIDES
            },
            "saved": {
                side: {
                    "replies": self.saved_replies[side],
                    "tokens": self.saved_tokens[side] or None,
                    "cost": self.saved_cost.get(side),
                }
                for side in _SIDES
            },
            "notes": self.notes,
            "answered_after_stop": self.answered_after_stop,
            "stopped": [_verdict_dict(verdict) for verdict in self.stopped],
            "loops_not_stopped": [_verdict_dict(verdict) for verdict in self.looping],
            "nudged": [_verdict_dict(verdict) for verdict in self.nudged],
        }


def _verdict_dict(verdict: RunVerdict) -> dict[str, Any]:
    data = asdict(verdict)
    data["verdict"] = verdict.verdict
    data["replies_saved"] = verdict.replies_saved
    data["tokens_saved"] = verdict.tokens_saved
    data["cost_saved"] = verdict.cost_saved
    return data


@dataclass
class ReplayReport:
    """A replay of recorded runs under one policy: figures per corpus and in total."""

    settings: Mapping[str, Any]
    """The settings replayed (empty: the installed library's defaults)."""
    threshold: int
    """Unchanged repeats that make a real loop."""
    corpora: dict[str, CorpusFigures] = field(default_factory=dict)
    """Figures per corpus (each path given), in input order."""
    malformed: list[Malformed] = field(default_factory=list)
    """Runs and files that could not be read, with why."""

    def add(self, corpus: str, item: RunVerdict | Malformed) -> None:
        """Count one judged (or malformed) run of ``corpus``."""
        figures = self.corpora.setdefault(corpus, CorpusFigures(corpus))
        if isinstance(item, Malformed):
            self.malformed.append(item)
            figures.malformed += 1
            return
        figures.add(item)

    @property
    def total(self) -> CorpusFigures:
        """Figures over every corpus."""
        total = CorpusFigures("all")
        for figures in self.corpora.values():
            total.merge(figures)
        return total

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form of the whole report."""
        return {
            "settings": dict(self.settings),
            "loop_threshold": self.threshold,
            "corpora": [figures.to_dict() for figures in self.corpora.values()],
            "total": {
                key: value
                for key, value in self.total.to_dict().items()
                if key not in ("stopped", "loops_not_stopped", "nudged")
            },
            "malformed": [item.describe() for item in self.malformed],
        }


def report_of(
    items: Iterable[tuple[str, RunVerdict | Malformed]],
    settings: Mapping[str, Any],
    threshold: int,
) -> ReplayReport:
    """Count a stream of judged runs into a report."""
    report = ReplayReport(settings=dict(settings), threshold=threshold)
    for corpus, item in items:
        report.add(corpus, item)
    return report
