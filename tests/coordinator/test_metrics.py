from __future__ import annotations

from convergent.coordinator import (
    Atom,
    ProgressKind,
    WorkflowStatus,
    abandon_atom,
    health,
    metrics,
    observe_iteration,
    record_failure,
    resolve_atom,
)

from .conftest import make_state


def test_metrics_track_the_seed_numbers() -> None:
    state = make_state(3, 2, max_iterations=9, max_stall_count=4)
    state.atoms = [*state.atoms, Atom(id="a", or_group="g"), Atom(id="b", or_group="g")]
    observe_iteration(state)
    resolve_atom(state, "p0")
    abandon_atom(state, "a", switch_to="b")
    observe_iteration(state)
    m = metrics(state)
    assert m.iteration == 2
    assert m.max_iterations == 9
    assert m.pending_count == 3  # p1, p2 and the open OR group
    assert m.resolved_count == 3
    assert m.stall_count == 0
    assert m.max_stall_count == 4
    assert m.or_switches == 1
    assert m.pending_trend == "down"
    assert m.last_progress is ProgressKind.PROGRESS
    assert m.status is WorkflowStatus.RUNNING


def test_healthy_when_shrinking() -> None:
    state = make_state(3)
    observe_iteration(state)
    resolve_atom(state, "p0")
    observe_iteration(state)
    assert health(state).healthy
    assert health(state).problems == ()


def test_trend_unknown_then_flat() -> None:
    state = make_state(2, max_stall_count=10)
    assert metrics(state).pending_trend == "unknown"
    observe_iteration(state)
    observe_iteration(state)
    assert metrics(state).pending_trend == "flat"


def test_unhealthy_when_trending_up() -> None:
    state = make_state(1, max_stall_count=10)
    observe_iteration(state)
    state.atoms = [*state.atoms, Atom(id="extra")]
    observe_iteration(state)
    result = health(state)
    assert not result.healthy
    assert result.problems == ("unresolved count is trending up",)


def test_unhealthy_when_stall_approaches_or_reaches_max() -> None:
    state = make_state(1, max_stall_count=3)
    state.control.stall_count = 2
    assert health(state).problems == ("stall_count 2 is approaching max_stall_count 3",)
    state.control.stall_count = 3
    assert health(state).problems == ("stall_count 3 reached max_stall_count 3",)


def test_unhealthy_at_iteration_limit() -> None:
    state = make_state(1, max_iterations=4)
    state.control.iteration = 4
    assert health(state).problems == ("iteration 4 reached max_iterations 4",)


def test_unhealthy_when_same_atom_keeps_failing() -> None:
    state = make_state(2)
    record_failure(state, atom_id="p1", command="x")
    assert health(state).healthy
    record_failure(state, atom_id="p1", command="y")
    assert health(state).problems == ("atom p1 failed 2 times",)
