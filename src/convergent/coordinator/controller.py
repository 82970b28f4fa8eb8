"""Drive repeated attempts (agent runs, fix scripts) until the base case passes.

The seam is one async callable, ``attempt(iteration) -> Any``: it does one iteration of
work and may return an `AttemptReport` saying which atoms it resolved, added or failed.
Anything else it returns is kept in the result untouched, so an agent run's own result
(with its stop reason) can be returned as is. Between attempts the `Coordinator`
verifies the base case, counts progress, and decides in the fixed priority order of
`convergent.coordinator.decide`, so it stops with the same `StopReason` vocabulary as
a single agent run:

- ``completed``: every base case check passed;
- ``stopped``: a stop was requested (``request_stop``, the CLI, or the state file);
- ``stalled``: the unresolved count did not shrink for ``max_stall_count`` iterations;
- ``max_cycles``: ``max_iterations`` attempts were made.

A redirect is not a stop: the run returns with ``interrupted`` set and no stop reason,
and can be resumed by calling `Coordinator.run` again after the redirect is cleared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from convergent.coordinator import actions
from convergent.coordinator.checks import CheckResult, run_checks
from convergent.coordinator.decide import Continue, Interrupt, Stop, apply_decision, decide
from convergent.coordinator.progress import observe_iteration
from convergent.coordinator.state import Atom, WorkflowState
from convergent.coordinator.store import StateStore
from convergent.stop import StopReason

__all__ = ["AttemptFn", "AttemptReport", "Coordinator", "CoordinatorResult", "Failure"]

AttemptFn = Callable[[int], Awaitable[Any]]
"""One iteration of work: called with the 1-based iteration number."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """A failed attempt at an atom or with a command."""

    atom: str | None = None
    """The atom that was attempted, if any."""
    command: str | None = None
    """The command or approach that failed, if any."""
    error: str | None = None
    """What went wrong (the first line is kept)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptReport:
    """What an attempt changed in the work items; return it from ``attempt`` to apply it."""

    resolved: Sequence[str] = ()
    """Ids of atoms the attempt resolved."""
    added: Sequence[Atom] = ()
    """New atoms the attempt discovered (they must not exist yet)."""
    failures: Sequence[Failure] = ()
    """Failed attempts, recorded for the no-inertia-loops rule."""
    result: Any = None
    """Anything else the caller wants kept, e.g. the agent run's result."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorResult:
    """How a coordinated run ended."""

    stop_reason: StopReason | None
    """Why it stopped; None when it was interrupted by a redirect."""
    detail: str
    """The reason in words (also recorded as ``control.stop_detail``)."""
    iterations: int
    """Attempts made during this call."""
    state: WorkflowState
    """The state after the last decision."""
    checks: list[CheckResult] = field(default_factory=list)
    """The last base case verification (empty if none ran)."""
    outcomes: list[Any] = field(default_factory=list)
    """What each attempt returned, in order."""

    @property
    def interrupted(self) -> bool:
        """Whether the run was interrupted by a redirect rather than stopped."""
        return self.stop_reason is None


class Coordinator:
    """Repeat attempts until the base case holds, stopping on request, stall or limit."""

    def __init__(
        self,
        store: StateStore,
        *,
        verify_first: bool = True,
        on_verified: Callable[[WorkflowState, list[CheckResult]], None] | None = None,
    ) -> None:
        """Bind the coordinator to a state file.

        Args:
            store: The state file holding atoms, base case and control.
            verify_first: Check the base case before the first attempt, so work that is
                already done is not repeated.
            on_verified: Called with the state (inside its update, so changes are saved)
                and the results after every verification, e.g. to resolve atoms that
                mirror checks.
        """
        self.store = store
        self.verify_first = verify_first
        self.on_verified = on_verified

    def request_stop(self, note: str | None = None) -> None:
        """Ask a running (or the next) `run` to stop before its next attempt."""
        with self.store.update() as state:
            actions.request_stop(state, note)

    async def verify(self) -> list[CheckResult]:
        """Run the base case checks in a worker thread and record the results."""
        checks = self.store.load().base_case.checks
        results = await asyncio.to_thread(run_checks, checks, self.store.base_dir)
        with self.store.update() as state:
            actions.record_verification(state, results)
            if self.on_verified is not None:
                self.on_verified(state, results)
        return results

    def _apply(self, report: AttemptReport) -> None:
        with self.store.update() as state:
            for atom in report.added:
                actions.add_atom(
                    state,
                    atom.id,
                    title=atom.title,
                    depends_on=atom.depends_on,
                    or_group=atom.or_group,
                    needs_info=atom.needs_info,
                )
            for atom_id in report.resolved:
                actions.resolve_atom(state, atom_id)
            for failure in report.failures:
                actions.record_failure(
                    state, atom_id=failure.atom, command=failure.command, error=failure.error
                )

    async def run(self, attempt: AttemptFn) -> CoordinatorResult:
        """Run attempts until a decision other than continue.

        Steps, in order, for every iteration:

        1. decide from the state (a stop request, completion or reached limit ends the
           run before any work, a redirect interrupts it);
        2. await ``attempt(iteration)`` and apply its `AttemptReport`, if it returned one;
        3. verify the base case (checks run in a worker thread);
        4. count the iteration and its progress, and decide again; any stop is recorded
           in the state file.

        Exceptions raised by ``attempt`` propagate; the state keeps everything recorded
        before them.
        """
        checks: list[CheckResult] = []
        outcomes: list[Any] = []
        if self.verify_first and self.store.load().base_case.checks:
            checks = await self.verify()
        while True:
            with self.store.update() as state:
                decision = decide(state)
                if not isinstance(decision, Continue):
                    apply_decision(state, decision)
                iteration = state.control.iteration + 1
            if not isinstance(decision, Continue):
                break
            outcome = await attempt(iteration)
            outcomes.append(outcome)
            if isinstance(outcome, AttemptReport):
                self._apply(outcome)
            if self.store.load().base_case.checks:
                checks = await self.verify()
            with self.store.update() as state:
                # every attempt is an iteration, including the one that completed the work
                observe_iteration(state)
                decision = decide(state)
                apply_decision(state, decision)
            if not isinstance(decision, Continue):
                break
        final = self.store.load()
        match decision:
            case Stop(reason=reason, detail=detail):
                return CoordinatorResult(
                    stop_reason=reason,
                    detail=detail,
                    iterations=len(outcomes),
                    state=final,
                    checks=checks,
                    outcomes=outcomes,
                )
            case Interrupt(note=note):
                return CoordinatorResult(
                    stop_reason=None,
                    detail=f"interrupted: {note}",
                    iterations=len(outcomes),
                    state=final,
                    checks=checks,
                    outcomes=outcomes,
                )
        raise AssertionError("unreachable")  # pragma: no cover
