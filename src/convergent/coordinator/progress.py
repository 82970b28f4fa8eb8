"""Progress as shrinking unresolved work: counting atoms, and progress, stall or expansion.

Progress is measured, not claimed: an iteration made progress only when fewer atoms are
unresolved at its end than at the end of the previous one. An equal count is a stall and
a larger count is an expansion (over-decomposition); both increment ``stall_count``, and
progress resets it to zero.
"""

from __future__ import annotations

from convergent.coordinator.state import (
    HISTORY_LIMIT,
    Atom,
    AtomStatus,
    ProgressKind,
    WorkflowState,
)

__all__ = [
    "blocked_atoms",
    "evaluate_progress",
    "observe_iteration",
    "pending_count",
    "ready_atoms",
    "resolved_count",
    "unresolved_atoms",
]

_DONE = (AtomStatus.RESOLVED, AtomStatus.ABANDONED)


def _resolved_groups(atoms: list[Atom]) -> set[str]:
    return {a.or_group for a in atoms if a.or_group and a.status is AtomStatus.RESOLVED}


def unresolved_atoms(atoms: list[Atom]) -> list[Atom]:
    """Atoms that still need work.

    Resolved and abandoned atoms are done; so are the remaining alternatives of an OR
    group once one of its atoms is resolved.
    """
    done_groups = _resolved_groups(atoms)
    return [
        atom
        for atom in atoms
        if atom.status not in _DONE and not (atom.or_group and atom.or_group in done_groups)
    ]


def pending_count(atoms: list[Atom]) -> int:
    """The number of unresolved units of work (|unresolved atoms| in the seed's terms).

    Alternatives in one unresolved OR group count once, because only one of them has to
    be done; a group whose alternatives were all abandoned still counts as one.
    """
    done_groups = _resolved_groups(atoms)
    count = 0
    open_groups: set[str] = set()
    for atom in atoms:
        if atom.or_group:
            if atom.or_group not in done_groups:
                open_groups.add(atom.or_group)
        elif atom.status not in _DONE:
            count += 1
    return count + len(open_groups)


def resolved_count(atoms: list[Atom]) -> int:
    """The number of atoms marked resolved."""
    return sum(1 for atom in atoms if atom.status is AtomStatus.RESOLVED)


def _dependencies_met(atom: Atom, by_id: dict[str, Atom], done_groups: set[str]) -> bool:
    for dep_id in atom.depends_on:
        dep = by_id[dep_id]
        if dep.status is AtomStatus.RESOLVED or (dep.or_group and dep.or_group in done_groups):
            continue
        return False
    return True


def ready_atoms(atoms: list[Atom]) -> list[Atom]:
    """Unresolved atoms whose dependencies are all resolved: work that can start now."""
    by_id = {atom.id: atom for atom in atoms}
    done_groups = _resolved_groups(atoms)
    return [a for a in unresolved_atoms(atoms) if _dependencies_met(a, by_id, done_groups)]


def blocked_atoms(atoms: list[Atom]) -> list[Atom]:
    """Unresolved atoms still waiting on an unresolved dependency."""
    ready = {atom.id for atom in ready_atoms(atoms)}
    return [atom for atom in unresolved_atoms(atoms) if atom.id not in ready]


def evaluate_progress(previous: int, current: int) -> ProgressKind:
    """Compare unresolved counts of two consecutive iterations."""
    if current < previous:
        return ProgressKind.PROGRESS
    if current == previous:
        return ProgressKind.STALL
    return ProgressKind.EXPANSION


def observe_iteration(state: WorkflowState) -> ProgressKind | None:
    """Record the end of one iteration: count, compare, update the stall counter.

    Increments ``control.iteration``, appends the unresolved count to
    ``control.pending_history`` and sets ``stall_count`` (reset on progress, incremented
    on stall or expansion). The first observation has nothing to compare with; it only
    records the count and returns None.
    """
    control = state.control
    current = pending_count(state.atoms)
    previous = control.pending_history[-1] if control.pending_history else None
    kind = None if previous is None else evaluate_progress(previous, current)
    if kind is ProgressKind.PROGRESS:
        control.stall_count = 0
    elif kind is not None:
        control.stall_count += 1
    control.last_progress = kind
    control.iteration += 1
    control.pending_history = [*control.pending_history, current][-HISTORY_LIMIT:]
    return kind
