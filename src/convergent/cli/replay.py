"""``convergent replay PATH...``: what convergent would have done on your recorded agent runs.

Reads the recordings (format detected per file, or ``--format``), replays every agent
turn through the loop with the recorded replies and results, and reports per corpus:
successful runs cut (at a real loop, or by the policy's fault), failed runs stopped,
what became of each real loop, and what the stops save. ``--calibrate`` searches the
thresholds instead. A rich summary on the terminal, ``--json`` for one JSON object,
``--html FILE`` for a page that works offline.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from convergent.cli._app import app
from convergent.cli._checked import SPEC_OPTIONS
from convergent.cli._options import JsonOption
from convergent.exceptions import UserError

__all__ = ["replay_command"]

_UNBOUNDED = 10_000
_SHOWN_STOPS = 20
_SPEC_PREFIX = {"StopPolicy": "policy.", "Limits": "limits.", "Agent": ""}
_NONE_SPELLED = {"--max-tool-errors": "0"}
"""How an option spells "no limit" where that is not its default."""


def _parse_settings(pairs: Sequence[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--set {pair!r}: expected NAME=VALUE, e.g. max_repeated_calls=4")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        settings[name.strip()] = value
    return settings


def _code(settings: Mapping[str, Any]) -> list[str]:
    """The settings as Python (one constructor per place) and as ``convergent run`` flags."""
    from convergent.replay._settings import placed

    groups = placed(settings)
    if not groups:
        return ["(the library's defaults: nothing to set)"]
    lines = []
    for target in ("StopPolicy", "Limits", "Agent"):
        if target in groups:
            arguments = ", ".join(f"{name}={value!r}" for name, value in groups[target].items())
            lines.append(
                f"{target}({arguments})" if target != "Agent" else f"Agent(..., {arguments})"
            )
    flags: list[str] = []
    unflagged: list[str] = []
    for target, values in groups.items():
        for name, value in values.items():
            path = _SPEC_PREFIX[target] + name
            option = SPEC_OPTIONS.get(path)
            if option is None:
                unflagged.append(f"{path}: {json.dumps(value)}")
            elif value is None and option in _NONE_SPELLED:
                flags.append(f"{option} {_NONE_SPELLED[option]}")
            elif value is not None:
                flags.append(f"{option} {shlex.quote(str(value))}")
    lines.append("convergent run " + " ".join(flags) if flags else "convergent run (no flags)")
    if unflagged:
        lines.append("no flag of convergent run; in an agent spec file: " + ", ".join(unflagged))
    return lines


@contextmanager
def _progress(enabled: bool, unit: str) -> Iterator[Progress | None]:
    """A bar on stderr when it is a terminal; nothing otherwise."""
    console = Console(stderr=True, highlight=False)
    if not enabled or not console.is_terminal:
        yield None
        return
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} " + unit),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        progress.add_task("replaying", total=None)
        yield progress


def _figures_table(report: Any) -> Table:
    table = Table(title=None, show_lines=False)
    columns = (
        "corpus",
        "runs (successful / failed / unlabelled)",
        "successful cut (policy's fault)",
        "failed stopped",
        "unlabelled stopped",
        "real loops in failed runs: stopped, nudged, missed",
        "failed-run replies saved",
        "notes",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "corpus" else "right")
    corpora = list(report.corpora.values())
    for figures in [*corpora, report.total] if len(corpora) > 1 else corpora:
        runs = figures.runs
        saved = figures.saved_replies["failed"]
        share = (
            f" ({100 * saved / figures.replies['failed']:.1f}%)"
            if figures.replies["failed"]
            else ""
        )
        table.add_row(
            figures.name,
            f"{runs['successful']:,} / {runs['failed']:,} / {runs['unlabelled']:,}",
            f"{figures.successful_cut} ({figures.policy_faults})",
            f"{figures.failed_stopped}",
            f"{figures.verdicts['unlabelled, stopped']}",
            ", ".join(str(count) for count in figures.loop_counts("failed")),
            f"{saved:,}{share}",
            f"{figures.notes}",
        )
    return table


def _stop_line(verdict: Any) -> str:
    stop = verdict.stop
    evidence = (
        f"real loop: {stop.repeat.name} x{stop.repeat.times} unchanged"
        if stop.real_loop
        else f"no real loop (longest unchanged repeat x{stop.repeat.times})"
    )
    detail = stop.detail if len(stop.detail) <= 140 else stop.detail[:137] + "..."
    return (
        f"{verdict.verdict}: {verdict.id}: {stop.reason} ({detail}); {evidence}; turn "
        f"{stop.turn + 1}, reply {stop.played} of {stop.recorded}, "
        f"{stop.replies_left} replies left"
    )


def _print_report(report: Any, details: bool, out: Console) -> None:
    settings = ", ".join(f"{k}={v!r}" for k, v in report.settings.items()) or "library defaults"
    total = report.total
    out.print(
        f"convergent replay: {sum(total.runs.values()):,} runs from {len(report.corpora)} "
        f"corpora; settings: {settings}; a real loop is a call repeated "
        f"x{report.threshold} with the same result, nothing changed"
    )
    out.print(_figures_table(report))
    for figures in report.corpora.values():
        shown = [verdict for verdict in figures.stopped if details or verdict.success is True]
        for verdict in shown[: None if details else _SHOWN_STOPS]:
            out.print(f"  {figures.name}: {_stop_line(verdict)}", markup=False)
        if not details and len(shown) > _SHOWN_STOPS:
            out.print(f"  ... {len(shown) - _SHOWN_STOPS} more (--details)")
        if details:
            for verdict in figures.looping:
                loop = verdict.loop
                out.print(
                    f"  {figures.name}: real loop {loop.fate}: {verdict.id} "
                    f"({loop.repeat.name} x{loop.repeat.times}, turn {loop.turn + 1}, replies "
                    f"{loop.repeat.start + 1}-{loop.repeat.reply + 1})",
                    markup=False,
                )
            for verdict in figures.nudged:
                places = ", ".join(f"{tool} (turn {t}, reply {r})" for t, r, tool in verdict.nudges)
                out.print(
                    f"  {figures.name}: nudged, not stopped: {verdict.id}: {places}", markup=False
                )
    hidden = total.failed_stopped + total.verdicts["unlabelled, stopped"]
    if hidden and not details:
        out.print(f"  ({hidden} failed or unlabelled runs stopped: --details lists them)")


def _print_calibration(calibration: Any, code: Sequence[str], out: Console) -> None:
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
            repr(point.value) if point.knob else "",
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
        out.print(f"  {line}", markup=False)
    for refused in calibration.refused:
        out.print(f"  (not tried: {refused})", markup=False)


def _warn_malformed(report: Any) -> None:
    if not report.malformed:
        return
    print(f"replay: skipped {len(report.malformed)} malformed runs or files:", file=sys.stderr)
    for item in report.malformed[:5]:
        print(f"  {item.describe()}", file=sys.stderr)
    if len(report.malformed) > 5:
        print(f"  ... {len(report.malformed) - 5} more (all in --json)", file=sys.stderr)


@app.command("replay")
def replay_command(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Recorded runs: files, or folders searched for them.", show_default=False
        ),
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Read every file in this format (default: detected): claude-code, otlp, "
            "openai-agents, tau-bench, tau2-bench, mini-swe-agent, swe-agent, bfcl, messages.",
        ),
    ] = None,
    success: Annotated[
        Path | None,
        typer.Option(help="A JSON object from run id (or name) to true/false: success labels."),
    ] = None,
    success_if: Annotated[
        str | None,
        typer.Option(help="A run succeeded if its final answer matches this regular expression."),
    ] = None,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="NAME=VALUE",
            help="Replay with this setting of the stop policy, Limits or Agent "
            "(repeatable), e.g. --set max_repeated_calls=4.",
        ),
    ] = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Search the thresholds that cut no successful run and save the most in "
            "failed ones; print them and the trade-off curve.",
        ),
    ] = False,
    allow_real_loops: Annotated[
        bool,
        typer.Option(
            "--allow-real-loops",
            help="With --calibrate: successful runs cut where the recording proves a loop "
            "do not count against a setting.",
        ),
    ] = False,
    knob: Annotated[
        list[str] | None,
        typer.Option("--knob", help="With --calibrate: search only these knobs (repeatable)."),
    ] = None,
    loop_threshold: Annotated[
        int, typer.Option(help="Unchanged repeats of one call that prove a real loop.")
    ] = 3,
    details: Annotated[
        bool, typer.Option("--details", help="List every stop and every loop not stopped.")
    ] = False,
    html: Annotated[
        Path | None, typer.Option("--html", metavar="FILE", help="Also write the report as a page.")
    ] = None,
    workers: Annotated[int, typer.Option(help="Processes that replay.")] = 1,
    json_output: JsonOption = False,
) -> None:
    """Replay recorded agent runs through the loop: which it would stop, cut or save."""
    from convergent.replay._labels import load_labels

    settings = _checked(setting or [], calibrate, allow_real_loops, knob, loop_threshold, workers)
    labels = load_labels(success, success_if)
    common: dict[str, Any] = {
        "format": format,
        "success": labels.given,
        "success_if": success_if,
        "threshold": loop_threshold,
        "workers": workers,
    }
    unit = "settings tried" if calibrate else "runs"
    with _progress(not json_output, unit) as progress:
        if calibrate:
            calibration, report = _calibrated(paths, knob or [], allow_real_loops, common, progress)
        else:
            calibration, report = None, _replayed(paths, settings, common, progress)
    code = _code(calibration.chosen) if calibration is not None else []
    if html is not None:
        _write_html(html, report, calibration, code)
    if json_output:
        payload: dict[str, Any] = {"report": report.to_dict()}
        if calibration is not None:
            payload["calibration"] = {**calibration.to_dict(), "code": code}
        print(json.dumps(payload, ensure_ascii=False, default=str))
        return
    _warn_malformed(report)
    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=_UNBOUNDED)
    if calibration is not None:
        _print_calibration(calibration, code, out)
        out.print("the chosen settings, replayed:")
    _print_report(report, details, out)
    if html is not None:
        out.print(f"wrote {html}")


def _checked(
    pairs: Sequence[str],
    calibrate: bool,
    allow_real_loops: bool,
    knobs: Sequence[str] | None,
    loop_threshold: int,
    workers: int,
) -> dict[str, Any]:
    """The ``--set`` settings, once the options are known to fit together."""
    if loop_threshold < 2:
        raise UserError(f"--loop-threshold must be >= 2, got {loop_threshold}")
    if workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    settings = _parse_settings(pairs)
    if settings and calibrate:
        raise UserError("--set and --calibrate do not go together: calibration chooses settings")
    if (allow_real_loops or knobs) and not calibrate:
        raise UserError("--allow-real-loops and --knob go with --calibrate")
    return settings


def _replayed(
    paths: Sequence[Path], settings: Mapping[str, Any], common: Mapping[str, Any], progress: Any
) -> Any:
    from convergent import replay as replaying

    def count(runs: int) -> None:
        if progress is not None:
            progress.advance(progress.task_ids[0], runs)

    return replaying.replay(paths, settings=settings, on_read=count, **common)


def _calibrated(
    paths: Sequence[Path],
    knob_names: Sequence[str],
    allow_real_loops: bool,
    common: Mapping[str, Any],
    progress: Any,
) -> tuple[Any, Any]:
    from convergent import replay as replaying

    def point(found: Any) -> None:
        if progress is not None:
            label = f"{found.knob}={found.value!r}" if found.knob else "library defaults"
            progress.update(progress.task_ids[0], description=f"calibrating (last: {label})")
            progress.advance(progress.task_ids[0], 1)

    return replaying.calibrate(
        paths,
        knobs=_knobs(knob_names),
        allow_real_loops=allow_real_loops,
        on_point=point,
        **common,
    )


def _knobs(names: Sequence[str]) -> Any:
    from convergent.replay import available_knobs

    knobs = available_knobs()
    if not names:
        return knobs
    by_name = {found.name: found for found in knobs}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise UserError(f"--knob {unknown[0]!r}: not a knob here; choose from {', '.join(by_name)}")
    return tuple(by_name[name] for name in names)


def _write_html(path: Path, report: Any, calibration: Any, code: Sequence[str]) -> None:
    from convergent.replay import html_page

    page = html_page(
        report,
        calibration=calibration,
        calibration_code=code,
        command=shlex.join(["convergent", *sys.argv[1:]]) if sys.argv[1:2] == ["replay"] else "",
    )
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--html {path}: cannot write ({exc.strerror})") from None
