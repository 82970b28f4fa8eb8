"""Durable runs on the command line: ``runs``, ``resume``, ``rewind`` and ``steer``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from convergent._printable import printable
from convergent._run_id import check_run_id
from convergent.cli._app import app
from convergent.cli._checked import LIMIT_OPTIONS, checked
from convergent.cli._options import JsonOption, OtlpOption, TraceOption
from convergent.cli._session import Session, default_steer, open_reader, open_store
from convergent.cli._telemetry import otlp_export
from convergent.cli._temporal import (
    TaskQueueOption,
    TemporalOption,
    list_runs,
    resume_run,
    steer_run,
)
from convergent.cli.run import absolute_model_spec
from convergent.durability.sqlite import DEFAULT_DB_PATH, RunStore, RunSummary
from convergent.exceptions import UserError
from convergent.limits import Limits
from convergent.loop.budget import added, renewed
from convergent.models._prices import CURRENCY, format_cost, parse_price
from convergent.models.registry import costs_nothing
from convergent.resuming import prepare_resume, spec_of, steerable_run
from convergent.state import RunState
from convergent.stop import StopReason

__all__ = ["resume_command", "rewind_command", "runs_command", "steer_command"]

DbOption = Annotated[Path, typer.Option(help="Run database.")]


def _age(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"


def _summary_dict(run: RunSummary) -> dict[str, object]:
    return {
        "run_id": run.run_id,
        "task": run.task,
        "status": run.status,
        "stop_reason": run.stop_reason.value if run.stop_reason else None,
        "cycles": run.cycles,
        "cost": run.usage.cost,
        "currency": CURRENCY,
        "started_at": run.started_at,
        "updated_at": run.updated_at,
        "resumable": run.resumable,
        "parent_run_id": run.parent_run_id,
        "parent_call_id": run.parent_call_id,
        "output_after_stop": run.output_after_stop,
        "output_data": run.output_data,
    }


@app.command("runs")
def runs_command(
    db: DbOption = DEFAULT_DB_PATH,
    limit: Annotated[int, typer.Option(help="Show at most this many runs.")] = 20,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "convergent",
) -> None:
    """List stored runs (or the runs on a Temporal cluster), most recent first.

    A run's child runs (agents it called as tools) are indented under it in the table;
    ``--json`` lists every run with its ``parent_run_id``.
    """
    if limit < 1:
        raise UserError(f"--limit must be >= 1, got {limit}")
    if temporal is not None:
        list_runs(temporal, task_queue, db, limit, json_output)
        return
    # rows are read and printed a page at a time: any --limit lists in bounded memory
    with open_reader(db) as store:
        if json_output:
            _print_json(store.iter_runs(limit))
        elif not _print_table(store, store.iter_runs(limit, clip=TASK_SHOWN * 4, top_only=True)):
            print(f"no runs in {db}")


TASK_SHOWN = 60
"""Characters of a task the table shows."""
CHILD_INDENT = "  "
"""What a child run's id is indented by, per level, under its parent."""
STATUS_WIDTH = max(len("interrupted"), *(len(reason.value) for reason in StopReason))
"""Width of the status column (the longest status)."""
COST_WIDTH = 10
"""Width of the cost column (``<$0.000001`` at most)."""


def _print_json(runs: Iterable[RunSummary]) -> None:
    """One JSON list, written as the runs are read."""
    out = sys.stdout
    out.write("[")
    for n, run in enumerate(runs):
        out.write((", " if n else "") + json.dumps(_summary_dict(run), ensure_ascii=False))
    out.write("]\n")
    out.flush()


def _print_table(store: RunStore, runs: Iterable[RunSummary]) -> bool:
    """The runs as aligned columns, written as they are read; False if there were none.

    Column widths come from the whole database (one cheap query), so every page lines up.
    """
    ((id_width, most_cycles),) = store.query("SELECT max(length(run_id)), max(cycles) FROM runs")
    if id_width is None:
        return False
    ((depth,),) = store.query(
        "WITH RECURSIVE tree(run_id, depth) AS (SELECT run_id, 0 FROM runs "
        "WHERE parent_run_id IS NULL UNION ALL SELECT runs.run_id, depth + 1 FROM runs "
        "JOIN tree ON runs.parent_run_id = tree.run_id) SELECT max(depth) FROM tree"
    )
    id_width += len(CHILD_INDENT) * (depth or 0)
    widths = (max(2, id_width), STATUS_WIDTH, max(6, len(str(most_cycles))), COST_WIDTH, 4)
    out = sys.stdout
    now = time.time()

    def line(name: str, status: str, cycles: str, cost: str, age: str, task: str) -> str:
        return (
            f"{name:<{widths[0]}}  {status:<{widths[1]}}  {cycles:>{widths[2]}}  "
            f"{cost:>{widths[3]}}  {age:>{widths[4]}}  {task}".rstrip()
            + "\n"
        )

    def write(run: RunSummary, indent: str) -> None:
        task = printable(run.task, one_line=True)
        if len(task) > TASK_SHOWN:
            task = task[: TASK_SHOWN - 1] + "…"
        cost = format_cost(run.usage.cost, free=costs_nothing(run.spec))
        age = _age(now - run.updated_at)
        out.write(line(indent + run.run_id, run.status, str(run.cycles), cost, age, task))
        for child in store.children(run.run_id, clip=TASK_SHOWN * 4):
            write(child, indent + CHILD_INDENT)

    out.write(line("id", "status", "cycles", "cost", "age", "task"))
    for run in runs:
        write(run, "")
    out.flush()
    return True


Budgets = Callable[[Limits, RunState], Limits]
"""The budgets of a resumed run, from its stored ones and its state."""


def _budget_options(given: Mapping[str, tuple[Any, Any]]) -> Budgets:
    """The budgets ``resume``'s options ask for, by `Limits` field: (``--max-*``, ``--more-*``).

    ``--max-*`` counts from the run's start, like ``convergent run``'s; ``--more-*`` adds
    to what the run used. A budget with neither keeps the stored one (`renewed`).

    Raises:
        UserError: For both options of one budget, or a negative value.
    """
    absolute = {name: pair[0] for name, pair in given.items() if pair[0] is not None}
    more = {name: pair[1] for name, pair in given.items() if pair[1] is not None}
    for name in absolute.keys() & more.keys():
        option = LIMIT_OPTIONS[name]
        raise UserError(f"give {option} or {option.replace('--max-', '--more-')}, not both")
    checked(Limits, absolute, LIMIT_OPTIONS)
    checked(Limits, more, {f: o.replace("--max-", "--more-") for f, o in LIMIT_OPTIONS.items()})

    def budgets(stored: Limits, state: RunState) -> Limits:
        return replace(added(renewed(stored, state), state, more), **absolute)

    return budgets


@app.command("resume")
def resume_command(
    run_id: Annotated[str, typer.Argument(help="Id of the run to continue.")],
    db: DbOption = DEFAULT_DB_PATH,
    answer: Annotated[
        str | None, typer.Option(help="Your answer, when the run stopped needs_user.")
    ] = None,
    message: Annotated[
        str | None, typer.Option(help="New instructions, delivered before the next cycle.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Continue with this model instead of the run's.")
    ] = None,
    max_cycles: Annotated[
        int | None, typer.Option(help="Cycle limit, counted from the run's start.")
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget, from the start.")] = None,
    max_seconds: Annotated[
        float | None, typer.Option(help="Wall-time budget, from the start.")
    ] = None,
    max_cost: Annotated[float | None, typer.Option(help="Cost budget, from the start.")] = None,
    more_cycles: Annotated[
        int | None, typer.Option(help="Cycles to allow on top of those the run used.")
    ] = None,
    more_tokens: Annotated[int | None, typer.Option(help="Tokens to add.")] = None,
    more_seconds: Annotated[float | None, typer.Option(help="Seconds to add.")] = None,
    more_cost: Annotated[float | None, typer.Option(help="Cost to add.")] = None,
    price: Annotated[
        str | None,
        typer.Option(
            metavar="IN,OUT",
            help="The model's price: US dollars per million input and output tokens "
            "(default: the run's).",
        ),
    ] = None,
    steer: Annotated[
        bool | None, typer.Option(help="Read steering lines from standard input.")
    ] = None,
    trace: TraceOption = None,
    json_output: JsonOption = False,
    temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "convergent",
    otlp: OtlpOption = None,
    claim: Annotated[
        str | None,
        typer.Option(hidden=True, help="Take over this claim on the run (the console's)."),
    ] = None,
) -> None:
    """Continue a run that was interrupted or stopped for a resumable reason.

    Budgets count from the run's start, as in ``convergent run``; without a budget
    option the run keeps its own, and one it used up is granted once more.
    """
    check_run_id(run_id)
    if otlp is not None and temporal is not None:
        raise UserError("--otlp traces runs in this process; a --temporal run runs on a worker")
    if temporal is not None:
        resume_run(
            temporal,
            task_queue,
            db,
            run_id,
            answer=answer,
            message=message,
            json_output=json_output,
            steer=default_steer(steer, json_output),
        )
        return
    budgets = _budget_options(
        {
            "max_cycles": (max_cycles, more_cycles),
            "max_total_tokens": (max_tokens, more_tokens),
            "max_seconds": (max_seconds, more_seconds),
            "max_cost": (max_cost, more_cost),
        }
    )
    priced = parse_price(price) if price is not None else None
    with otlp_export(otlp):
        store = open_store(db, must_exist=True)
        # the console's claim is taken over once the agent is built (prepare_resume)
        held = store.claim(run_id) if claim is None else None
        try:
            state = store.load(run_id)
            stored = spec_of(store.get_run(run_id)).limits
        except BaseException:
            if held is not None:
                held.release()
            raise
        limits = budgets(stored, state)
        ready = prepare_resume(
            store,
            run_id,
            answer=answer,
            message=message,
            limits=limits,
            model=absolute_model_spec(model) if model is not None else None,
            claim=held,
            handed=claim,
            price=priced,
        )
        session = Session(
            store=store,
            run_id=run_id,
            steer=default_steer(steer, json_output),
            json_output=json_output,
            trace=trace,
        )
        session.resume(ready)


@app.command("rewind")
def rewind_command(
    run_id: Annotated[str, typer.Argument(help="Id of the run to rewind.")],
    to: Annotated[int, typer.Option("--to", help="The cycle to return to.")],
    db: DbOption = DEFAULT_DB_PATH,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Restore a run's workspace files and conversation to the end of a cycle."""
    check_run_id(run_id)
    if to < 0:
        raise UserError(f"--to must be >= 0, got {to}")
    with open_store(db, must_exist=True) as store:
        result = store.rewind(run_id, to)
    if json_output:
        print(
            json.dumps(
                {
                    "run_id": result.run_id,
                    "cycle": result.cycle,
                    "restored": list(result.restored),
                    "deleted": list(result.deleted),
                    "skipped": list(result.skipped),
                }
            )
        )
        return
    print(
        f"rewound {run_id} to cycle {to}: {len(result.restored)} file(s) restored, "
        f"{len(result.deleted)} deleted; continue with: convergent resume {run_id}"
    )
    for label, paths in (
        ("restored", result.restored),
        ("deleted", result.deleted),
        ("not restored", result.skipped),
    ):
        for path in paths:
            print(f"  {label}: {path}")


@app.command("steer")
def steer_command(
    run_id: Annotated[str, typer.Argument(help="Id of the run to steer.")],
    message: Annotated[
        str | None, typer.Argument(help="New instructions for the run.", show_default=False)
    ] = None,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the run (ends stopped).")] = False,
    pause: Annotated[
        bool, typer.Option("--pause", help="Hold the run before its next cycle.")
    ] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Release a paused run.")] = False,
    db: DbOption = DEFAULT_DB_PATH,
    temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "convergent",
) -> None:
    """Send a message, stop, pause or resume to a run, from any process."""
    check_run_id(run_id)
    chosen = [
        name
        for name, on in (
            ("message", message is not None),
            ("stop", stop),
            ("pause", pause),
            ("resume", resume),
        )
        if on
    ]
    if len(chosen) != 1:
        raise UserError("give exactly one of MESSAGE, --stop, --pause or --resume")
    kind = chosen[0]
    if kind == "message" and not (message or "").strip():
        raise UserError("the message is empty")
    if temporal is not None:
        steer_run(temporal, task_queue, db, run_id, kind, message or "")
        return
    with open_store(db, must_exist=True) as store:
        run = store.get_run(run_id) if kind != "message" else steerable_run(store, run_id)
        if kind != "message" and not run.running:
            raise UserError(f"run {run_id!r} is not running ({run.status})")
        store.send_steering(run_id, kind, message or "")
    if kind == "message" and not run.running:
        print(
            f"queued for {run_id}; it is delivered when the run resumes "
            f"(convergent resume {run_id})"
        )
    else:
        print(f"sent {kind} to {run_id}")
