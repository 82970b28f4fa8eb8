"""A worker's guard against payloads it cannot read: it never wedges a run.

A workflow's history holds references to payloads in the store. A worker whose store
lacks one (another store, rows deleted or damaged) cannot replay the history: the
workflow task would fail and be retried for ever, the run staying ``running`` and
deaf to ``steer --stop``. Two guards keep that from happening:

- A worker refuses to start on a store that holds none of the payloads of the runs in
  flight on its task queue (each run's memo keeps the claim of the probe its client
  stored, see `store_probe`), unless a claim names this very store (a store that lost
  or damaged rows, the probes' among them): it is not the cluster's store.
- A worker that meets a payload its store cannot read, or a store that cannot keep
  one (a full disk), ends the run it belongs to at once, by terminating its workflow
  with a reason that names the store and what is wrong (details: the failure's type),
  which clients report as the run's one-line error. (Otherwise a workflow task that
  cannot store its commands' payloads would be retried for ever, and a tool whose
  result cannot be kept would be blamed for it.)
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    ActivitySerializationContext,
    ExternalStorage,
    SerializationContext,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from convergent.exceptions import UserError
from convergent.temporal._store import (
    ENDS_RUN,
    UNREADABLE,
    driver_of,
    read_probe,
    same_store,
    store_name,
)

__all__ = ["PROBE_MEMO", "check_store", "worker_client"]

PROBE_MEMO = "probe"
"""Memo key of the claim of a run's probe (the payload its client stored at its start)."""

_RUNS_CHECKED = 20
"""Runs in flight whose probes a starting worker reads."""

T = TypeVar("T")

Ending = Callable[[str, ApplicationError], Awaitable[None]]
"""Ends the workflow of that id, which a payload its store cannot read belongs to."""


class _EndingDriver(StorageDriver):
    """The store, for one workflow's payloads: a payload it cannot read ends the workflow."""

    def __init__(self, inner: StorageDriver, workflow_id: str, ending: Ending) -> None:
        self.inner = inner
        self.workflow_id = workflow_id
        self.ending = ending

    def name(self) -> str:
        """The store's name (references name it)."""
        return self.inner.name()

    def type(self) -> str:
        """The store's kind."""
        return self.inner.type()

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """Store payloads; a store that cannot keep them (a full disk) ends the workflow."""
        return await self._ending_if_it_fails(self.inner.store(context, payloads))

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """The payloads of the claims; one the store cannot read ends the workflow."""
        return await self._ending_if_it_fails(self.inner.retrieve(context, claims))

    async def _ending_if_it_fails(self, work: Awaitable[T]) -> T:
        try:
            return await work
        except ApplicationError as exc:
            if exc.type in ENDS_RUN:
                await self.ending(self.workflow_id, exc)
            raise


@dataclasses.dataclass(frozen=True)
class _EndingStorage(ExternalStorage, WithSerializationContext):
    """External storage whose copies end a workflow when one of its payloads is unreadable.

    Its copy for a workflow's own payloads, or its activities', knows the workflow.
    """

    ending: Ending | None = None

    def with_context(self, context: SerializationContext) -> _EndingStorage:
        """This storage for the payloads of one workflow (its own, or its activities')."""
        if self.ending is None or not isinstance(
            context, WorkflowSerializationContext | ActivitySerializationContext
        ):
            return self
        workflow_id = context.workflow_id
        if workflow_id is None:
            return self
        drivers = [_EndingDriver(driver, workflow_id, self.ending) for driver in self.drivers]
        return dataclasses.replace(self, drivers=drivers, ending=None)


class _Terminator:
    """Ends each workflow whose payloads cannot be read, once, by terminating it.

    The payloads of one workflow task are read concurrently, and the first read that
    fails makes Temporal cancel the others: a read waiting for the termination must not
    take it down with it. So each termination runs as a task of its own, which every
    read of that workflow's payloads waits for; one that failed (the cluster out of
    reach) is tried again by the next read that fails.
    """

    def __init__(self) -> None:
        self.client: Client | None = None
        self._ending: dict[str, asyncio.Task[None]] = {}

    async def __call__(self, workflow_id: str, error: ApplicationError) -> None:
        if self.client is None:
            return
        ending = self._ending.get(workflow_id)
        if ending is None or (ending.done() and (ending.cancelled() or ending.exception())):
            ending = asyncio.ensure_future(self._terminate(self.client, workflow_id, error))
            # its failure is seen by the reads awaiting it, or by the next one; when none
            # comes, it is not left to be reported as an exception nobody retrieved
            ending.add_done_callback(_seen)
            self._ending[workflow_id] = ending
        await asyncio.shield(ending)

    @staticmethod
    async def _terminate(client: Client, workflow_id: str, error: ApplicationError) -> None:
        try:
            await client.get_workflow_handle(workflow_id).terminate(
                error.type or "", reason=error.message
            )
        except RPCError:
            pass  # it had ended already (a child whose result an activity read)


def _seen(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


def worker_client(client: Client) -> Client:
    """``client`` for a worker: a payload the store cannot read ends its run.

    Raises:
        UserError: If ``client`` has no payload store.
    """
    driver = driver_of(client)
    config = client.config()
    converter = config["data_converter"]
    storage = converter.external_storage
    assert storage is not None
    terminator = _Terminator()
    ending = _EndingStorage(
        drivers=[driver],
        payload_size_threshold=storage.payload_size_threshold,
        ending=terminator,
    )
    config["data_converter"] = dataclasses.replace(converter, external_storage=ending)
    made = Client(**config)
    terminator.client = made
    return made


async def check_store(client: Client, task_queue: str, workflow_name: str) -> None:
    """Refuse a store that holds none of the runs in flight on ``task_queue``.

    Raises:
        UserError: Naming the store and runs, if it holds the probe of none of them.
    """
    query = (
        f"WorkflowType = '{workflow_name}' AND ExecutionStatus = 'Running' "
        f"AND TaskQueue = '{task_queue}'"
    )
    probes: list[tuple[str, dict[str, str]]] = []
    try:
        async for execution in client.list_workflows(query, limit=_RUNS_CHECKED):
            probe = (await execution.memo()).get(PROBE_MEMO)
            if isinstance(probe, dict):
                probes.append((execution.id, probe))
    except RPCError as exc:
        raise UserError(
            f"cannot list the runs of task queue {task_queue!r}: {exc.message}"
        ) from None
    if not probes:
        return
    driver = driver_of(client)
    if any(same_store(driver, claim) for _, claim in probes):
        return  # its own runs: those whose payloads it lost end when a worker meets them
    held = await asyncio.gather(*(_holds(driver, claim) for _, claim in probes))
    if any(held):
        return
    runs = ", ".join(repr(run_id) for run_id, _ in probes[:3])
    more = f" and {len(probes) - 3} more" if len(probes) > 3 else ""
    raise UserError(
        f"the payload store {store_name(driver)} holds none of the payloads of the runs in "
        f"flight on task queue {task_queue!r} ({runs}{more}): every worker and client of a "
        "cluster must use the same store (--db)"
    )


async def _holds(driver: StorageDriver, claim: dict[str, Any]) -> bool:
    try:
        await read_probe(driver, claim)
    except ApplicationError as exc:
        if exc.type in UNREADABLE:
            return False
        raise
    return True
