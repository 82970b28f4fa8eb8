"""The replay report as one self-contained HTML page (no script, no fetch: works offline).

It shows the figures per corpus, the calibration's trade-off curve as an inline SVG
chart (when there is one), and every stopped run with its calls around the stop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from convergent.replay._calibrate import Calibration, Point
from convergent.replay._recording import GAPS
from convergent.replay._report import CorpusFigures, ReplayReport
from convergent.replay._terminal import run_names
from convergent.replay._verdict import (
    CUT_FAULT,
    CUT_REAL_LOOP,
    FAILED_STOPPED,
    PARTIAL,
    PLAYED_THROUGH,
    UNLABELLED_STOPPED,
    RunVerdict,
)

__all__ = ["MAX_RUNS_SHOWN", "html_page"]

MAX_RUNS_SHOWN = 300
"""Stopped runs shown per corpus (all of them are in ``--json``)."""

_STYLE = """
html{background:#fff}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;
max-width:1180px;color:#1d232b;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}
h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d6dbe1}
h3{font-size:1rem;margin:1.2rem 0 .3rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:13px;display:block;max-width:100%;
overflow-x:auto}
svg{max-width:100%;height:auto}
th,td{border:1px solid #d6dbe1;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef1f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
#summary td.mono{word-break:break-all;min-width:12rem;max-width:22rem}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
pre{background:#f5f7f9;padding:.6rem;border:1px solid #d6dbe1;white-space:pre-wrap}
.headline{font-size:1.15rem;font-weight:600;margin:.6rem 0}
.muted{color:#5d6773}.bad{color:#b3261e;font-weight:600}.good{color:#1b6e34;font-weight:600}
details{margin:.4rem 0 .8rem;border-left:3px solid #d6dbe1;padding-left:.6rem}
summary{cursor:pointer}
tr.ran td{background:#fff}tr.noted td{background:#fff4d6}tr.notrun td{background:#fde2e0}
tr.unplayed td{color:#8a939d;background:#f7f8f9}
.legend span{display:inline-block;padding:0 6px;margin-right:6px;border:1px solid #d6dbe1}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#1d232b}
svg text.point{font-size:10px;fill:#3b4550}
"""

_VERDICTS = {
    PLAYED_THROUGH: "no turn was cut: the loop ended every turn where the recording does",
    PARTIAL: "no turn was cut, but the loop ended one before the recording's end: some "
    "recorded calls were not replayed",
    CUT_REAL_LOOP: "a successful run cut where the recording proves a loop (the same call "
    "repeated with the same result, nothing changed): right whatever the policy",
    CUT_FAULT: "a successful run cut without such proof: the policy's fault",
    FAILED_STOPPED: "a failed run stopped: the recorded replies after the stop are saved",
    UNLABELLED_STOPPED: "a run without a success label, stopped",
}


def _n(value: Any) -> str:
    return "" if value is None else f"{value:,}" if isinstance(value, int) else escape(str(value))


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _summary_rows(figures: Iterable[CorpusFigures]) -> str:
    rows = []
    for item in figures:
        stopped, nudged, missed = item.loop_counts("failed")
        saved = item.saved_replies["failed"]
        rows.append(
            "<tr>"
            f"<td class=mono>{escape(item.name)}</td>"
            f"<td class=n>{_n(item.runs['successful'])}</td>"
            f"<td class=n>{_n(item.runs['failed'])}</td>"
            f"<td class=n>{_n(item.runs['unlabelled'])}</td>"
            f"<td class=n>{_n(item.successful_cut)}</td>"
            f"<td class=n>{_n(item.policy_faults)}</td>"
            f"<td class=n>{_n(item.failed_stopped)}</td>"
            f"<td class=n>{_n(item.verdicts[UNLABELLED_STOPPED])}</td>"
            f"<td class=n>{stopped}, {nudged}, {missed}</td>"
            f"<td class=n>{_n(saved)} ({_percent(saved, item.replies['failed'])})</td>"
            f"<td class=n>{_n(item.saved_tokens['failed'] or None)}</td>"
            f"<td class=n>{_n(item.notes)}</td>"
            f"<td class=n>{_n(item.malformed)}</td>"
            "</tr>"
        )
    return "".join(rows)


def _summary(report: ReplayReport) -> str:
    head = (
        "<tr><th>corpus</th><th>successful</th><th>failed</th><th>unlabelled</th>"
        "<th>successful cut</th><th>policy's fault</th><th>failed stopped</th>"
        "<th>unlabelled stopped</th><th>real loops of failed runs: stopped, nudged, missed</th>"
        "<th>failed-run replies saved</th><th>tokens saved</th><th>notes</th>"
        "<th>malformed</th></tr>"
    )
    corpora = list(report.corpora.values())
    rows = _summary_rows([*corpora, report.total] if len(corpora) > 1 else corpora)
    return f"<table id=summary>{head}{rows}</table>"


def _chart(calibration: Calibration) -> str:
    """The trade-off curve: successful runs cut against failed-run replies saved."""
    points = calibration.points
    width, height, pad = 640, 340, 48
    xmax = max(1, *(p.successful_cut for p in points))
    ymax = max(1.0, *(_share(p) for p in points))

    def x(point: Point) -> float:
        return pad + (width - 2 * pad) * point.successful_cut / xmax

    def y(point: Point) -> float:
        return height - pad - (height - 2 * pad) * _share(point) / ymax

    marks = []
    places: dict[tuple[int, int], list[tuple[str, str, Any]]] = {}
    for point in points:
        chosen = point is calibration.best
        baseline = point is calibration.baseline
        color = "#1b6e34" if chosen else "#5d6773" if baseline else "#2f5fa7"
        radius = 7 if chosen or baseline else 4
        label = "library defaults" if baseline else f"{point.knob}={point.value}"
        tip = (
            f"{label}: {point.successful_cut} successful cut "
            f"({point.policy_faults} policy's fault), {point.replies_saved} failed-run "
            f"replies saved ({_share(point):.1f}%)"
        )
        marks.append(
            f'<circle cx="{x(point):.1f}" cy="{y(point):.1f}" r="{radius}" fill="{color}" '
            f'fill-opacity="0.75"><title>{escape(tip)}</title></circle>'
        )
        place = places.setdefault((round(x(point)), round(y(point))), [])
        place.append(("chosen" if chosen else "", point.knob or "library defaults", point.value))
    for (px, py), found in places.items():
        # points at one place share a label: each knob with its values there
        values: dict[str, list[str]] = {}
        for _, knob, value in found:
            if knob != "library defaults":
                values.setdefault(knob, []).append(str(value))
            else:
                values.setdefault(knob, [])
        parts = [knob + ("=" + "/".join(tried) if tried else "") for knob, tried in values.items()]
        chosen_here = any(word for word, _, _ in found)
        label = ("chosen; " if chosen_here else "") + "; ".join(parts)
        if len(label) > 80:
            label = label[:77] + "..."
        bold = ' font-weight="600"' if chosen_here else ""
        anchor = "end" if px > width * 0.6 else "start"
        dx = -9 if anchor == "end" else 9
        marks.append(
            f'<text class=point x="{px + dx}" y="{py - 8}" text-anchor="{anchor}"{bold}>'
            f"{escape(label)}</text>"
        )
    axes = (
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#1d232b"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#1d232b"/>'
        f'<text x="{width / 2:.0f}" y="{height - 12}" text-anchor="middle">'
        "successful runs cut short</text>"
        f'<text x="14" y="{height / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {height / 2:.0f})">failed-run replies saved (%)</text>'
        f'<text x="{pad}" y="{height - pad + 16}" text-anchor="middle">0</text>'
        f'<text x="{width - pad}" y="{height - pad + 16}" text-anchor="middle">{xmax}</text>'
        f'<text x="{pad - 6}" y="{height - pad + 4}" text-anchor="end">0</text>'
        f'<text x="{pad - 6}" y="{pad + 4}" text-anchor="end">{ymax:.1f}</text>'
    )
    return (
        f'<svg id=curve role=img aria-label="trade-off curve" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">{axes}{"".join(marks)}</svg>'
    )


def _share(point: Point) -> float:
    return 100 * point.replies_saved / point.failed_replies if point.failed_replies else 0.0


def _calibration(calibration: Calibration, code: Sequence[str]) -> str:
    rows = "".join(
        "<tr>"
        f"<td class=mono>{escape(p.knob or '(library defaults)')}</td>"
        f"<td class=mono>{escape(repr(p.value)) if p.knob else ''}</td>"
        f"<td class=n>{p.successful_cut}</td><td class=n>{p.policy_faults}</td>"
        f"<td class=n>{p.failed_stopped}</td>"
        f"<td class=n>{p.replies_saved} ({_share(p):.1f}%)</td>"
        f"<td class=n>{p.loops[0]}, {p.loops[1]}, {p.loops[2]}</td>"
        f"<td class=n>{p.notes}</td>"
        "</tr>"
        for p in calibration.points
    )
    rule = (
        "no successful run cut by the policy's fault (cuts at real loops allowed)"
        if calibration.allow_real_loops
        else "no successful run cut"
    )
    return (
        "<h2 id=calibration>Calibration</h2>"
        f"<p>Chosen: the settings that keep {rule} and save the most recorded replies of "
        "failed runs, one knob at a time from the library's defaults.</p>"
        f"<pre>{escape(chr(10).join(code))}</pre>"
        f"{_chart(calibration)}"
        "<table id=points><tr><th>knob</th><th>value</th><th>successful cut</th>"
        "<th>policy's fault</th><th>failed stopped</th><th>failed-run replies saved</th>"
        "<th>real loops in failed runs: stopped, nudged, missed</th><th>notes</th></tr>"
        f"{rows}</table>"
    )


def _run(verdict: RunVerdict, name: str) -> str:
    parts = []
    for stop in verdict.stops:
        repeat = stop.repeat
        evidence = (
            f"real loop: {escape(repeat.name)} x{repeat.times} with the same result, nothing "
            f"changed (replies {repeat.start + 1}-{repeat.reply + 1})"
            if stop.real_loop
            else f"no real loop (longest unchanged repeat: x{repeat.times})"
        )
        saved = f"{stop.replies_left} recorded replies left unplayed"
        if stop.tokens_left is not None:
            saved += f", {stop.tokens_left:,} tokens"
        rows = "".join(
            f'<tr class="{line.status.replace(" ", "")}"><td class=n>{line.reply}</td>'
            f"<td class=mono>{escape(line.name)}</td><td class=mono>{escape(line.arguments)}</td>"
            f"<td class=mono>{escape(line.result)}{' <b>(failed)</b>' if line.failed else ''}</td>"
            f"<td>{escape(line.status)}</td></tr>"
            for line in stop.calls
        )
        rule = f" by <code>{escape(stop.rule)}</code>" if stop.rule else ""
        parts.append(
            f"<p><b>{escape(stop.reason)}</b>{rule} in turn {stop.turn + 1}, at reply "
            f"{stop.played} of {stop.recorded}: {escape(stop.detail)}<br>{evidence}; "
            f"{saved}.</p>"
            "<table class=calls><tr><th>reply</th><th>tool</th><th>arguments</th>"
            f"<th>recorded result</th><th>replay</th></tr>{rows}</table>"
        )
    verdict_class = "bad" if verdict.verdict == CUT_FAULT else "muted"
    return (
        f"<details class=run><summary><span class=mono>{escape(name)}</span> "
        f'<span class="{verdict_class}">{escape(verdict.verdict)}</span>'
        f"{' &middot; ' + escape(verdict.model) if verdict.model else ''}</summary>"
        f"{''.join(parts)}</details>"
    )


_SIDE = {True: "successful", False: "failed", None: "unlabelled"}


def _runs(figures: CorpusFigures) -> str:
    if not figures.stopped and not figures.looping and not figures.nudged:
        return ""
    shown = figures.stopped[:MAX_RUNS_SHOWN]
    more = len(figures.stopped) - len(shown)
    names = run_names([*shown, *figures.looping, *figures.nudged[:MAX_RUNS_SHOWN]])
    loops = "".join(
        f"<li><span class=mono>{escape(names[v.id])}</span> ({_SIDE[v.success]}): real loop "
        f"{escape(v.loop.fate)} "
        f"({escape(v.loop.repeat.name)} x{v.loop.repeat.times}, turn {v.loop.turn + 1}, "
        f"replies {v.loop.repeat.start + 1}-{v.loop.repeat.reply + 1})</li>"
        for v in figures.looping
        if v.loop is not None
    )
    nudged = "".join(
        f"<li><span class=mono>{escape(names[v.id])}</span> ({_SIDE[v.success]}): "
        + ", ".join(f"{escape(tool)} (turn {t}, reply {r})" for t, r, tool in v.nudges)
        + "</li>"
        for v in figures.nudged[:MAX_RUNS_SHOWN]
    )
    return (
        f"<h3>{escape(figures.name)}: {_runs_count(len(figures.stopped))} stopped</h3>"
        + "".join(_run(verdict, names[verdict.id]) for verdict in shown)
        + (f"<p class=muted>{more} more in --json.</p>" if more else "")
        + (f"<p>Real loops not stopped:</p><ul>{loops}</ul>" if loops else "")
        + (
            f"<p>Nudged (a call answered with a note), not stopped:</p><ul>{nudged}</ul>"
            if nudged
            else ""
        )
    )


def _malformed(report: ReplayReport) -> str:
    parts = []
    for title, items in (
        ("Could not be read (skipped)", report.malformed),
        ("Passed over (no run in them)", report.skipped),
    ):
        if items:
            listed = "".join(
                f"<li class=mono>{escape(item.describe())}</li>" for item in items[:MAX_RUNS_SHOWN]
            )
            more = len(items) - MAX_RUNS_SHOWN
            tail = f"<p class=muted>{more} more in --json.</p>" if more > 0 else ""
            parts.append(f"<h2>{title}</h2><ul>{listed}</ul>{tail}")
    return "".join(parts)


def _runs_count(count: int) -> str:
    return f"{count:,} run" if count == 1 else f"{count:,} runs"


def _reading(report: ReplayReport) -> str:
    """What the readers could not read or had to guess, per corpus."""
    items = []
    for figures in report.corpora.values():
        notes = [
            f"{figures.gaps[key]:,} {escape(words)} (in {_runs_count(figures.gapped_runs[key])})"
            for key, words in GAPS.items()
            if figures.gaps[key]
        ]
        if figures.verdicts[PARTIAL]:
            notes.append(f"{_runs_count(figures.verdicts[PARTIAL])} replayed in part")
        if figures.no_final_answer:
            count = figures.no_final_answer
            ends = "ends" if count == 1 else "end"
            notes.append(f"{_runs_count(count)} {ends} without a final answer")
        for why, count in figures.unlabelled_why.most_common():
            notes.append(f"{_runs_count(count)} the label rule could not label: {escape(why)}")
        if notes:
            items.append(
                f"<li><span class=mono>{escape(figures.name)}</span>: {'; '.join(notes)}</li>"
            )
    if not items:
        return ""
    return f"<section id=reading><h2>Reading</h2><ul>{''.join(items)}</ul></section>"


def html_page(
    report: ReplayReport,
    *,
    calibration: Calibration | None = None,
    calibration_code: Sequence[str] = (),
    command: str = "",
) -> str:
    """The whole report as one HTML page.

    Args:
        report: The replay's figures (under the chosen settings, after a calibration).
        calibration: The calibration, whose curve and points the page shows.
        calibration_code: The chosen settings as code and flags, one line each.
        command: The command line that made the report.
    """
    settings = ", ".join(f"{k}={v!r}" for k, v in report.settings.items()) or "library defaults"
    verdicts = "".join(
        f"<li><b>{escape(name)}</b>: {escape(meaning)}</li>" for name, meaning in _VERDICTS.items()
    )
    body = (
        "<h1>convergent replay</h1>"
        f"<p id=headline class=headline>{escape(report.headline())}</p>"
        f"<p class=muted>Settings replayed: <code>{escape(settings)}</code>; a real loop is a "
        f"call repeated x{report.threshold} with the same result while nothing changed."
        + (f" Command: <code>{escape(command)}</code>" if command else "")
        + "</p><h2>Summary</h2>"
        + _summary(report)
        + f"<ul class=legend>{verdicts}</ul>"
        + _reading(report)
        + (_calibration(calibration, calibration_code) if calibration is not None else "")
        + "<h2 id=stops>Stopped runs</h2>"
        + "<p class=legend><span>ran</span><span style='background:#fff4d6'>noted: answered "
        "with a note, the run went on</span><span style='background:#fde2e0'>not run: the "
        "loop stopped first</span><span style='background:#f7f8f9'>unplayed</span></p>"
        + ("".join(_runs(figures) for figures in report.corpora.values()) or "<p>None.</p>")
        + _malformed(report)
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>convergent replay</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )
