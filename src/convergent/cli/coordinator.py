"""``convergent coordinator``: create, inspect, verify and update a workflow state file.

Every command takes ``--state PATH`` (default ``workflow-state.yaml`` in the current
directory) and most take ``--json`` for scripts. Bad input (unknown atom, corrupt file)
raises `UserError`, which the entry point turns into a one-line message and exit 2.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from convergent.cli._app import app
from convergent.coordinator import actions
from convergent.coordinator.advice import find_inertia, strategy_advice
from convergent.coordinator.checks import (
    ArtifactCheck,
    Check,
    CheckResult,
    CommandCheck,
    HttpCheck,
    JudgmentCheck,
    run_checks,
)
from convergent.coordinator.decide import (
    Continue,
    Decision,
    Interrupt,
    Stop,
    advance,
    decide,
    describe_decision,
)
from convergent.coordinator.metrics import health, metrics
from convergent.coordinator.progress import ready_atoms, unresolved_atoms
from convergent.coordinator.state import AtomStatus, BaseCase, Control, WorkflowState
from convergent.coordinator.store import DEFAULT_STATE_FILE, StateStore
from convergent.exceptions import UserError

__all__ = ["coordinator_app", "record_app", "status_report"]

coordinator_app = typer.Typer(
    name="coordinator",
    help="Converge multi-iteration work: atoms, completion checks, stall and stop decisions.",
    no_args_is_help=True,
    add_completion=False,
)
record_app = typer.Typer(
    name="record",
    help="Record a change: atoms resolved/added/failed, confirmations, stop or redirect.",
    no_args_is_help=True,
    add_completion=False,
)
coordinator_app.add_typer(record_app, name="record")

StateOpt = Annotated[Path, typer.Option("--state", "-s", help="The workflow state file.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
NoteOpt = Annotated[str | None, typer.Option("--note", help="Free text kept with the change.")]
_DEFAULT = Path(DEFAULT_STATE_FILE)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _decision_dict(decision: Decision) -> dict[str, Any]:
    match decision:
        case Continue(pending=pending):
            return {"action": "continue", "stop_reason": None, "pending": pending}
        case Interrupt(note=note):
            return {"action": "interrupt", "stop_reason": None, "detail": note}
        case Stop(reason=reason, detail=detail):
            return {"action": "stop", "stop_reason": reason.value, "detail": detail}
    raise AssertionError(f"unhandled decision {decision!r}")  # pragma: no cover


def status_report(state: WorkflowState, path: Path) -> dict[str, Any]:
    """Everything ``status --json`` prints: control, atoms, advice, checks, hook answers."""
    control = state.control
    ready = {atom.id for atom in ready_atoms(state.atoms)}
    state_health = health(state)
    return {
        "state": str(path),
        "goal": state.goal,
        "status": control.status.value,
        "stop_reason": control.stop_reason.value if control.stop_reason else None,
        "stop_detail": control.stop_detail,
        "decision": _decision_dict(decide(state)),
        "metrics": asdict(metrics(state)),
        "health": {"healthy": state_health.healthy, "problems": list(state_health.problems)},
        "unresolved": [
            {"id": a.id, "title": a.title, "status": a.status.value, "ready": a.id in ready}
            for a in unresolved_atoms(state.atoms)
        ],
        "advice": [
            {"switch": item.switch.value, "message": item.message, "atoms": list(item.atoms)}
            for item in strategy_advice(state)
        ],
        "inertia": [asdict(flag) for flag in find_inertia(state)],
        "checks": [result.to_data() for result in state.base_case.last_results],
        "hook": _hook_report(state),
    }


def _hook_report(state: WorkflowState) -> dict[str, Any]:
    """The Claude Code hooks' counters and their latest answer (what Claude Code was told)."""
    hook = state.control.hook
    last = hook.last_answer
    return {
        "consecutive_blocks": hook.consecutive_blocks,
        "max_consecutive_blocks": hook.max_consecutive_blocks,
        "block_when_active": hook.block_when_active,
        "last_answer": last.to_data() if last else None,
    }


def _render_status(state: WorkflowState, path: Path) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(soft_wrap=True)
    report = status_report(state, path)
    m = report["metrics"]
    goal = f" - {escape(state.goal)}" if state.goal else ""
    console.print(f"[bold]{escape(str(path))}[/bold]{goal}")
    stopped = (
        f" ({report['stop_reason']}: {report['stop_detail']})" if report["stop_reason"] else ""
    )
    console.print(f"status [bold]{report['status']}[/bold]{escape(stopped)}")
    console.print(f"next decision: {escape(describe_decision(decide(state)))}")
    console.print(
        f"iteration {m['iteration']}/{m['max_iterations']}  pending {m['pending_count']}  "
        f"resolved {m['resolved_count']}  stall {m['stall_count']}/{m['max_stall_count']}  "
        f"or_switches {m['or_switches']}  trend {m['pending_trend']}"
    )
    if report["health"]["healthy"]:
        console.print("[green]healthy[/green]")
    else:
        console.print("[red]unhealthy[/red]: " + escape("; ".join(report["health"]["problems"])))
    last = state.control.hook.last_answer
    if last is not None:
        said = f": {last.message.splitlines()[0]}" if last.message else ""
        console.print(
            escape(f"hook: {last.action} at {last.event} ({last.at:%Y-%m-%d %H:%M}){said}")
        )
    if state.atoms:
        table = Table("atom", "status", "title", "depends on", "ready", title="atoms")
        ready = {atom.id for atom in ready_atoms(state.atoms)}
        for atom in state.atoms:
            cells = (atom.id, atom.status.value, atom.title, ", ".join(atom.depends_on))
            table.add_row(*map(escape, cells), "yes" if atom.id in ready else "")
        console.print(table)
    if state.base_case.checks:
        table = Table("check", "kind", "result", title="base case")
        results = {r.name: r for r in state.base_case.last_results}
        for check in state.base_case.checks:
            result = results.get(check.name)
            shown = "not run" if result is None else ("pass: " if result.passed else "FAIL: ")
            shown += result.summary if result else ""
            table.add_row(escape(check.name), check.kind.value, escape(shown))
        console.print(table)
    for item in report["advice"]:
        console.print(f"[yellow]advice[/yellow] {item['switch']}: {escape(item['message'])}")


def _checks_from_options(
    commands: list[str], artifacts: list[str], urls: list[str], statements: list[str]
) -> list[Check]:
    checks: list[Check] = []
    checks += [CommandCheck(name=f"command-{i}", command=c) for i, c in enumerate(commands, 1)]
    checks += [ArtifactCheck(name=f"artifact-{i}", path=p) for i, p in enumerate(artifacts, 1)]
    checks += [HttpCheck(name=f"http-{i}", url=u) for i, u in enumerate(urls, 1)]
    checks += [
        JudgmentCheck(name=f"judgment-{i}", statement=s) for i, s in enumerate(statements, 1)
    ]
    return checks


@coordinator_app.command("init")
def init(
    state: StateOpt = _DEFAULT,
    goal: Annotated[str, typer.Option("--goal", help="What the workflow is for.")] = "",
    max_iterations: Annotated[int, typer.Option("--max-iterations", min=1)] = 20,
    max_stall_count: Annotated[int, typer.Option("--max-stall-count", min=1)] = 3,
    check_command: Annotated[
        list[str] | None,
        typer.Option("--check-command", help="A command that must exit 0 (repeatable)."),
    ] = None,
    artifact: Annotated[
        list[str] | None,
        typer.Option("--artifact", help="A path or glob that must exist (repeatable)."),
    ] = None,
    http: Annotated[
        list[str] | None,
        typer.Option("--http", help="A URL that must answer 200 (repeatable)."),
    ] = None,
    judgment: Annotated[
        list[str] | None,
        typer.Option("--judgment", help="A statement a person must confirm (repeatable)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Create a state file with its base case checks; refuses to overwrite without --force."""
    try:
        checks = _checks_from_options(
            check_command or [], artifact or [], http or [], judgment or []
        )
    except ValueError as exc:
        raise UserError(f"invalid check: {exc}") from None
    new = WorkflowState(
        goal=goal,
        base_case=BaseCase(checks=checks),
        control=Control(max_iterations=max_iterations, max_stall_count=max_stall_count),
    )
    StateStore(state).create(new, overwrite=force)
    if as_json:
        _print_json(status_report(new, state))
    else:
        print(f"created {state} with {len(checks)} check(s)")


@coordinator_app.command("status")
def status(state: StateOpt = _DEFAULT, as_json: JsonOpt = False) -> None:
    """Show counters, health, unresolved atoms, check results and strategy advice."""
    current = StateStore(state).load()
    if as_json:
        _print_json(status_report(current, state))
    else:
        _render_status(current, state)


def _print_results(results: list[CheckResult], satisfied: bool) -> None:
    for result in results:
        mark = "pass" if result.passed else "FAIL"
        print(f"{mark}  {result.name} ({result.kind}): {result.summary}")
    if not results:
        print("no checks declared: the base case cannot be satisfied")
    print("base case satisfied" if satisfied else "base case not satisfied")


@coordinator_app.command("verify")
def verify(state: StateOpt = _DEFAULT, as_json: JsonOpt = False) -> None:
    """Run the base case checks, record the evidence; exit 0 if satisfied, else 1."""
    store = StateStore(state)
    results = run_checks(store.load().base_case.checks, store.base_dir)
    with store.update() as current:
        satisfied = actions.record_verification(current, results)
    if as_json:
        _print_json({"satisfied": satisfied, "results": [r.to_data() for r in results]})
    else:
        _print_results(results, satisfied)
    raise typer.Exit(0 if satisfied else 1)


def _done(message: str, as_json: bool, state: WorkflowState, path: Path) -> None:
    if as_json:
        _print_json(status_report(state, path))
    else:
        print(message)


@record_app.command("add")
def record_add(
    atom_id: Annotated[str, typer.Argument(help="New atom id (no spaces).")],
    title: Annotated[str, typer.Option("--title", help="What the work item is.")] = "",
    depends_on: Annotated[
        list[str] | None, typer.Option("--depends-on", help="An atom it needs (repeatable).")
    ] = None,
    or_group: Annotated[
        str | None, typer.Option("--or-group", help="OR group of alternatives it belongs to.")
    ] = None,
    needs_info: Annotated[
        bool, typer.Option("--needs-info", help="Progress needs investigation first.")
    ] = False,
    state: StateOpt = _DEFAULT,
    as_json: JsonOpt = False,
) -> None:
    """Add a pending atom (a newly discovered work item)."""
    with StateStore(state).update() as current:
        actions.add_atom(
            current,
            atom_id,
            title=title,
            depends_on=depends_on or [],
            or_group=or_group,
            needs_info=needs_info,
        )
    _done(f"added atom {atom_id}", as_json, current, state)


@record_app.command("resolve")
def record_resolve(
    atom_id: Annotated[str, typer.Argument(help="Atom id.")],
    note: NoteOpt = None,
    state: StateOpt = _DEFAULT,
    as_json: JsonOpt = False,
) -> None:
    """Mark an atom resolved (give the evidence with --note)."""
    with StateStore(state).update() as current:
        actions.resolve_atom(current, atom_id, note=note)
    _done(f"resolved atom {atom_id}", as_json, current, state)


@record_app.command("start")
def record_start(
    atom_id: Annotated[str, typer.Argument(help="Atom id.")],
    state: StateOpt = _DEFAULT,
    as_json: JsonOpt = False,
) -> None:
    """Mark an atom in progress."""
    with StateStore(state).update() as current:
        actions.set_atom_status(current, atom_id, AtomStatus.IN_PROGRESS)
    _done(f"atom {atom_id} in progress", as_json, current, state)


@record_app.command("fail")
def record_fail(
    atom_id: Annotated[str | None, typer.Argument(help="Atom id, if the failure has one.")] = None,
    command: Annotated[
        str | None, typer.Option("--command", help="The command or approach that failed.")
    ] = None,
    error: Annotated[str | None, typer.Option("--error", help="The error it gave.")] = None,
    state: StateOpt = _DEFAULT,
    as_json: JsonOpt = False,
) -> None:
    """Record a failed attempt; repeated identical failures are flagged as inertia."""
    with StateStore(state).update() as current:
        actions.record_failure(current, atom_id=atom_id, command=command, error=error)
        flags = [flag.message for flag in find_inertia(current)]
    message = "recorded failure" + "".join(f"\ninertia: {text}" for text in flags)
    _done(message, as_json, current, state)


@record_app.command("abandon")
def record_abandon(
    atom_id: Annotated[str, typer.Argument(help="Atom id.")],
    switch_to: Annotated[
        str | None,
        typer.Option("--switch-to", help="Alternative in the same OR group to switch to."),
    ] = None,
    note: NoteOpt = None,
    state: StateOpt = _DEFAULT,
    as_json: JsonOpt = False,
) -> None:
    """Abandon an atom, optionally switching to an OR alternative (counts an OR switch)."""
    with StateStore(state).update() as current:
        actions.abandon_atom(current, atom_id, switch_to=switch_to, note=note)
    target = f", switched to {switch_to}" if switch_to else ""
    _done(f"abandoned atom {atom_id}{target}", as_json, current, state)


@record_app.command("confirm")
def record_confirm(
    check_name: Annotated[str, typer.Argument(help="Name of a judgment check.")],
    by: Annotated[str, typer.Option("--by", help="Who confirms it.")],
    note: NoteOpt = None,
    state: StateOpt = _DEFAULT,
    as_json: JsonOpt = False,
) -> None:
    """Record a person's confirmation of a judgment check."""
    with StateStore(state).update() as current:
        actions.confirm_judgment(current, check_name, by=by, note=note)
    _done(f"confirmed {check_name} by {by}", as_json, current, state)


@record_app.command("stop")
def record_stop(note: NoteOpt = None, state: StateOpt = _DEFAULT, as_json: JsonOpt = False) -> None:
    """Request a stop: the next decision ends the work with stop reason `stopped`."""
    with StateStore(state).update() as current:
        actions.request_stop(current, note)
    _done("stop requested", as_json, current, state)


@record_app.command("redirect")
def record_redirect(
    note: NoteOpt = None,
    clear: Annotated[bool, typer.Option("--clear", help="The redirect is done.")] = False,
    state: StateOpt = _DEFAULT,
    as_json: JsonOpt = False,
) -> None:
    """Request a redirect (an interruption, not a stop), or clear it with --clear."""
    with StateStore(state).update() as current:
        if clear:
            current.control.redirect_requested = False
            current.control.redirect_note = None
        else:
            actions.request_redirect(current, note)
    _done("redirect cleared" if clear else "redirect requested", as_json, current, state)


@record_app.command("resume")
def record_resume(state: StateOpt = _DEFAULT, as_json: JsonOpt = False) -> None:
    """Clear stop and redirect flags and the stall counter so the work can continue."""
    with StateStore(state).update() as current:
        actions.resume(current)
    _done("resumed", as_json, current, state)


@record_app.command("iteration")
def record_iteration(state: StateOpt = _DEFAULT, as_json: JsonOpt = False) -> None:
    """End one iteration (count progress, update stall) and print the decision."""
    with StateStore(state).update() as current:
        decision = advance(current)
    if as_json:
        _print_json({**_decision_dict(decision), "iteration": current.control.iteration})
    else:
        print(f"iteration {current.control.iteration}: {describe_decision(decision)}")


app.add_typer(coordinator_app, name="coordinator")
