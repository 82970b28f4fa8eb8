"""Changes people and programs record in the state: atoms, failures, flags, verification.

The CLI's ``record`` commands and the Python `Coordinator` both go through these
functions, so a change means the same thing whoever makes it. Each raises `UserError`
with one line when asked for something impossible (an unknown atom, a duplicate id).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from convergent.coordinator.checks import (
    CheckResult,
    Confirmation,
    JudgmentCheck,
    base_case_satisfied,
)
from convergent.coordinator.state import (
    Atom,
    AtomStatus,
    Attempt,
    WorkflowState,
    WorkflowStatus,
)
from convergent.exceptions import UserError
from convergent.stop import StopReason

__all__ = [
    "abandon_atom",
    "add_atom",
    "confirm_judgment",
    "record_failure",
    "record_verification",
    "request_redirect",
    "request_stop",
    "resolve_atom",
    "resume",
    "set_atom_status",
]

ATTEMPTS_LIMIT = 500
"""How many failed attempts the state keeps (oldest dropped first)."""


def add_atom(
    state: WorkflowState,
    atom_id: str,
    *,
    title: str = "",
    depends_on: Sequence[str] = (),
    or_group: str | None = None,
    needs_info: bool = False,
) -> Atom:
    """Add a pending atom; its dependencies must already exist.

    Raises:
        UserError: For an empty id or one with white space, a duplicate or an unknown
            dependency.
    """
    if not atom_id or any(char.isspace() for char in atom_id):
        raise UserError(f"atom id {atom_id!r} must be non-empty and without spaces")
    if any(atom.id == atom_id for atom in state.atoms):
        raise UserError(f"atom {atom_id!r} already exists")
    for dep in depends_on:
        state.atom(dep)
    atom = Atom(
        id=atom_id,
        title=title,
        depends_on=list(depends_on),
        or_group=or_group,
        needs_info=needs_info,
    )
    state.atoms = [*state.atoms, atom]
    return atom


def set_atom_status(
    state: WorkflowState, atom_id: str, status: AtomStatus, *, note: str | None = None
) -> Atom:
    """Set an atom's status (and note, when given)."""
    atom = state.atom(atom_id)
    atom.status = status
    if note is not None:
        atom.note = note
    if status is AtomStatus.RESOLVED:
        atom.needs_info = False
    return atom


def resolve_atom(state: WorkflowState, atom_id: str, *, note: str | None = None) -> Atom:
    """Mark an atom resolved, optionally with the evidence in ``note``."""
    return set_atom_status(state, atom_id, AtomStatus.RESOLVED, note=note)


def abandon_atom(
    state: WorkflowState, atom_id: str, *, switch_to: str | None = None, note: str | None = None
) -> Atom:
    """Abandon an atom; with ``switch_to``, count an OR switch to that alternative.

    The alternative must be in the same OR group; it is marked in progress.
    """
    atom = state.atom(atom_id)
    if switch_to is not None:
        target = state.atom(switch_to)
        if atom.or_group is None or target.or_group != atom.or_group:
            raise UserError(
                f"atoms {atom_id!r} and {switch_to!r} are not alternatives in one or_group"
            )
        target.status = AtomStatus.IN_PROGRESS
        state.control.or_switches += 1
    return set_atom_status(state, atom_id, AtomStatus.ABANDONED, note=note)


def record_failure(
    state: WorkflowState,
    *,
    atom_id: str | None = None,
    command: str | None = None,
    error: str | None = None,
) -> Attempt:
    """Record a failed attempt; marks the atom failed so the same approach can be spotted."""
    if atom_id is None and command is None:
        raise UserError("a failure needs an atom, a command, or both")
    if atom_id is not None:
        set_atom_status(state, atom_id, AtomStatus.FAILED)
    first_line = error.strip().splitlines()[0] if error and error.strip() else None
    attempt = Attempt(
        atom=atom_id, command=command, error=first_line, iteration=state.control.iteration
    )
    state.attempts = [*state.attempts, attempt][-ATTEMPTS_LIMIT:]
    return attempt


def confirm_judgment(
    state: WorkflowState, check_name: str, *, by: str, note: str | None = None
) -> Confirmation:
    """Record a person's confirmation of a judgment check."""
    if not by.strip():
        raise UserError("a confirmation needs the name of the person confirming")
    for check in state.base_case.checks:
        if check.name == check_name:
            if not isinstance(check, JudgmentCheck):
                raise UserError(
                    f"check {check_name!r} is a {check.kind} check; only judgment checks "
                    "take a confirmation"
                )
            check.confirmation = Confirmation(by=by.strip(), at=datetime.now(UTC), note=note)
            return check.confirmation
    raise UserError(f"no check named {check_name!r}")


def request_stop(state: WorkflowState, note: str | None = None) -> None:
    """Ask the work to stop; the next decision returns `StopReason.STOPPED`."""
    state.control.stop_requested = True
    state.control.stop_note = note


def request_redirect(state: WorkflowState, note: str | None = None) -> None:
    """Announce a redirect (new instructions): an interruption, not a stop."""
    state.control.redirect_requested = True
    state.control.redirect_note = note


def resume(state: WorkflowState) -> None:
    """Clear the stop and redirect flags and the stall counter so work can continue.

    Limits are left as they are: raise ``max_iterations`` in the file when the iteration
    limit was the reason for stopping.
    """
    control = state.control
    control.stop_requested = False
    control.stop_note = None
    control.redirect_requested = False
    control.redirect_note = None
    control.stall_count = 0
    control.hook.consecutive_blocks = 0
    if control.status is WorkflowStatus.STOPPED:
        control.status = WorkflowStatus.RUNNING
        control.stop_reason = None
        control.stop_detail = None


def record_verification(state: WorkflowState, results: list[CheckResult]) -> bool:
    """Store verification results; mark the workflow completed when the base case holds.

    A failing verification after a completion moves the workflow back to running, since
    the evidence no longer supports it. Returns whether the base case is satisfied.
    """
    control = state.control
    state.base_case.last_results = results
    state.base_case.verified_at = datetime.now(UTC)
    satisfied = base_case_satisfied(results)
    if satisfied:
        control.status = WorkflowStatus.COMPLETED
        control.stop_reason = StopReason.COMPLETED
        control.stop_detail = f"base case satisfied ({len(results)} check(s) passed)"
    elif control.status is WorkflowStatus.COMPLETED:
        control.status = WorkflowStatus.RUNNING
        control.stop_reason = None
        control.stop_detail = None
    return satisfied
