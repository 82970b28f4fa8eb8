"""The whole replay of recorded runs, and the calibration of the thresholds, from paths."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from convergent.replay._calibrate import Calibration, Knob, Point, search_knobs
from convergent.replay._declarations import Declarations
from convergent.replay._labels import Labels, load_labels
from convergent.replay._pipeline import judged_runs
from convergent.replay._report import ReplayReport, report_of

__all__ = ["calibrate", "replay"]


def _labels(success: Mapping[str, bool] | Path | None, success_if: str | None) -> Labels:
    if isinstance(success, Path):
        return load_labels(success, success_if)
    labels = load_labels(None, success_if)
    return Labels(dict(success or {}), labels.rule)


def replay(
    paths: Sequence[str | Path],
    *,
    settings: Mapping[str, Any] | None = None,
    format: str | None = None,
    success: Mapping[str, bool] | Path | None = None,
    success_if: str | None = None,
    declarations: Declarations | None = None,
    threshold: int = 3,
    workers: int = 1,
    on_read: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Replay every recorded run in ``paths`` and report what the loop did to them.

    Args:
        paths: Recording files or folders; each path is one corpus of the report.
        settings: The policy under test, as setting names and values (fields of
            `convergent.Limits` and the stop policy, keywords of `convergent.Agent`);
            default: the installed library's defaults.
        format: Read every file in this format (a name of `FORMATS`); default: detected.
        success: Success labels by run id or name (or a JSON file of them), over the
            recordings' own.
        success_if: A regular expression: a run whose final answer matches it succeeded.
        declarations: What the user declares of the tools (reads, writes, waits) and
            results (mistakes, failures), over what the readers know.
        threshold: Unchanged repeats of one call that make a real loop.
        workers: Processes that replay (1: this one).
        on_read: Called with the number of runs in each batch read (for progress).

    Raises:
        UserError: On a missing path, a file in no known format, or a bad setting.
    """
    runs = judged_runs(
        paths,
        settings=settings,
        format=format,
        labels=_labels(success, success_if),
        declarations=declarations,
        threshold=threshold,
        workers=workers,
        on_read=on_read,
    )
    return report_of(runs, settings or {}, threshold, labelled_by_rule=success_if is not None)


def calibrate(
    paths: Sequence[str | Path],
    *,
    format: str | None = None,
    success: Mapping[str, bool] | Path | None = None,
    success_if: str | None = None,
    declarations: Declarations | None = None,
    threshold: int = 3,
    workers: int = 1,
    knobs: Sequence[Knob] | None = None,
    allow_real_loops: bool = False,
    on_point: Callable[[Point], None] | None = None,
) -> tuple[Calibration, ReplayReport]:
    """Choose the thresholds that cut no successful run and save the most in failed ones.

    Every candidate is a full replay of ``paths`` (read again each time, so memory stays
    flat). Arguments as for `replay`, and:

    Args:
        paths: Recording files or folders, with success labels.
        format: As for `replay`.
        success: As for `replay`.
        success_if: As for `replay`.
        declarations: As for `replay`.
        threshold: As for `replay`.
        workers: As for `replay`.
        knobs: The knobs to search, in order (default: `available_knobs`).
        allow_real_loops: Allow cutting successful runs where the recording proves a loop.
        on_point: Called with each point of the curve as it is measured.

    Returns:
        The calibration, and the report of the chosen settings.

    Raises:
        UserError: As for `replay`, or if no run has a success label.
    """
    labels = _labels(success, success_if)

    def evaluate(settings: Mapping[str, Any]) -> ReplayReport:
        runs = judged_runs(
            paths,
            settings=settings,
            format=format,
            labels=labels,
            declarations=declarations,
            threshold=threshold,
            workers=workers,
        )
        return report_of(runs, settings, threshold, labelled_by_rule=success_if is not None)

    calibration = search_knobs(
        evaluate, knobs=knobs, allow_real_loops=allow_real_loops, on_point=on_point
    )
    assert calibration.report is not None  # the search always measures the defaults
    return calibration, calibration.report
