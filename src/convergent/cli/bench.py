"""``convergent bench [SUITE...]``: measure when loops stop, objectively or not.

Suites: ``convergence`` (scripted, objective vs subjective stopping), ``bfcl`` (BFCL
multi-turn ground truth replayed on BFCL's backends) and ``live`` (tasks on a real
model: the embedded local one, plus ``--model`` if given). The terminal gets a
progress bar and a table; ``--json`` prints exactly one JSON object instead; ``--out``
also writes ``bench.json``, ``bench.md`` and PNG charts.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from convergent.bench import SUITES
from convergent.bench.report import BenchReport, SuiteResult, write_report
from convergent.cli._app import app
from convergent.cli._options import JsonOption
from convergent.cli._progress import ProgressDisplay, progress_display
from convergent.cli._temporal import DbOption, TaskQueueOption, TemporalOption, connect_runner
from convergent.durability.sqlite import DEFAULT_DB_PATH
from convergent.exceptions import UserError
from convergent.models.base import Model

__all__ = ["bench_command"]

_DEFAULT_LIVE_MODEL = "local"
_UNBOUNDED = 10_000


def _tick(progress: ProgressDisplay | None, task_id: Any) -> Callable[..., None]:
    def advance(*_: object) -> None:
        if progress is not None:
            progress.advance(task_id)

    return advance


async def _convergence(
    seed: int,
    per_scenario: int,
    progress: ProgressDisplay | None,
    temporal: tuple[str, str, Path] | None,
) -> SuiteResult:
    from convergent.bench.convergence import POLICIES, SCENARIOS, run_convergence_async

    task_id = None
    if progress is not None:
        total = per_scenario * len(SCENARIOS) * len(POLICIES)
        task_id = progress.add_task("convergence", total=total)
    if temporal is not None:
        from convergent.temporal._bench import run_convergence_on

        runner = await connect_runner(*temporal, need_workers=True)

        def done(finished: int, total: int) -> None:
            if progress is not None and task_id is not None:
                progress.update(task_id, completed=finished)

        return await run_convergence_on(
            runner.client, runner.task_queue, seed, per_scenario, on_progress=done
        )
    result, _ = await run_convergence_async(
        seed, per_scenario, on_progress=_tick(progress, task_id)
    )
    return result


async def _bfcl(limit: int | None, progress: ProgressDisplay | None) -> SuiteResult:
    from convergent.bench.bfcl import CATEGORIES, entry_count, run_bfcl_async

    task_id = None
    if progress is not None:
        task_id = progress.add_task("bfcl", total=entry_count(CATEGORIES, limit))
    result, _, _ = await run_bfcl_async(CATEGORIES, limit=limit, on_entry=_tick(progress, task_id))
    return result


async def _live(
    spec: str, model: Model | None, seed: int, progress: ProgressDisplay | None
) -> SuiteResult:
    from convergent.bench import live

    if model is None:
        try:
            model = live.load_live_model(spec)
        except UserError as exc:
            return live.skipped(live.describe_unavailable(spec, exc))
    task_id = None
    if progress is not None:
        total = len(live.live_tasks(seed))
        task_id = progress.add_task(f"live ({model.name})", total=total)
    return await live.run_live(model, seed=seed, on_progress=_tick(progress, task_id))


async def _run_all(
    suites: list[str],
    *,
    seed: int,
    model: Model | None,
    per_scenario: int,
    bfcl_limit: int | None,
    progress: ProgressDisplay | None,
    temporal: tuple[str, str, Path] | None = None,
) -> dict[str, SuiteResult]:
    results: dict[str, SuiteResult] = {}
    for suite in suites:
        if suite == "convergence":
            results[suite] = await _convergence(seed, per_scenario, progress, temporal)
        elif suite == "bfcl":
            results[suite] = await _bfcl(bfcl_limit, progress)
        else:
            results["live"] = await _live(_DEFAULT_LIVE_MODEL, None, seed, progress)
            if model is not None:
                results[f"live:{model.name}"] = await _live(model.name, model, seed, progress)
    return results


def _table(report: BenchReport) -> Table:
    table = Table(title=f"convergent bench (seed {report.seed})")
    for column in ("suite", "policy", "tasks", "false pos.", "false neg.", "accuracy"):
        left = column in ("suite", "policy")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    for name, suite in report.suites.items():
        if suite.skipped is not None:
            table.add_row(name, f"skipped: {suite.skipped}", "", "", "", "")
            continue
        for policy, stats in suite.policies.items():
            table.add_row(
                name,
                policy,
                str(stats.tasks),
                f"{100 * stats.false_positive_rate:.1f}%",
                f"{100 * stats.false_negative_rate:.1f}%",
                f"{100 * stats.accuracy:.1f}%",
            )
    return table


def _bfcl_lines(suite: SuiteResult) -> list[str]:
    lines: list[str] = []
    for category, counts in suite.details.get("pass_counts", {}).items():
        modes = ", ".join(
            f"{mode}: {counts[mode]['entries_passed']}/{counts[mode]['entries']} entries, "
            f"{counts[mode]['turns_passed']}/{counts[mode]['turns']} turns"
            for mode in ("one_per_response", "batched")
        )
        probes = ", ".join(
            f"{kind} {value['passed']}/{value['run']}" for kind, value in counts["probes"].items()
        )
        lines.append(f"bfcl {category}: {modes}; probes: {probes}")
    for entry, issues in suite.details.get("dataset_issues", {}).items():
        lines.append(f"bfcl dataset issue in {entry}: {'; '.join(issues)}")
    return lines


def _command_line(suites: list[str], seed: int, model: str | None) -> str:
    parts = ["convergent", "bench", *suites, "--seed", str(seed)]
    if model is not None:
        parts += ["--model", model]
    return shlex.join(parts)


def _validate(
    chosen: list[str], seed: int, per_scenario: int, bfcl_limit: int | None, out: Path | None
) -> None:
    unknown = [name for name in chosen if name not in SUITES]
    if unknown:
        raise UserError(f"unknown suite {unknown[0]!r}; choose from {', '.join(SUITES)}")
    if seed < 0:
        raise UserError(f"--seed must be >= 0, got {seed}")
    if per_scenario < 1:
        raise UserError(f"--tasks-per-scenario must be >= 1, got {per_scenario}")
    if bfcl_limit is not None and bfcl_limit < 1:
        raise UserError(f"--bfcl-limit must be >= 1, got {bfcl_limit}")
    if out is not None and out.exists() and not out.is_dir():
        raise UserError(f"--out must be a folder, but {out} is a file")
    if out is not None:
        try:
            import matplotlib  # noqa: F401  (checked before the suites run, not after)
        except ImportError:
            raise UserError(
                "--out draws PNG charts with matplotlib, which is not installed: "
                "pip install matplotlib (or run without --out)"
            ) from None
    if "bfcl" in chosen:
        from convergent.bench.bfcl import load_entries

        load_entries("base", 1)


@app.command("bench")
def bench_command(
    suites: Annotated[
        list[str] | None,
        typer.Argument(help="Suites to run: convergence, bfcl, live (default: all)."),
    ] = None,
    json_output: JsonOption = False,
    out: Annotated[
        Path | None, typer.Option(help="Write bench.json, bench.md and PNG charts here.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Also run the live suite on this model.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the scripted and live tasks.")] = 0,
    tasks_per_scenario: Annotated[int, typer.Option(help="Convergence tasks per scenario.")] = 10,
    bfcl_limit: Annotated[
        int | None, typer.Option(help="Only the first N BFCL entries per category.")
    ] = None,
    temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "convergent",
    db: DbOption = DEFAULT_DB_PATH,
) -> None:
    """Run benchmark suites and report false-positive / false-negative rates per policy."""
    chosen = list(dict.fromkeys(suites or (["convergence"] if temporal else SUITES)))
    if temporal is not None and chosen != ["convergence"]:
        raise UserError("--temporal runs the convergence suite only: convergent bench convergence")
    _validate(chosen, seed, tasks_per_scenario, bfcl_limit, out)
    extra_model = None
    if model is not None and model != _DEFAULT_LIVE_MODEL and "live" in chosen:
        from convergent.bench.live import load_live_model

        extra_model = load_live_model(model)
    progress = None
    if not json_output:
        progress = progress_display(Console(stderr=True, highlight=False))
    options: dict[str, Any] = {
        "seed": seed,
        "model": extra_model,
        "per_scenario": tasks_per_scenario,
        "bfcl_limit": bfcl_limit,
        "temporal": (temporal, task_queue, db) if temporal is not None else None,
    }
    if progress is not None:
        with progress:
            results = asyncio.run(_run_all(chosen, progress=progress, **options))
    else:
        results = asyncio.run(_run_all(chosen, progress=None, **options))
    report = BenchReport(seed=seed, suites=results, command=_command_line(chosen, seed, model))
    if out is not None:
        try:
            written = write_report(report, out)
        except OSError as exc:
            raise UserError(f"cannot write the report to {out}: {exc.strerror}") from None
    if json_output:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
        return
    output = Console(highlight=False)
    if not output.is_terminal:
        output = Console(highlight=False, width=_UNBOUNDED)  # a file gets whole lines
    output.print(_table(report))
    if "bfcl" in results:
        for line in _bfcl_lines(results["bfcl"]):
            output.print(line)
    if out is not None:
        output.print("wrote " + ", ".join(str(path) for path in written))
