from __future__ import annotations

import pytest

from convergent.coordinator import (
    Continue,
    Decision,
    Interrupt,
    ProgressKind,
    Stop,
    WorkflowState,
    WorkflowStatus,
    advance,
    apply_decision,
    decide,
    request_redirect,
    request_stop,
    resolve_atom,
)
from convergent.stop import STOP_PRIORITY, StopReason

from .conftest import make_state


def _state(
    *,
    redirect: bool = False,
    stop: bool = False,
    completed: bool = False,
    stalled: bool = False,
    at_limit: bool = False,
) -> WorkflowState:
    state = make_state(3, max_iterations=5, max_stall_count=2)
    if redirect:
        request_redirect(state, "switch to the v2 API")
    if stop:
        request_stop(state, "user pressed stop")
    if completed:
        state.control.status = WorkflowStatus.COMPLETED
    if stalled:
        state.control.stall_count = 2
    if at_limit:
        state.control.iteration = 5
    return state


def _kind(decision: Decision) -> str | StopReason:
    match decision:
        case Stop(reason=reason):
            return reason
        case Interrupt():
            return "interrupt"
        case Continue():
            return "continue"
    raise AssertionError(decision)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # every row of the decision flow on its own
        ({"redirect": True}, "interrupt"),
        ({"stop": True}, StopReason.STOPPED),
        ({"completed": True}, StopReason.COMPLETED),
        ({"stalled": True}, StopReason.STALLED),
        ({"at_limit": True}, StopReason.MAX_CYCLES),
        ({}, "continue"),
        # priority when several hold at once
        ({"redirect": True, "stop": True}, "interrupt"),
        ({"redirect": True, "completed": True, "stalled": True, "at_limit": True}, "interrupt"),
        ({"stop": True, "completed": True}, StopReason.STOPPED),
        ({"stop": True, "stalled": True, "at_limit": True}, StopReason.STOPPED),
        ({"completed": True, "stalled": True}, StopReason.COMPLETED),
        ({"completed": True, "at_limit": True}, StopReason.COMPLETED),
        ({"stalled": True, "at_limit": True}, StopReason.STALLED),
    ],
)
def test_decision_priority(flags: dict[str, bool], expected: str | StopReason) -> None:
    assert _kind(decide(_state(**flags))) == expected


def test_coordinator_priority_agrees_with_the_loop_vocabulary() -> None:
    order = [StopReason.STOPPED, StopReason.COMPLETED, StopReason.STALLED, StopReason.MAX_CYCLES]
    assert sorted(order, key=STOP_PRIORITY.index) == order


def test_stop_details_say_why() -> None:
    stalled = decide(_state(stalled=True))
    assert isinstance(stalled, Stop)
    assert stalled.detail == ("max_stall_count exceeded: stall_count 2 >= max_stall_count 2")
    limited = decide(_state(at_limit=True))
    assert isinstance(limited, Stop)
    assert limited.detail == "max_iterations reached: iteration 5 >= max_iterations 5"
    stopped = decide(_state(stop=True))
    assert isinstance(stopped, Stop) and stopped.detail == "stop requested: user pressed stop"
    interrupt = decide(_state(redirect=True))
    assert interrupt == Interrupt("switch to the v2 API")
    assert decide(_state()) == Continue(pending=3)


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        (StopReason.STALLED, WorkflowStatus.STOPPED),
        (StopReason.MAX_CYCLES, WorkflowStatus.STOPPED),
        (StopReason.STOPPED, WorkflowStatus.STOPPED),
        (StopReason.COMPLETED, WorkflowStatus.COMPLETED),
    ],
)
def test_apply_decision_records_status_and_reason(
    reason: StopReason, status: WorkflowStatus
) -> None:
    state = _state()
    apply_decision(state, Stop(reason, "because"))
    assert state.control.status is status
    assert state.control.stop_reason is reason
    assert state.control.stop_detail == "because"


def test_interrupt_is_not_a_stop() -> None:
    state = _state(redirect=True)
    decision = advance(state)
    assert isinstance(decision, Interrupt)
    assert state.control.status is WorkflowStatus.RUNNING
    assert state.control.stop_reason is None
    assert state.control.iteration == 0


def test_continue_after_raising_a_limit_clears_the_stop() -> None:
    state = _state(at_limit=True)
    assert isinstance(advance(state), Stop)
    assert state.control.to_data()["status"] == "stopped"
    state.control.max_iterations = 10
    assert isinstance(advance(state), Continue)
    assert state.control.status is WorkflowStatus.RUNNING
    assert state.control.stop_reason is None


def test_advance_does_not_count_an_iteration_when_already_stopping() -> None:
    state = _state(stop=True)
    advance(state)
    assert state.control.iteration == 0
    assert state.control.pending_history == []
    assert state.control.stop_reason is StopReason.STOPPED


def test_seed_hook_flow_over_iterations() -> None:
    """Progress resets the stall count, stalls add up, and max_stall_count stops the work."""
    state = make_state(3, max_iterations=10, max_stall_count=2)
    assert advance(state) == Continue(3)  # first observation
    resolve_atom(state, "p0")
    assert advance(state) == Continue(2)  # progress
    assert state.control.last_progress is ProgressKind.PROGRESS
    assert advance(state) == Continue(2)  # stall 1
    assert state.control.stall_count == 1
    decision = advance(state)  # stall 2 -> stop
    assert isinstance(decision, Stop) and decision.reason is StopReason.STALLED
    assert state.control.status is WorkflowStatus.STOPPED
    assert state.control.stop_detail == decision.detail
    assert state.control.iteration == 4
    assert state.control.pending_history == [3, 2, 2, 2]


def test_iteration_limit_counts_completed_iterations() -> None:
    state = make_state(5, max_iterations=3, max_stall_count=10)
    decisions = []
    for atom_id in ("p0", "p1", "p2"):
        resolve_atom(state, atom_id)
        decisions.append(_kind(advance(state)))
    assert decisions == ["continue", "continue", StopReason.MAX_CYCLES]
    assert state.control.iteration == 3


def test_stall_and_limit_on_the_same_iteration_reports_stall() -> None:
    state = make_state(2, max_iterations=2, max_stall_count=1)
    advance(state)
    decision = advance(state)
    assert isinstance(decision, Stop) and decision.reason is StopReason.STALLED
