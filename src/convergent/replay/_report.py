"""The figures of a replay, per corpus and in total, counted as the verdicts stream in.

Counts are kept for every run; the runs themselves only where there is something to
show (a stop, a real loop, something the reader could not read or had to guess), so a
report's size follows what it shows, not its runs. `ReplayReport.headline` says the
answer in one sentence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from convergent.replay._recording import GAPS, Malformed, Skipped
from convergent.replay._verdict import (
    CUT_FAULT,
    CUT_REAL_LOOP,
    FAILED_STOPPED,
    PARTIAL,
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
    skipped: int = 0
    """Lines and files that hold no run (headers, metadata, other JSON), passed over."""
    gaps: Counter[str] = field(default_factory=Counter)
    """What the readers could not read or had to guess, summed (keys of `GAPS`)."""
    gapped_runs: Counter[str] = field(default_factory=Counter)
    """Runs with each kind of gap."""
    files: dict[str, Counter[str]] = field(default_factory=dict)
    """The gaps of each file that has some."""
    gapped: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    """Each run with gaps, by its id, and its gaps."""
    no_final_answer: int = 0
    """Runs whose recording ends without a final answer."""
    unlabelled_why: Counter[str] = field(default_factory=Counter)
    """Runs a label rule could not label, by why."""
    unplayed: int = 0
    """Recorded replies never played in runs replayed in part."""
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
        self.unplayed += verdict.unplayed
        self.no_final_answer += not verdict.final_answer
        if verdict.unlabelled_why:
            self.unlabelled_why[verdict.unlabelled_why] += 1
        if verdict.gaps:
            found = {key: count for key, count in verdict.gaps.items() if count}
            if found:
                self.gaps.update(found)
                self.gapped_runs.update(found.keys())
                self.files.setdefault(verdict.source, Counter()).update(found)
                self.gapped.append((verdict.id, found))
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
        for name in (
            "saved_replies",
            "saved_tokens",
            "loops",
            "gaps",
            "gapped_runs",
            "unlabelled_why",
        ):
            getattr(self, name).update(getattr(other, name))
        for file, gaps in other.files.items():
            self.files.setdefault(file, Counter()).update(gaps)
        for side, cost in other.saved_cost.items():
            self.saved_cost[side] = self.saved_cost.get(side, 0.0) + cost
        self.turns += other.turns
        self.notes += other.notes
        self.answered_after_stop += other.answered_after_stop
        self.malformed += other.malformed
        self.skipped += other.skipped
        self.no_final_answer += other.no_final_answer
        self.unplayed += other.unplayed
        self.gapped += other.gapped
        self.stopped += other.stopped
        self.looping += other.looping
        self.nudged += other.nudged

    @property
    def read(self) -> int:
        """Runs read and replayed."""
        return sum(self.runs.values())

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
            "skipped": self.skipped,
            "reading": {
                "gaps": {key: self.gaps[key] for key in GAPS},
                "runs_with_gaps": {key: self.gapped_runs[key] for key in GAPS},
                "no_final_answer": self.no_final_answer,
                "replayed_in_part": self.verdicts[PARTIAL],
                "replies_not_replayed": self.unplayed,
                "unlabelled_why": dict(self.unlabelled_why.most_common()),
                "files": {file: dict(gaps) for file, gaps in self.files.items()},
                "runs": [{"id": run, "gaps": gaps} for run, gaps in self.gapped],
            },
            "models": dict(self.models.most_common()),
            "turns": self.turns,
            "replies": {side: self.replies[side] for side in _SIDES},
            "verdicts": {
                key: self.verdicts[key]
                for key in (
                    PLAYED_THROUGH,
                    PARTIAL,
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
    skipped: list[Skipped] = field(default_factory=list)
    """Lines and files passed over (they hold no run), with what they are."""
    labelled_by_rule: bool = False
    """Whether a rule (``--success-if``) labelled the runs."""

    def add(self, corpus: str, item: RunVerdict | Malformed | Skipped) -> None:
        """Count one judged (or lost) run, or a line passed over, of ``corpus``."""
        figures = self.corpora.setdefault(corpus, CorpusFigures(corpus))
        if isinstance(item, Malformed):
            self.malformed.append(item)
            figures.malformed += 1
        elif isinstance(item, Skipped):
            self.skipped.append(item)
            figures.skipped += 1
        else:
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
            "headline": self.headline(),
            "total": _total_dict(self.total.to_dict()),
            "malformed": [item.describe() for item in self.malformed],
            "skipped": [item.describe() for item in self.skipped],
        }

    def headline(self) -> str:
        """The answer in one sentence: successful runs cut, and what failed runs save."""
        total = self.total
        return headline(total, self.labelled_by_rule)


def _total_dict(data: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k not in ("stopped", "loops_not_stopped", "nudged")}
    data["reading"] = {k: v for k, v in data["reading"].items() if k not in ("files", "runs")}
    return data


def _count(number: int, one: str, many: str | None = None) -> str:
    return f"{number:,} {one if number == 1 else many or one + 's'}"


def headline(figures: CorpusFigures, labelled_by_rule: bool = False) -> str:
    """One sentence: what the policy does to the successful runs and saves on the failed.

    ``None of your 4 successful runs would be cut; 9 replies and 5,127 tokens of your 2
    failed runs saved.``, then what could not be read, where something could not.
    """
    runs = figures.runs
    if not figures.read:
        sentence = "No run was read"
    elif not runs["successful"] and not runs["failed"]:
        stopped = figures.verdicts[UNLABELLED_STOPPED]
        hint = (
            f"--success-if could not label {'it' if figures.read == 1 else 'them'}"
            if labelled_by_rule
            else "give --success or --success-if"
        )
        whose = (
            "your run has no"
            if figures.read == 1
            else f"none of your {_count(figures.read, 'run')} has a"
        )
        sentence = f"{whose} success label ({hint}); {stopped:,} would be stopped"
    else:
        sentence = _successful(figures) + "; " + _failed(figures)
        if runs["unlabelled"]:
            sentence += f"; {_count(runs['unlabelled'], 'run')} without a label"
    lost = []
    if figures.malformed:
        lost.append(
            _count(figures.malformed, "run or file", "runs or files") + " could not be read"
        )
    guessed = sum(1 for _ in figures.gapped)
    if guessed:
        lost.append(_count(guessed, "run") + " read with gaps or guesses")
    if figures.verdicts[PARTIAL]:
        lost.append(_count(figures.verdicts[PARTIAL], "run") + " replayed only in part")
    return sentence[0].upper() + sentence[1:] + "." + (f" ({'; '.join(lost)}.)" if lost else "")


def _successful(figures: CorpusFigures) -> str:
    count = figures.runs["successful"]
    if not count:
        return "no run is labelled successful"
    mine = f"your {_count(count, 'successful run')}"
    if not figures.successful_cut:
        return f"none of {mine} would be cut" if count > 1 else f"{mine} would not be cut"
    faults, loops = figures.policy_faults, figures.verdicts[CUT_REAL_LOOP]
    how = ", ".join(
        part
        for part in (
            f"{faults:,} by the policy's fault" if faults else "",
            f"{loops:,} at a real loop" if loops else "",
        )
        if part
    )
    return f"{figures.successful_cut:,} of {mine} would be cut ({how})"


def _failed(figures: CorpusFigures) -> str:
    count = figures.runs["failed"]
    if not count:
        return "no run is labelled failed"
    replies = figures.saved_replies["failed"]
    if not replies:
        return f"nothing saved on your {_count(count, 'failed run')}"
    saved = [_count(replies, "reply", "replies")]
    if figures.saved_tokens["failed"]:
        saved.append(_count(figures.saved_tokens["failed"], "token"))
    if figures.saved_cost.get("failed"):
        saved.append(f"${figures.saved_cost['failed']:,.2f}")
    what = saved[0] if len(saved) == 1 else ", ".join(saved[:-1]) + " and " + saved[-1]
    return (
        f"{what} of your {_count(count, 'failed run')} saved ({figures.failed_stopped:,} stopped)"
    )


def report_of(
    items: Iterable[tuple[str, RunVerdict | Malformed | Skipped]],
    settings: Mapping[str, Any],
    threshold: int,
    *,
    labelled_by_rule: bool = False,
) -> ReplayReport:
    """Count a stream of judged runs into a report."""
    report = ReplayReport(
        settings=dict(settings), threshold=threshold, labelled_by_rule=labelled_by_rule
    )
    for corpus, item in items:
        report.add(corpus, item)
    return report
