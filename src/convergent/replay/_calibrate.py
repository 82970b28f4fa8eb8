"""Choose the policy's thresholds from labelled runs: cut no successful run, save the most.

The knobs are a table: each a name, its candidate values (the most lenient first) and
the settings a value stands for. Only knobs whose settings the installed convergent
takes are tried, and a knob superseded by a newer one (``stall_nudges`` by ``notes``)
is left out where the newer one exists, so the same table serves every version.

The search goes through the knobs in order, one at a time, starting from the library's
own defaults: every candidate value of a knob is replayed with the values chosen so far
for the others, and the knob keeps the value that cuts no successful run (or, with
``allow_real_loops``, none by the policy's fault) and saves the most recorded replies in
failed runs; among equals, the one that stops (then nudges) the most real loops of
failed runs, then the default, then the more lenient value. Where no value cuts
nothing, the knob keeps the one that cuts fewest. Every replay is a point of the
trade-off curve: successful runs cut against failed-run replies saved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from convergent.exceptions import UserError
from convergent.replay._report import ReplayReport
from convergent.replay._settings import Settings, same_policy, setting_names

__all__ = ["KNOBS", "Calibration", "Knob", "Point", "available_knobs", "search_knobs"]


@dataclass(frozen=True, slots=True)
class Knob:
    """One threshold of the policy, and the values calibration tries for it."""

    name: str
    """The knob, as reports name it."""
    values: tuple[Any, ...]
    """Candidate values, the most lenient first."""
    settings: Callable[[Any], dict[str, Any]]
    """The settings (names and values) a value stands for."""
    superseded_by: str | None = None
    """A knob that replaces this one where the installed convergent has it."""

    def needs(self) -> set[str]:
        """The setting names this knob sets."""
        return set(self.settings(self.values[0]))


def _one(name: str) -> Callable[[Any], dict[str, Any]]:
    return lambda value: {name: value}


KNOBS: tuple[Knob, ...] = (
    Knob("max_repeated_calls", (6, 5, 4, 3, 2), _one("max_repeated_calls")),
    Knob("max_cycle_length", (2, 3, 4, 5, 6), _one("max_cycle_length")),
    Knob("notes", (2, 1, 0), _one("notes")),
    Knob("stall_nudges", (2, 1, 0), _one("stall_nudges"), superseded_by="notes"),
    Knob("on_tool_error", ("continue", "stop"), _one("on_tool_error")),
    Knob("max_repeated_failures", (None, 6, 5, 4, 3, 2, 1), _one("max_repeated_failures")),
    Knob(
        "max_consecutive_tool_errors",
        (None, 6, 5, 4, 3, 2, 1),
        _one("max_consecutive_tool_errors"),
        superseded_by="max_repeated_failures",
    ),
    Knob("max_failing_steps", (None, 16, 12, 8, 6, 4, 3, 2), _one("max_failing_steps")),
    Knob("max_repeated_mistakes", (None, 6, 5, 4, 3, 2, 1), _one("max_repeated_mistakes")),
    Knob("max_mistakes", (None, 16, 12, 8, 6, 4, 3, 2, 1), _one("max_mistakes")),
    Knob("max_rejected_answers", (None, 5, 3, 2, 1), _one("max_rejected_answers")),
    Knob("wait_gap", (1, 2, 5, 10, 30, None), _one("wait_gap")),
    Knob("max_tool_calls", (None, 400, 200, 100, 50, 30, 20), _one("max_tool_calls")),
    Knob("max_calls_per_tool", (None, 200, 100, 50, 25, 10), _one("max_calls_per_tool")),
)
"""Every knob calibration knows, in the order it tries them."""


def available_knobs(knobs: Sequence[Knob] = KNOBS) -> tuple[Knob, ...]:
    """The knobs the installed convergent takes (a superseded one only without its heir)."""
    names = setting_names()
    usable = [knob for knob in knobs if knob.needs() <= set(names)]
    present = {knob.name for knob in usable}
    return tuple(knob for knob in usable if knob.superseded_by not in present)


@dataclass(frozen=True, slots=True)
class Point:
    """One replay of the search: a setting tried, and what it did."""

    knob: str
    """The knob varied ("" for the library's defaults)."""
    value: Any
    """Its value."""
    settings: Mapping[str, Any]
    """Every setting of this replay."""
    successful: int
    """Successful runs."""
    successful_cut: int
    """Successful runs cut short."""
    policy_faults: int
    """Of those, cut without a real loop."""
    failed: int
    """Failed runs."""
    failed_stopped: int
    """Failed runs stopped."""
    failed_replies: int
    """Recorded replies of failed runs."""
    replies_saved: int
    """Recorded replies of failed runs the stops left unplayed."""
    tokens_saved: int
    """Their tokens, where the recordings have usage."""
    loops: tuple[int, int, int]
    """Real loops of failed runs: stopped, nudged, missed."""
    notes: int
    """Calls answered with a note."""

    @classmethod
    def of(cls, knob: str, value: Any, settings: Mapping[str, Any], report: ReplayReport) -> Point:
        """The point a replay's report makes."""
        total = report.total
        return cls(
            knob=knob,
            value=value,
            settings=dict(settings),
            successful=total.runs["successful"],
            successful_cut=total.successful_cut,
            policy_faults=total.policy_faults,
            failed=total.runs["failed"],
            failed_stopped=total.failed_stopped,
            failed_replies=total.replies["failed"],
            replies_saved=total.saved_replies["failed"],
            tokens_saved=total.saved_tokens["failed"],
            loops=total.loop_counts("failed"),
            notes=total.notes,
        )

    def cuts(self, allow_real_loops: bool) -> int:
        """Successful runs cut that count against the policy."""
        return self.policy_faults if allow_real_loops else self.successful_cut

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "knob": self.knob,
            "value": self.value,
            "settings": dict(self.settings),
            "successful": self.successful,
            "successful_cut": self.successful_cut,
            "policy_faults": self.policy_faults,
            "failed": self.failed,
            "failed_stopped": self.failed_stopped,
            "failed_replies": self.failed_replies,
            "replies_saved": self.replies_saved,
            "tokens_saved": self.tokens_saved,
            "real_loops_failed": dict(
                zip(("stopped", "nudged", "missed"), self.loops, strict=True)
            ),
            "notes": self.notes,
        }


@dataclass
class Calibration:
    """The result of a calibration: the settings chosen, and every point tried."""

    allow_real_loops: bool
    """Whether successful runs cut at a real loop were allowed."""
    baseline: Point
    """The library's defaults."""
    chosen: dict[str, Any] = field(default_factory=dict)
    """The settings chosen (knobs left at the default are absent)."""
    best: Point | None = None
    """What the chosen settings do."""
    points: list[Point] = field(default_factory=list)
    """Every replay of the search, in order (the baseline first)."""
    refused: list[str] = field(default_factory=list)
    """Candidate values the installed convergent refused, with why."""
    report: ReplayReport | None = None
    """The replay of the chosen settings (kept alone: the others are dropped as the
    search goes, so memory does not grow with the points)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "allow_real_loops": self.allow_real_loops,
            "chosen": dict(self.chosen),
            "baseline": self.baseline.to_dict(),
            "best": None if self.best is None else self.best.to_dict(),
            "points": [point.to_dict() for point in self.points],
            "refused": list(self.refused),
        }


def _rank(point: Point, allow_real_loops: bool) -> tuple[int, int, int, int]:
    """Fewest cuts, then most replies saved, then most real loops stopped, then nudged."""
    return (-point.cuts(allow_real_loops), point.replies_saved, point.loops[0], point.loops[1])


def search_knobs(
    evaluate: Callable[[Settings], ReplayReport],
    *,
    knobs: Sequence[Knob] | None = None,
    allow_real_loops: bool = False,
    on_point: Callable[[Point], None] | None = None,
) -> Calibration:
    """Search the knobs one at a time: cut no successful run, save the most in failed ones.

    Args:
        evaluate: Replays every run under the given settings and reports.
        knobs: The knobs to try, in order (default: `available_knobs`).
        allow_real_loops: Count only successful runs cut by the policy's fault.
        on_point: Called with each point as it is measured.

    Raises:
        UserError: If the runs have no success labels to calibrate against.
    """
    knobs = available_knobs() if knobs is None else tuple(knobs)
    first = evaluate({})
    baseline = Point.of("", None, {}, first)
    if baseline.successful + baseline.failed == 0:
        raise UserError("--calibrate needs runs with success labels (a reward, --success ...)")
    result = Calibration(
        allow_real_loops=allow_real_loops, baseline=baseline, points=[baseline], report=first
    )
    if on_point is not None:
        on_point(baseline)
    current: dict[str, Any] = {}
    best = baseline
    for knob in knobs:
        tried: list[tuple[Point, ReplayReport | None]] = [(best, None)]  # the knob as it is
        for value in knob.values:
            settings = {**current, **knob.settings(value)}
            try:
                same = same_policy(settings, current)
            except UserError as exc:
                result.refused.append(f"{knob.name}={value!r}: {exc}")
                continue
            report: ReplayReport | None = None
            if same:  # the value the knob has now: measured already
                point = dataclasses.replace(best, knob=knob.name, value=value, settings=settings)
            else:
                report = evaluate(settings)
                point = Point.of(knob.name, value, settings, report)
            result.points.append(point)
            if on_point is not None:
                on_point(point)
            if report is not None:
                tried = [max(tried, key=lambda item: _rank(item[0], allow_real_loops))]
                tried.append((point, report))
        # the first of equals wins: the knob as it is, then the more lenient value
        top, top_report = max(tried, key=lambda item: _rank(item[0], allow_real_loops))
        if top is not best and top_report is not None:
            best = top
            current = dict(top.settings)
            result.report = top_report
    result.chosen = current
    result.best = best
    return result
