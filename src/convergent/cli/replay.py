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
import re
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from convergent.cli._app import app
from convergent.cli._checked import SPEC_OPTIONS
from convergent.cli._options import JsonOption
from convergent.exceptions import UserError

__all__ = ["replay_command"]

_UNBOUNDED = 10_000
_PIPE_WIDTH = 100
"""Columns of the report written to a pipe or a file (``--wide``: unbounded)."""
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


def _warn_malformed(report: Any) -> None:
    from convergent.replay._terminal import safe

    if not report.malformed:
        return
    print(f"replay: skipped {len(report.malformed)} malformed runs or files:", file=sys.stderr)
    for item in report.malformed[:5]:
        print(f"  {safe(item.describe())}", file=sys.stderr)
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
    reads: Annotated[
        list[str] | None,
        typer.Option(
            "--reads",
            "--read-only",
            metavar="NAMES",
            help="These tools change nothing (comma-separated, repeatable).",
        ),
    ] = None,
    idempotent: Annotated[
        list[str] | None,
        typer.Option(
            "--idempotent",
            metavar="NAMES",
            help="These tools change nothing more when called again the same way "
            "(comma-separated).",
        ),
    ] = None,
    writes: Annotated[
        list[str] | None,
        typer.Option(
            "--writes",
            metavar="NAMES",
            help="Each call of these tools changes something (comma-separated).",
        ),
    ] = None,
    waits: Annotated[
        list[str] | None,
        typer.Option(
            "--waits",
            metavar="NAMES",
            help="These tools wait: time passes while they run (comma-separated).",
        ),
    ] = None,
    mistake_if: Annotated[
        list[str] | None,
        typer.Option(
            "--mistake-if",
            metavar="REGEX",
            help="A result this matches was the model's mistake (repeatable).",
        ),
    ] = None,
    failure_if: Annotated[
        list[str] | None,
        typer.Option(
            "--failure-if", metavar="REGEX", help="A result this matches failed (repeatable)."
        ),
    ] = None,
    declare: Annotated[
        Path | None,
        typer.Option(
            "--declare",
            metavar="FILE",
            help="A YAML or JSON file of reads, idempotent, writes, waits, mistakes, failures.",
        ),
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
    wide: Annotated[
        bool,
        typer.Option("--wide", help="Every column of the table, unwrapped, whatever the width."),
    ] = False,
    html: Annotated[
        Path | None, typer.Option("--html", metavar="FILE", help="Also write the report as a page.")
    ] = None,
    workers: Annotated[int, typer.Option(help="Processes that replay.")] = 1,
    json_output: JsonOption = False,
) -> None:
    """Replay recorded agent runs through the loop: which it would stop, cut or save."""
    from convergent.replay._declarations import declared, load_declarations
    from convergent.replay._labels import load_labels

    settings = _checked(setting or [], calibrate, allow_real_loops, knob, loop_threshold, workers)
    labels = load_labels(success, success_if)
    declarations = declared(
        reads=reads or (),
        idempotent=idempotent or (),
        writes=writes or (),
        waits=waits or (),
        mistakes=mistake_if or (),
        failures=failure_if or (),
    )
    if declare is not None:
        declarations = load_declarations(declare).merged(declarations)
    common: dict[str, Any] = {
        "format": format,
        "success": labels.given,
        "success_if": success_if,
        "declarations": declarations,
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
        print(_json_text(payload))
        return
    _warn_malformed(report)
    from convergent.replay._terminal import calibration_table, print_report, safe

    out = _console(wide)
    if calibration is not None:
        out.print(f"With the chosen settings: {safe(report.headline())}", markup=False)
        calibration_table(calibration, code, out)
        out.print("the chosen settings, replayed:")
    print_report(report, out, details=details, wide=wide)
    if html is not None:
        out.print(f"wrote {safe(html)}", markup=False)


_INVISIBLE = re.compile("[\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
"""Characters JSON may carry raw that a terminal acts on (C1 controls, bidirectional
overrides, line separators); JSON's own escaping already covers the C0 controls."""


def _json_text(payload: Any) -> str:
    """The payload as JSON in UTF-8, with every character a terminal acts on escaped."""
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return _INVISIBLE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def _console(wide: bool) -> Console:
    """Standard output: the terminal's width, 100 columns in a pipe, unbounded when wide."""
    # lines are not broken (the terminal wraps them); the table fits the width
    out = Console(highlight=False, soft_wrap=True)
    if wide:
        return Console(highlight=False, soft_wrap=True, width=_UNBOUNDED)
    if not out.is_terminal:
        return Console(highlight=False, soft_wrap=True, width=_PIPE_WIDTH)
    return out


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
