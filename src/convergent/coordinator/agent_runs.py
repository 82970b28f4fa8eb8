"""Drive convergent's own agent runs with the coordinator until the base case passes.

Each base case check is mirrored as an atom ``check:<name>``, resolved while the check
passes and pending while it fails, so progress is the number of failing checks shrinking
and a run that fixes nothing stalls. Each iteration is one `Agent.run`; from the second
on, the task is followed by the evidence of the checks that still fail. An agent run
that does not end ``completed`` is recorded as a failed attempt, so the same failure
repeated is flagged by the no-inertia-loops rule.
"""

from __future__ import annotations

from typing import Any

from convergent.agent import Agent
from convergent.coordinator import actions
from convergent.coordinator.checks import CheckResult
from convergent.coordinator.controller import AttemptReport, Coordinator, CoordinatorResult, Failure
from convergent.coordinator.state import AtomStatus, WorkflowState
from convergent.coordinator.store import StateStore
from convergent.exceptions import UserError
from convergent.stop import StopReason

__all__ = ["CHECK_ATOM_PREFIX", "coordinate_agent", "follow_up_task"]

CHECK_ATOM_PREFIX = "check:"
"""Atoms that mirror base case checks are named ``check:<check name>``."""

_TAIL = 600


def _mirror_checks(state: WorkflowState) -> None:
    known = {atom.id for atom in state.atoms}
    for check in state.base_case.checks:
        atom_id = CHECK_ATOM_PREFIX + check.name
        if atom_id not in known:
            actions.add_atom(state, atom_id, title=f"make the check {check.name} pass")


def _sync_atoms(state: WorkflowState, results: list[CheckResult]) -> None:
    for result in results:
        atom_id = CHECK_ATOM_PREFIX + result.name
        if any(atom.id == atom_id for atom in state.atoms):
            status = AtomStatus.RESOLVED if result.passed else AtomStatus.PENDING
            actions.set_atom_status(state, atom_id, status, note=result.summary)


def follow_up_task(task: str, results: list[CheckResult]) -> str:
    """The task for a later iteration: the original task plus what still fails."""
    failing = [result for result in results if not result.passed]
    if not failing:
        return task
    lines = [task, "", "The work is not done yet. These checks still fail:"]
    for result in failing:
        lines.append(f"- {result.name}: {result.summary}")
        if result.output_tail:
            lines.append("  output: " + result.output_tail[-_TAIL:].strip())
    return "\n".join(lines)


async def coordinate_agent(
    agent: Agent, task: str, store: StateStore, **run_options: Any
) -> CoordinatorResult:
    """Run ``agent`` on ``task`` once per iteration until the base case holds.

    Stops with the loop's own vocabulary: ``completed`` when every check passes,
    ``stalled`` when the failing checks stop shrinking for ``max_stall_count``
    iterations, ``max_cycles`` at ``max_iterations``, ``stopped`` on request. The
    result's ``outcomes`` hold one `AttemptReport` per run, its ``result`` the run's
    `RunResult`.

    Args:
        agent: The agent to run.
        task: What it should achieve; the base case in ``store`` says when it has.
        store: The workflow state file with at least one base case check.
        **run_options: Passed to every `Agent.run` (``on_event``, ``steering``...).

    Raises:
        UserError: If the base case has no checks.
    """
    with store.update() as state:
        if not state.base_case.checks:
            raise UserError(
                "the base case has no checks, so nothing could ever show the work is done"
            )
        _mirror_checks(state)

    async def attempt(iteration: int) -> AttemptReport:
        results = store.load().base_case.last_results
        result = await agent.run(follow_up_task(task, results), **run_options)
        failures = []
        if result.stop_reason is not StopReason.COMPLETED:
            failures.append(
                Failure(
                    command="agent run",
                    error=f"{result.stop_reason.value}: {result.stop_detail}",
                )
            )
        return AttemptReport(failures=failures, result=result)

    coordinator = Coordinator(store, on_verified=_sync_atoms)
    return await coordinator.run(attempt)
