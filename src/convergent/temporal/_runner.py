"""Submitting, steering and following runs on a Temporal cluster, from any process.

`TemporalRunner` is the client side: it starts a run (a workflow named by the run's id)
from an `AgentSpec` and a task, and hands back a `TemporalRun` to follow it (the
``progress`` query), steer it (signals), answer its question, wait for its result, or
continue it after a resumable stop (a new workflow run from the stopped state).
Clients and workers keep big payloads in one shared payload store
(`convergent.temporal.PayloadStore`), given to `connect`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal

from temporalio.api.enums.v1 import PendingWorkflowTaskState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.converter import StorageDriver
from temporalio.exceptions import ApplicationError, TerminatedError
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from convergent.durability.sqlite import PendingQuestion
from convergent.exceptions import ToolDefinitionError, UserError
from convergent.messages import UserMessage
from convergent.result import RunResult
from convergent.resuming import answers_for
from convergent.spec import AgentSpec
from convergent.state import RunState
from convergent.steering import SteeringKind
from convergent.stop import StopReason
from convergent.temporal._guard import PROBE_MEMO
from convergent.temporal._payloads import TASK_PREVIEW, USER_ERROR, RunStart, item_too_large
from convergent.temporal._store import (
    ENDS_RUN,
    PayloadStore,
    data_converter,
    driver_of,
    store_probe,
)
from convergent.temporal._worker import DEFAULT_TASK_QUEUE
from convergent.temporal._workflow import WORKFLOW_NAME

__all__ = ["STOP_WAIT", "RunInfo", "TemporalRun", "TemporalRunner", "check_address", "connect"]

NO_EVENTS = 2**31 - 1
"""A ``progress`` query's ``after`` beyond any run's events: the counts only."""

_ADDRESS = re.compile(
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?):(?P<port>[0-9]+)"
)

STOP_WAIT = 10.0
"""Seconds `TemporalRun.stop` waits for a run to take its stop."""
_STOP_POLL = 0.25

_USER_ERRORS = frozenset({USER_ERROR, *ENDS_RUN, ToolDefinitionError.__name__})
"""Failure types of a run that ended on a caller's mistake or a payload its workers could
not read (reported as a `UserError`, in one line)."""


def check_address(address: str) -> None:
    """Check that ``address`` has the form ``HOST:PORT``.

    Raises:
        UserError: If it has not, saying what is wrong.
    """
    match = _ADDRESS.fullmatch(address)
    if match is None:
        raise UserError(
            f"invalid Temporal address {address!r}: expected HOST:PORT, e.g. 127.0.0.1:7233"
        )
    port = match["port"]
    if not 1 <= int(port) <= 65535:
        raise UserError(
            f"invalid Temporal address {address!r}: port {port} is not between 1 and 65535"
        )


async def connect(
    address: str,
    *,
    namespace: str = "default",
    wait: float = 3.0,
    payloads: StorageDriver | None = None,
    runtime: Runtime | None = None,
) -> Client:
    """A client of the Temporal cluster at ``HOST:PORT``.

    Args:
        address: ``HOST:PORT`` of the cluster's front end.
        namespace: The Temporal namespace.
        wait: Seconds to keep trying while nothing answers.
        payloads: Where payloads over `OFFLOAD_THRESHOLD` bytes are kept, shared by every
            worker and client of the cluster (default: a `PayloadStore` in
            ``.convergent/runs.db``).
        runtime: The SDK runtime (its logging, its threads); default: the SDK's.

    Raises:
        UserError: If the address is malformed or nothing answers there within
            ``wait`` seconds.
        StorageError: If the payload store cannot be opened.
    """
    check_address(address)
    driver = payloads if payloads is not None else PayloadStore()
    if isinstance(driver, PayloadStore):
        driver.open()
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        try:
            return await Client.connect(
                address,
                namespace=namespace,
                data_converter=data_converter(driver),
                runtime=runtime,
            )
        except ValueError as exc:
            raise UserError(f"invalid Temporal address {address!r}: {exc}") from None
        except RuntimeError as exc:
            if asyncio.get_running_loop().time() >= deadline:
                raise UserError(
                    f"cannot reach the Temporal server at {address}: {_reason(exc)}"
                ) from None
            await asyncio.sleep(0.25)


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for known in ("Connection refused", "timed out", "dns error", "No route to host"):
        if known.lower() in text.lower():
            return known.lower()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if len(first) <= 120 else first[:119] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """One run on the cluster, as ``convergent runs --temporal`` lists it."""

    run_id: str
    """The run (its workflow id)."""
    status: str
    """``running``, or how the workflow ended (``completed`` means the run stopped)."""
    stop_reason: str | None
    """Why the run stopped, once it has."""
    cycles: int | None
    """Cycles it ran; while it runs, as far as it got (None if no worker answers)."""
    started_at: float
    """Unix time the workflow started."""
    task: str | None = None
    """The start of its task (None for a run started before the task was kept)."""
    parent_run_id: str | None = None
    """The run that called this one's agent as a tool (None for a top-level run)."""
    parent_call_id: str | None = None
    """The call of the parent run that started this one."""


class TemporalRun:
    """A run on the cluster: follow, steer, answer, wait for it."""

    def __init__(self, handle: WorkflowHandle[Any, Any], runner: TemporalRunner) -> None:
        self.handle = handle
        self.runner = runner

    @property
    def run_id(self) -> str:
        """The run's id (its workflow id)."""
        return self.handle.id

    async def progress(self, after: int = 0) -> dict[str, Any]:
        """Cycles, usage, the open question and the events after ``after``.

        Long texts in the events are previews (the result has them whole). A worker
        answers the query: with none, it waits.
        """
        data: dict[str, Any] = await self.handle.query("progress", after)
        return data

    async def steer(self, kind: str, text: str = "") -> None:
        """Send ``message``, ``stop``, ``pause`` or ``resume``.

        Raises:
            UserError: For an unknown kind, a run that is not running, or a message
                over the limit on one item.
        """
        try:
            SteeringKind(kind)
        except ValueError:
            raise UserError(f"unknown steering command {kind!r}") from None
        _check_item("the steering message", text)
        await self._signal("steer", kind, text)

    async def stop(self, *, wait: float = STOP_WAIT) -> Literal["stopped", "terminated", "asked"]:
        """Ask the run to stop, and see that it does; how it ended, or that it was asked.

        The stop is a ``steer`` signal, which the run takes at its next boundary, when a
        worker runs it. Within ``wait`` seconds it has ``stopped``; otherwise, when no
        worker can take it (none polls the run's task queue, or every attempt at its
        workflow task fails, as with a payload store that is not the cluster's), its
        workflow is ``terminated`` with the reason; else the stop was ``asked`` (a worker
        runs the run, and a call in flight finishes first).

        Raises:
            UserError: For a run that is not running.
        """
        await self.steer("stop", "stop requested (convergent steer --stop)")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            description = await self._describe()
            if description.status != WorkflowExecutionStatus.RUNNING:
                return "stopped"
            if loop.time() >= deadline:
                break
            await asyncio.sleep(_STOP_POLL)
        why = await self._stuck(description)
        if why is None:
            return "asked"
        try:
            await self.handle.terminate(reason=f"stopped, and {why}")
        except RPCError:  # it ended meanwhile
            return "stopped"
        return "terminated"

    async def _describe(self) -> Any:
        try:
            return await self.handle.describe()
        except RPCError as exc:
            raise UserError(f"no run {self.run_id!r} on the cluster ({exc.message})") from None

    async def _stuck(self, description: Any) -> str | None:
        """Why no worker took the run's stop, or None when one did.

        A worker that runs the run takes the signal's workflow task at once, even while
        a call is in flight; one still waiting to be taken, or failing again and again,
        means no worker can.
        """
        raw = description.raw_description
        if not raw.HasField("pending_workflow_task"):
            return None
        pending = raw.pending_workflow_task
        if pending.attempt > 1:
            return (
                f"its workflow task failed {pending.attempt - 1} times (no worker could "
                "take the stop: one that cannot read the run's payloads?)"
            )
        if pending.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
            return (
                f"no worker took the stop (none runs task queue {self.runner.task_queue!r}, "
                "or none can start)"
            )
        return None

    async def answer(self, text: str) -> None:
        """Answer the question the run waits on.

        Raises:
            UserError: For a run that is not running, or an answer over the limit on
                one item.
        """
        _check_item("the answer", text)
        await self._signal("answer", text)

    async def _signal(self, name: str, *args: Any) -> None:
        try:
            await self.handle.signal(name, args=list(args))
        except RPCError as exc:
            raise UserError(f"run {self.run_id!r} is not running ({exc.message})") from None

    async def outcome(self) -> tuple[RunResult, RunState, AgentSpec]:
        """Wait for the run to stop; its result, final state and agent spec.

        Raises:
            UserError: If the workflow failed or was terminated; with the worker's
                message alone when it failed on a caller's mistake (a spec the
                workers cannot build, another payload store).
        """
        try:
            data: dict[str, Any] = await self.handle.result()
        except WorkflowFailureError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type in _USER_ERRORS:
                raise UserError(cause.message) from None
            if isinstance(cause, TerminatedError):
                if ENDS_RUN & set(map(str, cause.details)):
                    raise UserError(cause.message) from None  # its workers could not go on
                raise UserError(f"run {self.run_id!r} was terminated: {cause.message}") from None
            raise UserError(f"run {self.run_id!r} failed on the cluster: {cause}") from None
        except ApplicationError as exc:  # this client's store lacks the result
            raise UserError(exc.message) from None
        state = RunState.from_jsonable(data["state"])
        return RunResult.from_state(state), state, AgentSpec.from_json(data["recipe"])

    async def result(self) -> RunResult:
        """Wait for the run to stop and return its result."""
        result, _, _ = await self.outcome()
        return result

    async def events(self, poll: float = 0.2) -> AsyncIterator[dict[str, Any]]:
        """The run's events as they happen (polling the ``progress`` query)."""
        seen = 0
        while True:
            try:
                progress = await self.progress(seen)
            except RPCError:
                return
            for event in progress["events"]:
                yield event
            seen = progress["event_count"]
            if not progress["running"]:
                return
            await asyncio.sleep(poll)


def _check_item(what: str, text: str) -> None:
    refused = item_too_large(what, text)
    if refused is not None:
        raise UserError(refused)


class TemporalRunner:
    """Starts and finds runs on a Temporal cluster.

    Example:
        >>> runner = await TemporalRunner.connect("127.0.0.1:7233")
        >>> run = await runner.start(AgentSpec(model="openai:gpt-4o-mini"), "What is 17*23?")
        >>> result = await run.result()

    Args:
        client: A client made by `connect` (with the payload store the workers share).
        task_queue: The queue the workers listen on.

    Raises:
        UserError: If ``client`` has no payload store.
    """

    def __init__(self, client: Client, task_queue: str = DEFAULT_TASK_QUEUE) -> None:
        self.client = client
        self.task_queue = task_queue
        self.payloads = driver_of(client)

    @classmethod
    async def connect(
        cls,
        address: str,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        namespace: str = "default",
        payloads: StorageDriver | None = None,
        runtime: Runtime | None = None,
    ) -> TemporalRunner:
        """Connect to the cluster at ``HOST:PORT`` (see `connect` for the arguments).

        Raises:
            UserError: If the address is malformed or the cluster cannot be reached.
        """
        client = await connect(address, namespace=namespace, payloads=payloads, runtime=runtime)
        return cls(client, task_queue)

    async def has_workers(self) -> bool:
        """Whether a worker polls the task queue for workflows (or did a moment ago)."""
        request = DescribeTaskQueueRequest(
            namespace=self.client.namespace,
            task_queue=TaskQueue(name=self.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
        try:
            response = await self.client.workflow_service.describe_task_queue(request)
        except RPCError as exc:
            raise UserError(
                f"cannot look at task queue {self.task_queue!r}: {exc.message}"
            ) from None
        return bool(response.pollers)

    async def start(
        self, spec: AgentSpec, task: str, *, run_id: str, cycles_per_run: int | None = None
    ) -> TemporalRun:
        """Start a run of ``task``.

        Args:
            spec: The agent.
            task: The task.
            run_id: The run's id (its workflow id).
            cycles_per_run: Hand the run over to a fresh workflow run (continue-as-new)
                after this many cycles; default: when Temporal suggests it, as the
                history grows long.

        Raises:
            UserError: If a run with this id exists, or the task is over the limit on
                one item.
        """
        _check_item("the task", task)
        start = RunStart(
            recipe=spec.to_json(),
            run_id=run_id,
            task=task,
            cycles_per_run=cycles_per_run,
        )
        return await self._start(start, WorkflowIDReusePolicy.REJECT_DUPLICATE, task)

    async def continue_run(
        self,
        run_id: str,
        *,
        answer: str | None = None,
        spec: AgentSpec | None = None,
    ) -> TemporalRun:
        """Continue a run that stopped for a resumable reason, as a new workflow run.

        Args:
            run_id: The run.
            answer: The reply to the question it stopped ``needs_user`` on.
            spec: Continue with this agent instead of the run's own.

        Raises:
            UserError: If it is running, ended ``completed`` or is unknown.
        """
        previous = self.run(run_id)
        description = await self._describe(previous)
        if description.status == WorkflowExecutionStatus.RUNNING:
            raise UserError(f"run {run_id!r} is still running")
        result, state, stored = await previous.outcome()
        if not result.stop_reason.resumable:
            reason = result.stop_reason.value
            raise UserError(f"run {run_id!r} ended {reason}; there is nothing to resume")
        asked = state.pending_calls() if result.stop_reason is StopReason.NEEDS_USER else []
        questions = [PendingQuestion(c.id, str(c.arguments.get("question", ""))) for c in asked]
        chosen = spec or stored
        start = RunStart(
            recipe=chosen.to_json(),
            run_id=run_id,
            state=state.to_jsonable(),
            answers=answers_for(run_id, questions, answer),
        )
        task = next((m.content for m in state.messages if isinstance(m, UserMessage)), "")
        return await self._start(start, WorkflowIDReusePolicy.ALLOW_DUPLICATE, task)

    async def _start(
        self, start: RunStart, policy: WorkflowIDReusePolicy, task: str
    ) -> TemporalRun:
        """Start the workflow, its memo keeping the task's start and the probe's claim.

        `list_runs` shows the task; the workers check the probe before they start
        (`convergent.temporal._guard.check_store`).
        """
        start.probe = await store_probe(self.payloads, start.run_id)
        try:
            handle = await self.client.start_workflow(
                WORKFLOW_NAME,
                start,
                id=start.run_id,
                task_queue=self.task_queue,
                id_reuse_policy=policy,
                execution_timeout=timedelta(days=30),
                memo={"task": task[:TASK_PREVIEW], PROBE_MEMO: start.probe},
            )
        except RPCError as exc:
            raise UserError(f"cannot start run {start.run_id!r}: {exc.message}") from None
        return TemporalRun(handle, self)

    async def is_running(self, run_id: str) -> bool:
        """Whether the latest workflow run of ``run_id`` is running (False if unknown)."""
        try:
            description = await self.run(run_id).handle.describe()
        except RPCError:
            return False
        return description.status == WorkflowExecutionStatus.RUNNING

    def run(self, run_id: str) -> TemporalRun:
        """The (latest) run with this id."""
        return TemporalRun(self.client.get_workflow_handle(run_id), self)

    async def _describe(self, run: TemporalRun) -> Any:
        try:
            return await run.handle.describe()
        except RPCError as exc:
            raise UserError(f"no run {run.run_id!r} on the cluster ({exc.message})") from None

    async def list_runs(self, limit: int = 20) -> list[RunInfo]:
        """The latest runs, most recent first."""
        runs: list[RunInfo] = []
        query = f"WorkflowType = '{WORKFLOW_NAME}'"
        async for execution in self.client.list_workflows(query, limit=limit):
            status = execution.status
            memo = await execution.memo()
            runs.append(
                RunInfo(
                    run_id=execution.id,
                    status=(status.name.lower() if status is not None else "unknown"),
                    stop_reason=memo.get("stop_reason"),
                    cycles=memo.get("cycles"),
                    started_at=execution.start_time.timestamp(),
                    task=memo.get("task"),
                    parent_run_id=memo.get("parent_run_id"),
                    parent_call_id=memo.get("parent_call_id"),
                )
            )
            if len(runs) >= limit:
                break
        live = [index for index, run in enumerate(runs) if run.status == "running"]
        counts = await asyncio.gather(*(self._cycles_so_far(runs[i].run_id) for i in live))
        for index, cycles in zip(live, counts, strict=True):
            runs[index] = replace(runs[index], cycles=cycles)
        return runs

    async def _cycles_so_far(self, run_id: str) -> int | None:
        """The cycles a running run has done, from its workers (None if none answers soon)."""
        try:
            # an `after` past any event: the answer carries the counts, not the events
            progress = await self.client.get_workflow_handle(run_id).query(
                "progress", NO_EVENTS, rpc_timeout=timedelta(seconds=2)
            )
        except (TimeoutError, RPCError, WorkflowQueryFailedError):
            return None
        cycles = progress.get("cycles") if isinstance(progress, dict) else None
        return cycles if isinstance(cycles, int) else None
