from __future__ import annotations

import pytest

from convergent.coordinator import (
    Atom,
    AtomStatus,
    ProgressKind,
    WorkflowState,
    evaluate_progress,
    observe_iteration,
    pending_count,
    resolve_atom,
    resolved_count,
)
from convergent.coordinator.progress import blocked_atoms, ready_atoms, unresolved_atoms

from .conftest import make_state


@pytest.mark.parametrize(
    ("previous", "current", "kind"),
    [
        (5, 4, ProgressKind.PROGRESS),
        (4, 4, ProgressKind.STALL),
        (3, 5, ProgressKind.EXPANSION),
        (1, 0, ProgressKind.PROGRESS),
        (0, 0, ProgressKind.STALL),
    ],
)
def test_evaluate_progress(previous: int, current: int, kind: ProgressKind) -> None:
    assert evaluate_progress(previous, current) is kind


def _set_pending(state: WorkflowState, count: int) -> None:
    """Make exactly `count` atoms unresolved, adding atoms when needed."""
    while len(state.atoms) < count:
        state.atoms = [*state.atoms, Atom(id=f"n{len(state.atoms)}")]
    for index, atom in enumerate(state.atoms):
        atom.status = AtomStatus.PENDING if index < count else AtomStatus.RESOLVED


def test_seed_example_5_4_4_3() -> None:
    state = make_state(5)
    seen = []
    for pending in (5, 4, 4, 3):
        _set_pending(state, pending)
        kind = observe_iteration(state)
        seen.append((state.control.iteration, pending, kind, state.control.stall_count))
    assert seen == [
        (1, 5, None, 0),
        (2, 4, ProgressKind.PROGRESS, 0),
        (3, 4, ProgressKind.STALL, 1),
        (4, 3, ProgressKind.PROGRESS, 0),
    ]
    assert state.control.pending_history == [5, 4, 4, 3]


def test_consecutive_stalls_accumulate() -> None:
    state = make_state(4)
    for _ in range(4):
        observe_iteration(state)
    assert state.control.stall_count == 3
    assert state.control.last_progress is ProgressKind.STALL


def test_expansion_counts_as_no_progress() -> None:
    state = make_state(3)
    observe_iteration(state)
    _set_pending(state, 6)
    assert observe_iteration(state) is ProgressKind.EXPANSION
    assert state.control.stall_count == 1
    assert state.control.last_progress is ProgressKind.EXPANSION
    assert state.control.pending_history == [3, 6]
    _set_pending(state, 2)
    assert observe_iteration(state) is ProgressKind.PROGRESS
    assert state.control.stall_count == 0


def test_history_is_bounded() -> None:
    state = make_state(1)
    for _ in range(250):
        observe_iteration(state)
    assert len(state.control.pending_history) == 200
    assert state.control.iteration == 250


def _or_state() -> WorkflowState:
    return WorkflowState(
        atoms=[
            Atom(id="a"),
            Atom(id="jwt", or_group="tokens"),
            Atom(id="opaque", or_group="tokens"),
            Atom(id="b", depends_on=["a", "jwt"]),
        ]
    )


def test_or_group_counts_once_and_closes_when_one_alternative_resolves() -> None:
    state = _or_state()
    assert pending_count(state.atoms) == 3
    resolve_atom(state, "opaque")
    assert pending_count(state.atoms) == 2
    assert [a.id for a in unresolved_atoms(state.atoms)] == ["a", "b"]
    assert resolved_count(state.atoms) == 1


def test_or_group_with_all_alternatives_abandoned_is_still_open() -> None:
    state = _or_state()
    state.atom("jwt").status = AtomStatus.ABANDONED
    state.atom("opaque").status = AtomStatus.ABANDONED
    assert pending_count(state.atoms) == 3


def test_ready_and_blocked_follow_dependencies() -> None:
    state = _or_state()
    assert [a.id for a in ready_atoms(state.atoms)] == ["a", "jwt", "opaque"]
    assert [a.id for a in blocked_atoms(state.atoms)] == ["b"]
    resolve_atom(state, "a")
    resolve_atom(state, "opaque")  # the OR group is done, so b's dependency on jwt is met
    assert [a.id for a in ready_atoms(state.atoms)] == ["b"]
    assert blocked_atoms(state.atoms) == []
