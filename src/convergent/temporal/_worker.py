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
from convergent.temporal._guard import check_store, worker_client
from convergent.temporal._store import driver_of
from convergent.temporal._workflow import WORKFLOW_NAME, AgentWorkflow

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
    """A worker that checks its payload store, and closes its agents when it stops.

    The store is checked before the worker starts; the agents (models, MCP servers)
    are closed once it has shut down.
    """

    def __init__(self, client: Client, *, cache: AgentCache, **options: Any) -> None:
        super().__init__(client, **options)
        self.cache = cache
        self.client = client
        self.queue = str(options["task_queue"])
        self._checked = False

    async def check(self) -> None:
        """Refuse to start on a store that is not the cluster's (see `check_store`)."""
        if not self._checked:
            await check_store(self.client, self.queue, WORKFLOW_NAME)
            self._checked = True

    async def __aenter__(self) -> Worker:
        await self.check()
        return await super().__aenter__()

    async def run(self) -> None:
        """Check the store, run until shut down, then close the agents the activities built."""
        try:
            await self.check()
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

    Before it starts (``run``, ``async with``) it refuses a payload store that holds
    none of the runs in flight on its queue, and a payload it cannot read while it
    runs ends that run, naming the store (see `convergent.temporal._guard`). When it
    has shut down, it closes the agents its activities built: their models'
    connections, and the MCP servers it started for them.

    Raises:
        UserError: If ``client`` has no payload store (connect it with `connect`); when
            it starts, if its store is not the cluster's.
    """
    own = activities or Activities(ConversationLog(driver_of(client)), AgentCache())
    return _ClosingWorker(
        worker_client(client),
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
