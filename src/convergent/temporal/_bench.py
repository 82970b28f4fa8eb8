"""The convergence benchmark fanned out over Temporal workers.

One workflow schedules every (task, policy) run of the suite as an activity; Temporal
spreads them over the workers of the task queue, and the client sums the outcomes up
exactly as a local run does. Each activity rebuilds the suite's tasks from its seed, so
workers need nothing but the code.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from convergent.bench.convergence import (
        Task,
        TaskOutcome,
        build_tasks,
        iter_runs,
        run_task,
        summarize,
    )
    from convergent.bench.report import SuiteResult
    from convergent.clock import current_clock

__all__ = ["BENCH_WORKFLOW", "BenchWorkflow", "bench_task", "run_convergence_on"]

BENCH_WORKFLOW = "convergent.bench"
"""Registered name of the benchmark workflow."""


@dataclass
class BenchRun:
    """One (task, policy) run of the suite."""

    seed: int
    per_scenario: int
    task: str
    policy: str


@dataclass
class BenchStart:
    """The suite to fan out."""

    seed: int
    per_scenario: int
    runs: list[list[str]] = field(default_factory=list)


@lru_cache(maxsize=8)
def _tasks(seed: int, per_scenario: int) -> dict[str, Task]:
    return {task.id: task for task in build_tasks(seed, per_scenario)}


@activity.defn(name="convergent.bench_task")
async def bench_task(run: BenchRun) -> dict[str, Any]:
    """Run one task under one policy and judge it (as `run_task` does locally)."""
    task = _tasks(run.seed, run.per_scenario)[run.task]
    outcome = await run_task(task, run.policy)  # type: ignore[arg-type]
    return dataclasses.asdict(outcome)


@workflow.defn(name=BENCH_WORKFLOW)
class BenchWorkflow:
    """Schedules every run of the suite as an activity and collects the outcomes."""

    def __init__(self) -> None:
        self.done = 0

    @workflow.run
    async def run(self, start: BenchStart) -> list[dict[str, Any]]:
        """Fan the runs out; return their outcomes in suite order."""

        async def one(task: str, policy: str) -> dict[str, Any]:
            outcome: dict[str, Any] = await workflow.execute_activity(
                "convergent.bench_task",
                BenchRun(start.seed, start.per_scenario, task, policy),
                result_type=dict,
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
            self.done += 1
            return outcome

        return list(await asyncio.gather(*(one(task, policy) for task, policy in start.runs)))

    @workflow.query(name="done")
    def finished(self) -> int:
        """How many runs have finished."""
        return self.done


async def run_convergence_on(
    client: Any,
    task_queue: str,
    seed: int = 0,
    per_scenario: int = 10,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> SuiteResult:
    """Run the convergence suite on the workers of ``task_queue``; same summary as locally."""
    tasks = build_tasks(seed, per_scenario)
    runs = [[task.id, policy] for task, policy in iter_runs(tasks)]
    handle = await client.start_workflow(
        BENCH_WORKFLOW,
        BenchStart(seed, per_scenario, runs),
        id=f"bench-{current_clock().new_id()}",
        task_queue=task_queue,
    )
    waiting = asyncio.ensure_future(handle.result())
    while not waiting.done():
        if on_progress is not None:
            try:
                on_progress(await handle.query("done"), len(runs))
            except Exception:  # a query can race the workflow's first task; report later
                pass
        await asyncio.wait({waiting}, timeout=0.5)
    outcomes = [TaskOutcome(**data) for data in waiting.result()]
    if on_progress is not None:
        on_progress(len(outcomes), len(runs))
    result = summarize(outcomes)
    details = {"seed": seed, "tasks_per_scenario": per_scenario, **result.details}
    return dataclasses.replace(result, details=details)
