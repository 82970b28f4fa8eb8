"""Agents called as tools in a Temporal run: each call is a child workflow.

A call of an agent the spec lists in ``agents`` starts a run workflow of its own, as
a child of the calling run's workflow, under the id a local child run would have
(`convergent._run_id.child_run_id`: the caller's id, cycle and call id). The child
gets at most what the caller has left of its budgets, and what it spends counts as the
caller's, as in a local run: also when it fails, or is cancelled when its call times
out (it then fails, its spend in the failure's details).

A call's timeout asks the child to stop and cancels what it has in flight: it ends
``stopped`` at its next boundary, its usage counted, and the call fails.

A caller that makes a call again without its result (its workflow reset to before it,
a run started again from a state without it) never runs a finished child again: it
takes the child's result, waiting for it if it still runs. Only a child that did not
finish (failed, cancelled, terminated: a reset terminates the children still running)
is started afresh under its id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)
from temporalio.workflow import ChildWorkflowHandle

with workflow.unsafe.imports_passed_through():
    from convergent._run_id import child_run_id
    from convergent.builder import child_spec
    from convergent.exceptions import ToolError
    from convergent.loop.agent_tool import ChildEnd, ChildSpent, child_tool, run_depth
    from convergent.messages import Usage
    from convergent.run_context import CallContext
    from convergent.spec import AgentToolSpec
    from convergent.state import RunState
    from convergent.temporal._payloads import TASK_PREVIEW, RunStart
    from convergent.tools import Tool

__all__ = ["CHILD_RESULT", "child_workflow_tool", "spend_details"]

CHILD_RESULT = "convergent.child_result"
"""Name of the activity that waits for the result of a child started earlier."""

_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
_CHILD_TIMEOUT = timedelta(days=30)


def child_workflow_tool(child: AgentToolSpec, workspace: str | None, workflow_name: str) -> Tool:
    """The tool ``child`` stands for, its calls run as child workflows of ``workflow_name``.

    Args:
        child: The agent and its tool's name, description and timeout.
        workspace: The caller's workspace (a child that names none works in it).
        workflow_name: The run workflow's registered name.
    """
    spec = child_spec(child, workspace)

    async def run(prompt: str, caller: CallContext | None) -> ChildEnd:
        if caller is None:
            raise ToolError("an agent tool of a Temporal run is called only by the run")
        run_id = child_run_id(caller.run_id, caller.cycle, caller.call_id)
        limits = caller.child_limits(spec.limits)
        start = RunStart(
            recipe=spec.model_copy(update={"limits": limits}).to_json(),
            run_id=run_id,
            task=prompt,
            depth=run_depth(),
        )
        try:
            handle = await workflow.start_child_workflow(
                workflow_name,
                start,
                id=run_id,
                result_type=dict,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                execution_timeout=_CHILD_TIMEOUT,
                memo={
                    "task": prompt[:TASK_PREVIEW],
                    "parent_run_id": caller.run_id,
                    "parent_call_id": caller.call_id,
                },
            )
        except WorkflowAlreadyStartedError:
            done = await _earlier_child(run_id)
        else:
            done = await _ended(handle, child.timeout)
        return ChildEnd.of(RunState.from_jsonable(done["state"]))

    # the call's timeout is the child's stop request (see `_ended`), not a cancellation
    return child_tool(child.name, child.description, run, timeout=None)


async def _ended(handle: ChildWorkflowHandle[Any, Any], seconds: float | None) -> dict[str, Any]:
    """The child's result; after ``seconds``, it is asked to stop, and its stop awaited.

    The work it has in flight is cancelled (a tool call is reported interrupted to
    it), and the stop ends it ``stopped`` at its next boundary, with its usage.
    """
    if seconds is not None:
        try:
            await workflow.wait_condition(handle.done, timeout=seconds)
        except TimeoutError:
            reason = f"its caller's timeout of {seconds:g}s for this call"
            stopping = workflow.get_external_workflow_handle(handle.id)
            await stopping.signal("steer", args=["stop", reason])
            handle.cancel()  # interrupts the work in flight; the stop ends the run
    try:
        done: dict[str, Any] = await handle
    except ChildWorkflowError as exc:
        raise _failed(exc) from None
    return done


async def _earlier_child(run_id: str) -> dict[str, Any]:
    """The result of the child workflow ``run_id`` that an earlier attempt started."""
    try:
        done: dict[str, Any] = await workflow.execute_activity(
            CHILD_RESULT,
            run_id,
            result_type=dict,
            start_to_close_timeout=_CHILD_TIMEOUT,
            heartbeat_timeout=_HEARTBEAT_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
    except ActivityError as exc:
        raise _failed(exc) from None
    return done


def spend_details(usage: Usage, cycles: int, tool_calls: int = 0) -> dict[str, Any]:
    """What a run spent, as the details of the failure that ends it (see `_failed`)."""
    return {"usage": dataclasses.asdict(usage), "cycles": cycles, "tool_calls": tool_calls}


def _failed(exc: ChildWorkflowError | ActivityError) -> ToolError | ChildSpent:
    """The call's failure: the child's own error, with what it spent when it says."""
    cause: BaseException | None = exc
    message, spent = str(exc), None
    while cause is not None:
        if isinstance(cause, ApplicationError):
            message = cause.message or message
            spent = spent or _spent(cause.details)
        cause = cause.__cause__
    error = ToolError(f"the agent's run failed: {message}")
    if spent is None:
        return error
    usage, cycles, tool_calls = spent
    return ChildSpent(usage, cycles, error, tool_calls)


def _spent(details: Sequence[Any]) -> tuple[Usage, int, int] | None:
    for detail in details:
        if isinstance(detail, dict) and {"usage", "cycles"} <= detail.keys():
            calls = int(detail.get("tool_calls", 0))
            return Usage(**detail["usage"]), int(detail["cycles"]), calls
    return None
