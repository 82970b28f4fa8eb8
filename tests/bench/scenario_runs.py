"""Running convergence tasks for the tests: each task of a scenario under one policy."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from convergent.bench.convergence import Policy, Task, TaskOutcome, build_tasks, run_task


def tasks(scenario: str, per_scenario: int = 10) -> list[Task]:
    """The scenario's tasks for seed 0."""
    return build_tasks(seed=0, per_scenario=per_scenario, scenarios=[scenario])


def run_all(built: Sequence[Task], policy: Policy) -> list[TaskOutcome]:
    """Each task run under ``policy``, in order."""

    async def all_of() -> list[TaskOutcome]:
        return [await run_task(task, policy) for task in built]

    return asyncio.run(all_of())


def outcomes(scenario: str, policy: Policy, per_scenario: int = 10) -> list[TaskOutcome]:
    """The scenario's tasks for seed 0, each run under ``policy``."""
    return run_all(tasks(scenario, per_scenario), policy)
