"""An agent called as a tool: its run is a child of the calling run (machinery of `Agent.as_tool`).

The child runs the call's task within what is left of its caller's budgets, and its
usage and cycles count as the caller's. When the caller is stored, the child is stored
in the same place as a run of its own, linked to the caller's run and call, under an
id made from them: a caller resumed after a crash finds the child its interrupted call
started, and reuses its result when it had finished (or continues it when it had not)
instead of running it again.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from convergent._run_id import MAX_RUN_ID
from convergent.durability.protocol import Durability, JournaledRun, RunJournal
from convergent.exceptions import ToolError, UserError
from convergent.limits import Limits
from convergent.messages import Usage
from convergent.result import RunResult
from convergent.run_context import CallContext, current_call
from convergent.state import RunState
from convergent.stop import StopReason
from convergent.tools import Tool, tool

__all__ = ["ChildAgent", "ChildEnd", "ChildRunner", "agent_tool", "child_run_id", "child_tool"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def child_run_id(parent: CallContext) -> str:
    """The id of the child run a call starts: the parent's id, the cycle and the call id.

    The same call always names the same child, so a resumed parent finds it; an id too
    long for the run-id rule ends in a digest instead.
    """
    made = f"{parent.run_id}.{parent.cycle}.{_UNSAFE.sub('-', parent.call_id)}"
    if len(made) <= MAX_RUN_ID:
        return made
    digest = hashlib.sha256(made.encode()).hexdigest()[:24]
    return f"{made[: MAX_RUN_ID - len(digest) - 1]}.{digest}"


@dataclass(frozen=True, slots=True)
class _ChildStore:
    """The parent's store, opening the child's journal with its link to the parent."""

    store: Durability
    parent: tuple[str, str]

    def load(self, run_id: str) -> RunState:
        return self.store.load(run_id)

    def send_steering(self, run_id: str, kind: str, text: str = "") -> None:
        self.store.send_steering(run_id, kind, text)

    def journal(self, run: JournaledRun) -> RunJournal:
        return self.store.journal(dataclasses.replace(run, parent=self.parent))


@dataclass(frozen=True, slots=True)
class ChildEnd:
    """How a child run ended, whether it ran now or was found stored."""

    stop_reason: StopReason
    """Why the child stopped."""
    stop_detail: str
    """What the stop reason's detail says."""
    output: str
    """The child's final answer."""
    usage: Usage
    """What the child used, its final answer included."""
    cycles: int
    """The child's cycles."""

    @classmethod
    def of(cls, run: RunResult | RunState) -> ChildEnd:
        """How ``run``, a finished child run (just ended, or found stored), ended."""
        assert run.stop_reason is not None, "a finished run has a stop reason"
        return cls(run.stop_reason, run.stop_detail, run.output, run.usage, run.cycles)


ChildRunner = Callable[[str, CallContext | None], Awaitable[ChildEnd]]
"""Runs (or finds) the child run of a call: its prompt and its caller (None outside a run)."""


class ChildAgent(Protocol):
    """What a child run needs of the agent it runs (`convergent.Agent` has it)."""

    limits: Limits
    """The agent's own budgets; a child gets at most what its caller has left of them."""

    async def run(
        self,
        task: str | None = None,
        *,
        run_id: str | None = None,
        state: RunState | None = None,
        store: Durability | None = None,
    ) -> RunResult:
        """Run the agent on ``task``, or continue ``state``, stored in ``store``."""
        ...


def agent_tool(agent: ChildAgent, name: str, description: str, *, timeout: float | None) -> Tool:
    """A tool that runs ``agent`` on the call's task as a child run (see `Agent.as_tool`)."""
    return child_tool(name, description, functools.partial(_run_child, agent), timeout=timeout)


def child_tool(name: str, description: str, run: ChildRunner, *, timeout: float | None) -> Tool:
    """A tool whose calls are child runs that ``run`` makes, in the caller's budget.

    The child's usage and cycles count as the caller's; its answer is the result of a
    call that ended ``completed``, and part of the failure of any other.
    """

    async def run_agent(task: str, context: str = "") -> str:
        """Run the agent on a task.

        Args:
            task: What the agent should do, in full: it sees nothing else of this
                conversation.
            context: Facts the agent needs for the task, if any.
        """
        prompt = f"{task}\n\nContext:\n{context}" if context else task
        caller = current_call()
        ended = await run(prompt, caller)
        if caller is not None:
            caller.budget.add_usage(ended.usage, ended.cycles)
        if ended.stop_reason is StopReason.COMPLETED:
            return ended.output
        detail = f" ({ended.stop_detail})" if ended.stop_detail else ""
        raise ToolError(
            f"the agent stopped {ended.stop_reason.value}{detail}; "
            f"its final answer: {ended.output or '(none)'}"
        )

    made = tool(name=name, description=description, timeout=timeout, idempotent=True)(run_agent)
    return dataclasses.replace(made, spends_budget=True)


async def _run_child(agent: ChildAgent, prompt: str, caller: CallContext | None) -> ChildEnd:
    """Run (or find, or continue) the child run of the calling run's call."""
    if caller is None:
        return ChildEnd.of(await agent.run(prompt))
    child = copy.copy(agent)
    child.limits = caller.child_limits(agent.limits)
    if caller.store is None:
        return ChildEnd.of(await child.run(prompt))
    run_id = child_run_id(caller)
    store = _ChildStore(caller.store, (caller.run_id, caller.call_id))
    try:
        stored: RunState | None = caller.store.load(run_id)
    except UserError:
        stored = None
    if stored is None:
        return ChildEnd.of(await child.run(prompt, run_id=run_id, store=store))
    if stored.stop_reason is not None:
        # the caller stopped before it recorded this call's result: reuse the child's
        return ChildEnd.of(stored)
    return ChildEnd.of(await child.run(state=stored, store=store))
