"""A replay report on a terminal: the answer in a sentence, a table that fits, the details.

Everything a recording holds (run names, tool names, details, paths) is shown through
`convergent._printable.printable`, so that a recording cannot send control sequences to
the reader's terminal (or through a pipe). The table fits the width given (the
terminal's, or 100 columns in a pipe); ``wide`` shows every column, unwrapped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from convergent._printable import printable
from convergent.replay._calibrate import Calibration
from convergent.replay._recording import GAPS
from convergent.replay._report import CorpusFigures, ReplayReport
from convergent.replay._verdict import PARTIAL, UNLABELLED_STOPPED, RunVerdict

__all__ = ["calibration_table", "print_report", "run_names", "safe"]

SHOWN_STOPS = 20
"""Successful runs cut listed per corpus without ``--details``."""
_SHOWN_NOTES = 5


def safe(text: object) -> str:
    """Outside text on one line, every control character shown as an escape."""
    return printable(str(text), one_line=True)


def run_names(verdicts: Iterable[RunVerdict]) -> dict[str, str]:
    """How to name each run (by id): its own name, with its id where names repeat."""
    listed = list(verdicts)
    counts = Counter(verdict.shown for verdict in listed)
    return {
        verdict.id: verdict.shown
        if counts[verdict.shown] == 1 or verdict.shown == verdict.id
        else f"{verdict.shown} [{verdict.id}]"
        for verdict in listed
    }


def _figures_table(report: ReplayReport, wide: bool) -> Table:
    corpora = list(report.corpora.values())
    rows = [*corpora, report.total] if len(corpora) > 1 else corpora
    total = report.total
    columns: list[tuple[str, Any]] = [
        ("runs: successful\n/ failed\n/ unlabelled", _side_counts),
    ]
    if total.runs["successful"] or wide:
        columns.append(("successful\ncut (policy's\nfault)", _cut))
    if total.runs["failed"] or wide:
        columns += [
            ("failed\nstopped", lambda f: f"{f.failed_stopped:,}"),
            ("real loops of\nfailed runs:\nstopped,\nnudged, missed", _loops),
            ("failed-run\nreplies\nsaved", _saved),
        ]
    if total.runs["unlabelled"] or wide:
        columns.append(("unlabelled\nstopped", lambda f: f"{f.verdicts[UNLABELLED_STOPPED]:,}"))
    if wide:
        columns += [
            ("failed-run\ntokens\nsaved", lambda f: f"{f.saved_tokens['failed']:,}"),
            ("notes", lambda f: f"{f.notes:,}"),
            ("runs not\nread", lambda f: f"{f.malformed:,}"),
            ("runs with\ngaps", lambda f: f"{len(f.gapped):,}"),
        ]
    table = Table(title=None, show_lines=False)
    table.add_column("corpus", overflow="fold", min_width=None if wide else 16)
    for name, _ in columns:
        table.add_column(name, justify="right", no_wrap=wide)
    for figures in rows:
        table.add_row(Text(safe(figures.name)), *(show(figures) for _, show in columns))
    return table


def _runs(count: int) -> str:
    return f"{count:,} run" if count == 1 else f"{count:,} runs"


def _side_counts(figures: CorpusFigures) -> str:
    runs = figures.runs
    return f"{runs['successful']:,} / {runs['failed']:,} / {runs['unlabelled']:,}"


def _cut(figures: CorpusFigures) -> str:
    return f"{figures.successful_cut:,} ({figures.policy_faults:,})"


def _loops(figures: CorpusFigures) -> str:
    return ", ".join(str(count) for count in figures.loop_counts("failed"))


def _saved(figures: CorpusFigures) -> str:
    saved, replies = figures.saved_replies["failed"], figures.replies["failed"]
    return f"{saved:,} ({100 * saved / replies:.1f}%)" if replies else f"{saved:,}"


def _stop_line(verdict: RunVerdict, name: str) -> str:
    stop = verdict.stop
    assert stop is not None
    evidence = (
        f"real loop: {safe(stop.repeat.name)} x{stop.repeat.times} with the same result"
        if stop.real_loop
        else f"no real loop (longest unchanged repeat x{stop.repeat.times})"
    )
    detail = safe(stop.detail)
    detail = detail if len(detail) <= 140 else detail[:137] + "..."
    rule = f" by {stop.rule}" if stop.rule else ""
    return (
        f"{verdict.verdict}: {safe(name)}: {stop.reason}{rule} ({detail}); {evidence}; "
        f"turn {stop.turn + 1}, reply {stop.played} of {stop.recorded}, "
        f"{stop.replies_left} replies left"
    )


def _reading_lines(figures: CorpusFigures) -> list[str]:
    """What could not be read, was guessed or passed over in a corpus, in words."""
    lines = []
    for key, words in GAPS.items():
        if figures.gaps[key]:
            lines.append(f"{figures.gaps[key]:,} {words}, in {_runs(figures.gapped_runs[key])}")
    if figures.verdicts[PARTIAL]:
        lines.append(
            f"{_runs(figures.verdicts[PARTIAL])} replayed in part: the loop ended a turn "
            f"before its recorded end without a stop ({figures.unplayed:,} recorded replies "
            "not replayed)"
        )
    if figures.no_final_answer:
        count = figures.no_final_answer
        ends = "ends" if count == 1 else "end"
        lines.append(f"{_runs(count)} {ends} without a final answer (text)")
    if figures.malformed:
        what = "run or file" if figures.malformed == 1 else "runs or files"
        lines.append(
            f"{figures.malformed:,} {what} could not be read (listed on stderr, all in --json)"
        )
    if figures.skipped:
        what = "line or file" if figures.skipped == 1 else "lines or files"
        lines.append(f"{figures.skipped:,} {what} passed over: no run in them (below)")
    return lines


def _labels_line(report: ReplayReport) -> str | None:
    total = report.total
    if not report.labelled_by_rule or not total.unlabelled_why:
        return None
    whys = "; ".join(
        f"{safe(why)} ({count:,})" for why, count in total.unlabelled_why.most_common()
    )
    return f"--success-if could not label {_runs(sum(total.unlabelled_why.values()))}: {whys}"


def print_report(report: ReplayReport, out: Console, *, details: bool, wide: bool) -> None:
    """The whole report: sentence, settings, table, reading notes, the runs cut."""
    settings = ", ".join(f"{k}={v!r}" for k, v in report.settings.items()) or "library defaults"
    total = report.total
    out.print(safe(report.headline()), markup=False)
    count = len(report.corpora)
    out.print(
        f"convergent replay: {total.read:,} runs from {count} "
        f"{'corpus' if count == 1 else 'corpora'}; settings: {safe(settings)}; a real loop is "
        f"a call repeated x{report.threshold} with the same result (as the policy compares "
        "them), nothing changed",
        markup=False,
    )
    out.print(_figures_table(report, wide))
    labels = _labels_line(report)
    if labels is not None:
        out.print(labels, markup=False)
    for figures in report.corpora.values():
        for line in _reading_lines(figures):
            out.print(f"  {safe(figures.name)}: {line}", markup=False)
    for figures in report.corpora.values():
        _print_runs(figures, out, details)
    hidden = total.failed_stopped + total.verdicts[UNLABELLED_STOPPED]
    if hidden and not details:
        out.print(f"  ({hidden} failed or unlabelled runs stopped: --details lists them)")
    _print_passed_over(report, out, details)


def _print_runs(figures: CorpusFigures, out: Console, details: bool) -> None:
    shown = [verdict for verdict in figures.stopped if details or verdict.success is True]
    names = run_names([*shown, *figures.looping, *figures.nudged])
    corpus = safe(figures.name)
    for verdict in shown[: None if details else SHOWN_STOPS]:
        out.print(f"  {corpus}: {_stop_line(verdict, names[verdict.id])}", markup=False)
    if not details and len(shown) > SHOWN_STOPS:
        out.print(f"  ... {len(shown) - SHOWN_STOPS} more (--details)")
    if not details:
        return
    for verdict in figures.looping:
        loop = verdict.loop
        assert loop is not None
        out.print(
            f"  {corpus}: real loop {loop.fate}: {safe(names[verdict.id])} "
            f"({safe(loop.repeat.name)} x{loop.repeat.times}, turn {loop.turn + 1}, replies "
            f"{loop.repeat.start + 1}-{loop.repeat.reply + 1})",
            markup=False,
        )
    for verdict in figures.nudged:
        places = ", ".join(f"{safe(tool)} (turn {t}, reply {r})" for t, r, tool in verdict.nudges)
        out.print(
            f"  {corpus}: nudged, not stopped: {safe(names[verdict.id])}: {places}", markup=False
        )
    for run, gaps in figures.gapped:
        found = "; ".join(f"{count:,} {GAPS.get(key, key)}" for key, count in gaps.items())
        out.print(f"  {corpus}: read with gaps: {safe(run)}: {found}", markup=False)


def _print_passed_over(report: ReplayReport, out: Console, details: bool) -> None:
    """The lines and files passed over (those that could not be read go to stderr)."""
    items = report.skipped
    if not items:
        return
    what = "line or file" if len(items) == 1 else "lines or files"
    out.print(f"{len(items):,} {what} passed over (no run in them):", markup=False)
    limit = None if details else _SHOWN_NOTES
    for item in items[:limit]:
        out.print(f"  {safe(item.describe())}", markup=False)
    if limit is not None and len(items) > limit:
        out.print(f"  ... {len(items) - limit} more (--details, or all in --json)")


def calibration_table(calibration: Calibration, code: Sequence[str], out: Console) -> None:
    """Every setting the calibration tried, and the settings it chose."""
    table = Table(title="calibration: every setting tried (the trade-off curve)")
    for column in (
        "knob",
        "value",
        "successful cut",
        "policy's fault",
        "failed stopped",
        "failed-run replies saved",
        "loops stopped, nudged, missed",
        "notes",
    ):
        table.add_column(column, justify="left" if column in ("knob", "value") else "right")
    for point in calibration.points:
        share = 100 * point.replies_saved / point.failed_replies if point.failed_replies else 0.0
        table.add_row(
            point.knob or "(library defaults)",
            safe(repr(point.value)) if point.knob else "",
            str(point.successful_cut),
            str(point.policy_faults),
            str(point.failed_stopped),
            f"{point.replies_saved:,} ({share:.1f}%)",
            ", ".join(map(str, point.loops)),
            str(point.notes),
        )
    out.print(table)
    rule = (
        "no successful run cut by the policy's fault"
        if calibration.allow_real_loops
        else "no successful run cut"
    )
    out.print(f"chosen ({rule}, most failed-run replies saved):")
    for line in code:
        out.print(f"  {safe(line)}", markup=False)
    for refused in calibration.refused:
        out.print(f"  (not tried: {safe(refused)})", markup=False)
