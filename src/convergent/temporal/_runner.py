"""Submitting, steering and following runs on a Temporal cluster, from any process.

`TemporalRunner` is the client side: it starts a run (a workflow named by the run's id)
from a `RunRecipe` and a task, and hands back a `TemporalRun` to follow it (the
``progress`` query), steer it (signals), answer its question, wait for its result, or
continue it after a resumable stop (a new workflow run from the stopped state).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.service import RPCError

from convergent.exceptions import UserError
from convergent.messages import Usage
from convergent.recipe import RunRecipe
from convergent.result import RunResult
from convergent.state import RunState, ToolCallRecord
from convergent.steering import SteeringKind
from convergent.stop import StopReason
from convergent.temporal._payloads import RunStart
from convergent.temporal._worker import DEFAULT_TASK_QUEUE
from convergent.temporal._workflow import WORKFLOW_NAME

__all__ = ["RunInfo", "TemporalRun", "TemporalRunner", "connect"]


async def connect(address: str, *, namespace: str = "default", wait: float = 3.0) -> Client:
    """A client of the Temporal cluster at ``HOST:PORT``.

    Raises:
        UserError: If nothing answers there within ``wait`` seconds.
    """
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        try:
            return await Client.connect(address, namespace=namespace)
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
    """Cycles it ran, once it stopped."""
    started_at: float
    """Unix time the workflow started."""


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
        """Cycles, usage, the open question and the events after ``after``."""
        data: dict[str, Any] = await self.handle.query("progress", after)
        return data

    async def steer(self, kind: str, text: str = "") -> None:
        """Send ``message``, ``stop``, ``pause`` or ``resume``.

        Raises:
            UserError: For an unknown kind, or a run that is not running.
        """
        try:
            SteeringKind(kind)
        except ValueError:
            raise UserError(f"unknown steering command {kind!r}") from None
        await self._signal("steer", kind, text)

    async def answer(self, text: str) -> None:
        """Answer the question the run waits on."""
        await self._signal("answer", text)

    async def _signal(self, name: str, *args: Any) -> None:
        try:
            await self.handle.signal(name, args=list(args))
        except RPCError as exc:
            raise UserError(f"run {self.run_id!r} is not running ({exc.message})") from None

    async def outcome(self) -> tuple[RunResult, RunState, RunRecipe]:
        """Wait for the run to stop; its result, final state and recipe.

        Raises:
            UserError: If the workflow failed or was terminated.
        """
        try:
            data: dict[str, Any] = await self.handle.result()
        except WorkflowFailureError as exc:
            raise UserError(f"run {self.run_id!r} failed on the cluster: {exc.cause}") from None
        return (
            result_of(data["result"]),
            RunState.from_jsonable(data["state"]),
            RunRecipe.from_json(data["recipe"]),
        )

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


def result_of(data: dict[str, Any]) -> RunResult:
    """A `RunResult` from its ``to_dict`` form (no messages or events: the state has them)."""
    usage = data["usage"]
    return RunResult(
        run_id=data["run_id"],
        output=data["output"],
        output_after_stop=bool(data.get("output_after_stop", False)),
        stop_reason=StopReason(data["stop_reason"]),
        stop_detail=data["stop_detail"],
        cycles=data["cycles"],
        tool_calls=tuple(
            ToolCallRecord(
                cycle=call["cycle"],
                id=call.get("id", ""),
                name=call["name"],
                arguments=call["arguments"],
                ok=call["ok"],
                outcome=call["outcome"],
                result=call["result"],
                duration=call.get("duration", 0.0),
            )
            for call in data["tool_calls"]
        ),
        usage=Usage(
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            requests=usage["requests"],
            cost=usage["cost"],
        ),
        messages=(),
    )


class TemporalRunner:
    """Starts and finds runs on a Temporal cluster.

    Example:
        >>> runner = await TemporalRunner.connect("127.0.0.1:7233")
        >>> run = await runner.start(RunRecipe(model="openai:gpt-4o-mini"), "What is 17*23?")
        >>> result = await run.result()

    Args:
        client: A connected client.
        task_queue: The queue the workers listen on.
    """

    def __init__(self, client: Client, task_queue: str = DEFAULT_TASK_QUEUE) -> None:
        self.client = client
        self.task_queue = task_queue

    @classmethod
    async def connect(
        cls, address: str, *, task_queue: str = DEFAULT_TASK_QUEUE, namespace: str = "default"
    ) -> TemporalRunner:
        """Connect to the cluster at ``HOST:PORT``.

        Raises:
            UserError: If it cannot be reached.
        """
        return cls(await connect(address, namespace=namespace), task_queue)

    async def start(
        self, recipe: RunRecipe, task: str, *, run_id: str, cycles_per_run: int | None = None
    ) -> TemporalRun:
        """Start a run of ``task``.

        Args:
            recipe: The agent.
            task: The task.
            run_id: The run's id (its workflow id).
            cycles_per_run: Hand the run over to a fresh workflow run (continue-as-new)
                after this many cycles; default: when Temporal suggests it, as the
                history grows long.

        Raises:
            UserError: If a run with this id exists, or the recipe has MCP servers
                (their tools are not offered through Temporal yet).
        """
        if recipe.mcp_servers:
            raise UserError("MCP servers cannot be used in Temporal runs yet")
        start = RunStart(
            recipe=recipe.model_dump(mode="json"),
            run_id=run_id,
            task=task,
            cycles_per_run=cycles_per_run,
        )
        return await self._start(start, WorkflowIDReusePolicy.REJECT_DUPLICATE)

    async def continue_run(
        self,
        run_id: str,
        *,
        answer: str | None = None,
        recipe: RunRecipe | None = None,
    ) -> TemporalRun:
        """Continue a run that stopped for a resumable reason, as a new workflow run.

        Raises:
            UserError: If it is running, ended ``completed`` or is unknown.
        """
        previous = self.run(run_id)
        description = await self._describe(previous)
        if description.status == WorkflowExecutionStatus.RUNNING:
            raise UserError(f"run {run_id!r} is still running")
        result, state, stored = await previous.outcome()
        if not result.stop_reason.resumable:
            raise UserError(f"run {run_id!r} ended {result.stop_reason.value}; nothing to resume")
        pending = [call.id for call in state.pending_calls()]
        if answer is None and pending and result.stop_reason is StopReason.NEEDS_USER:
            raise UserError(f"run {run_id!r} waits for an answer (pass --answer TEXT)")
        chosen = recipe or stored
        start = RunStart(
            recipe=chosen.model_dump(mode="json"),
            run_id=run_id,
            state=state.to_jsonable(),
            answers={call_id: answer for call_id in pending} if answer is not None else {},
        )
        return await self._start(start, WorkflowIDReusePolicy.ALLOW_DUPLICATE)

    async def _start(self, start: RunStart, policy: WorkflowIDReusePolicy) -> TemporalRun:
        try:
            handle = await self.client.start_workflow(
                WORKFLOW_NAME,
                start,
                id=start.run_id,
                task_queue=self.task_queue,
                id_reuse_policy=policy,
                execution_timeout=timedelta(days=30),
            )
        except RPCError as exc:
            raise UserError(f"cannot start run {start.run_id!r}: {exc.message}") from None
        return TemporalRun(handle, self)

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
                )
            )
            if len(runs) >= limit:
                break
        return runs
