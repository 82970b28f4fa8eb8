"""A worker: runs run workflows and their activities for one task queue.

Workflow code runs in Temporal's sandbox; convergent and the libraries it imports are
passed through (imported once, outside the sandbox), because the loop's code is
deterministic by construction: it reads time and ids only from the workflow's clock.
A worker keeps conversations in the payload store of its client
(`convergent.temporal.connect`), which every worker and client of the cluster share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from convergent.temporal._activities import Activities, AgentCache
from convergent.temporal._bench import BenchWorkflow, bench_task
from convergent.temporal._conversation import ConversationLog
from convergent.temporal._store import driver_of
from convergent.temporal._workflow import AgentWorkflow

__all__ = ["DEFAULT_TASK_QUEUE", "PASSTHROUGH", "make_worker", "run_worker", "workflow_runner"]

DEFAULT_TASK_QUEUE = "convergent"
"""Task queue that runs are submitted to unless another is named."""

PASSTHROUGH: Sequence[str] = (
    "convergent",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
    "httpx",
    "httpcore",
    "anyio",
    "sniffio",
    "certifi",
    "idna",
    "h11",
    "rich",
    "markdown_it",
    "mdurl",
    "pygments",
    "yaml",
    "filelock",
    "openai",
    "anthropic",
    "jiter",
    "distro",
    "docstring_parser",
    "griffe",
    "typer",
    "click",
    "shellingham",
    "opentelemetry",
    "mcp",
    # an output schema is checked in the workflow
    "jsonschema",
    "jsonschema_specifications",
    "referencing",
    "rpds",
    "attrs",
    "attr",
)
"""Modules the sandbox shares with the worker instead of re-importing per workflow."""


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox runner, with convergent and its libraries passed through."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    )


def make_worker(
    client: Client,
    task_queue: str = DEFAULT_TASK_QUEUE,
    *,
    activities: Activities | None = None,
    max_concurrent_activities: int = 100,
) -> Worker:
    """A worker for ``task_queue`` (not started: run it, or use it as a context manager).

    Raises:
        UserError: If ``client`` has no payload store (connect it with `connect`).
    """
    own = activities or Activities(ConversationLog(driver_of(client)), AgentCache())
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow, BenchWorkflow],
        activities=[*own.all(), bench_task],
        workflow_runner=workflow_runner(),
        max_concurrent_activities=max_concurrent_activities,
    )


async def run_worker(
    client: Client, task_queue: str = DEFAULT_TASK_QUEUE, *, stop: asyncio.Event | None = None
) -> None:
    """Run a worker until ``stop`` is set (or forever), then close its agents."""
    activities = Activities(ConversationLog(driver_of(client)), AgentCache())
    worker = make_worker(client, task_queue, activities=activities)
    try:
        async with worker:
            await (stop or asyncio.Event()).wait()
    finally:
        await activities.cache.aclose()
