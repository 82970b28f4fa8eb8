"""The continue/stop decision, taken in a fixed priority order.

When several conditions hold at once the first one in this list wins:

1. ``redirect_requested`` -> `Interrupt`: new instructions are coming; not a stop.
2. ``stop_requested`` -> `Stop` with `StopReason.STOPPED`.
3. base case satisfied (``status: completed``) -> `Stop` with `StopReason.COMPLETED`.
4. ``stall_count >= max_stall_count`` -> `Stop` with `StopReason.STALLED`.
5. ``iteration >= max_iterations`` -> `Stop` with `StopReason.MAX_CYCLES`.
6. otherwise -> `Continue`.

A redirect is not a stop, so it is answered first; the stops are chosen by the loop's
own `convergent.stop.decide` from the state's facts (its `STOP_PRIORITY` gives the
order above), and worded here in the coordinator's terms. `decide` only reads the
state; `apply_decision` records the outcome, and `advance` combines both with the
end-of-iteration bookkeeping of `observe_iteration`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from convergent import stop
from convergent.coordinator.progress import observe_iteration, pending_count
from convergent.coordinator.state import WorkflowState, WorkflowStatus
from convergent.stop import StopReason

__all__ = [
    "Continue",
    "Decision",
    "Interrupt",
    "Stop",
    "advance",
    "apply_decision",
    "decide",
    "describe_decision",
]


@dataclass(frozen=True, slots=True)
class Continue:
    """Keep iterating: nothing says stop."""

    pending: int
    """Unresolved units of work left."""


@dataclass(frozen=True, slots=True)
class Interrupt:
    """A redirect is in progress: let the current agent stop without ending the work."""

    note: str
    """The redirect's instructions or reason, if any were recorded."""


@dataclass(frozen=True, slots=True)
class Stop:
    """The work ends, for the given reason."""

    reason: StopReason
    """The objective reason, in the library's stop vocabulary."""
    detail: str
    """The reason in words, recorded as ``control.stop_detail``."""


Decision = Continue | Interrupt | Stop
"""What to do after an iteration."""


def decide(state: WorkflowState) -> Decision:
    """Decide from the state alone, in the priority order of the module docstring."""
    control = state.control
    if control.redirect_requested:
        return Interrupt(control.redirect_note or "redirect requested")
    stalled = control.stall_count >= control.max_stall_count
    facts = stop.Facts(
        stop_requested=control.stop_requested,
        answered=control.status is WorkflowStatus.COMPLETED,
        verdict=True if control.status is WorkflowStatus.COMPLETED else None,
        stall=stop.Stall(what="the unresolved work", times=control.stall_count)
        if stalled
        else None,
        limit=stop.LimitReached(
            limit="max_cycles", used=control.iteration, maximum=control.max_iterations
        )
        if control.iteration >= control.max_iterations
        else None,
    )
    decision = stop.decide(facts)
    if isinstance(decision, stop.Stop):
        return Stop(decision.reason, _detail(decision.reason, state))
    return Continue(pending_count(state.atoms))


def _detail(reason: StopReason, state: WorkflowState) -> str:
    """The stop in the coordinator's words (iterations, stall counts, checks)."""
    control = state.control
    match reason:
        case StopReason.STOPPED:
            note = f": {control.stop_note}" if control.stop_note else ""
            return f"stop requested{note}"
        case StopReason.COMPLETED:
            passed = len(state.base_case.last_results)
            return f"base case satisfied ({passed} check(s) passed)"
        case StopReason.STALLED:
            return (
                f"max_stall_count exceeded: stall_count {control.stall_count} >= "
                f"max_stall_count {control.max_stall_count}"
            )
        case _:
            return (
                f"max_iterations reached: iteration {control.iteration} >= "
                f"max_iterations {control.max_iterations}"
            )


def apply_decision(state: WorkflowState, decision: Decision) -> None:
    """Record a decision in ``control``: status, stop reason and its text.

    A `Continue` marks the workflow running again (for example after a limit was raised);
    an `Interrupt` changes nothing, because a redirect is not a stop.
    """
    control = state.control
    match decision:
        case Stop(reason=reason, detail=detail):
            completed = reason is StopReason.COMPLETED
            control.status = WorkflowStatus.COMPLETED if completed else WorkflowStatus.STOPPED
            control.stop_reason = reason
            control.stop_detail = detail
        case Continue():
            control.status = WorkflowStatus.RUNNING
            control.stop_reason = None
            control.stop_detail = None
        case Interrupt():
            pass
        case _:
            assert_never(decision)


def advance(state: WorkflowState) -> Decision:
    """End one iteration: decide, and only if nothing already says stop, count progress.

    A redirect, stop request, completed base case or an already reached limit is answered
    without counting an iteration. Otherwise the iteration is observed (iteration,
    unresolved count, stall counter) and the decision is taken again on the new counts.
    The decision is recorded in the state and returned.
    """
    decision = decide(state)
    if isinstance(decision, Continue):
        observe_iteration(state)
        decision = decide(state)
    apply_decision(state, decision)
    return decision


def describe_decision(decision: Decision) -> str:
    """One line for people: ``continue (2 unresolved)``, ``stop (stalled): ...``."""
    match decision:
        case Continue(pending=pending):
            return f"continue ({pending} unresolved)"
        case Interrupt(note=note):
            return f"interrupt: {note}"
        case Stop(reason=reason, detail=detail):
            return f"stop ({reason}): {detail}"
        case _:
            assert_never(decision)
