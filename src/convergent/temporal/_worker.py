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
from typing import Any

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
    "re2",
)
"""Modules the sandbox shares with the worker instead of re-importing per workflow."""


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox runner, with convergent and its libraries passed through."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    )


class _ClosingWorker(Worker):
    """A worker that closes its agents (models, MCP servers) once it has shut down."""

    def __init__(self, client: Client, *, cache: AgentCache, **options: Any) -> None:
        super().__init__(client, **options)
        self.cache = cache

    async def run(self) -> None:
        """Run until shut down, then close the agents the activities built."""
        try:
            await super().run()
        finally:
            await self.cache.aclose()


def make_worker(
    client: Client,
    task_queue: str = DEFAULT_TASK_QUEUE,
    *,
    activities: Activities | None = None,
    max_concurrent_activities: int = 100,
) -> Worker:
    """A worker for ``task_queue`` (not started: run it, or use it as a context manager).

    When it has shut down, it closes the agents its activities built: their models'
    connections, and the MCP servers it started for them.

    Raises:
        UserError: If ``client`` has no payload store (connect it with `connect`).
    """
    own = activities or Activities(ConversationLog(driver_of(client)), AgentCache())
    return _ClosingWorker(
        client,
        cache=own.cache,
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
    async with make_worker(client, task_queue):
        await (stop or asyncio.Event()).wait()
