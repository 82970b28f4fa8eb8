"""An agent called as a tool: its run is a child of the calling run (machinery of `Agent.as_tool`).

The child runs the call's task within what is left of its caller's budgets, and what
it spends counts as the caller's: its usage, and its cycles and tool calls with those
of its own children, so a budget holds for the whole tree of runs below a run. A child that does
not end (its call timed out, it raised, it was cancelled) counts what it spent up to
then. Runs nest at most ``max_depth`` levels below the run no agent called
(`DEFAULT_MAX_DEPTH`): a deeper call fails without running.

When the caller is stored, the child is stored in the same place as a run of its own,
linked to the caller's run and call, under an id made from them: a caller resumed after
a crash finds the child its interrupted call started, and reuses its result when it had
finished (or continues it when it had not) instead of running it again.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from convergent._run_id import child_run_id
from convergent.durability.protocol import Durability, JournaledRun, RunJournal
from convergent.events import Event
from convergent.exceptions import ConvergentError, ToolError, UserError
from convergent.extensions import RunObserver
from convergent.limits import Limits, shared
from convergent.messages import Usage
from convergent.result import RunResult
from convergent.run_context import CallContext, current_call
from convergent.state import RunState
from convergent.stop import StopReason
from convergent.tools import Tool, tool

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "ChildAgent",
    "ChildEnd",
    "ChildRunner",
    "ChildSpent",
    "agent_tool",
    "child_run_id",
    "child_tool",
    "nesting",
    "run_depth",
    "spent_cycles",
    "spent_tool_calls",
]

DEFAULT_MAX_DEPTH = 5
"""Levels of agents called as tools below the run no agent called, unless a tool says."""

_DEPTH: ContextVar[int] = ContextVar("convergent_run_depth", default=0)


def run_depth() -> int:
    """How many agent-tool calls the code running now is nested in (0: in no child run)."""
    return _DEPTH.get()


@contextlib.contextmanager
def nesting(depth: int) -> Iterator[None]:
    """Run the block as code nested ``depth`` levels deep (a child run's own calls)."""
    token = _DEPTH.set(depth)
    try:
        yield
    finally:
        # a coroutine closed from another context (a Temporal workflow evicted from its
        # worker's cache) cannot reset; that context is gone with it
        with contextlib.suppress(ValueError):
            _DEPTH.reset(token)


def spent_cycles(state: RunState) -> int:
    """The cycles a run spent: its own and those of its children (theirs included)."""
    return state.cycles + state.monitor.budget.child_cycles


def spent_tool_calls(state: RunState) -> int:
    """The tool calls a run made: its own and those of its children (theirs included)."""
    return state.monitor.budget.tool_calls


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
    """What the child used, its own children and its final answer included."""
    cycles: int
    """The child's cycles and those of its own children (`spent_cycles`)."""
    tool_calls: int = 0
    """The tool calls the child made, its own children's included (`spent_tool_calls`)."""

    @classmethod
    def of(cls, run: RunState) -> ChildEnd:
        """How ``run``, a finished child run (just ended, or found stored), ended."""
        assert run.stop_reason is not None, "a finished run has a stop reason"
        return cls(
            run.stop_reason,
            run.stop_detail,
            run.output,
            run.usage,
            spent_cycles(run),
            spent_tool_calls(run),
        )


class ChildSpent(ConvergentError):  # noqa: N818  (a carrier: the child's own error is inside)
    """A child run that did not end raised: what it had spent, and why it did not end."""

    def __init__(
        self, usage: Usage, cycles: int, error: BaseException, tool_calls: int = 0
    ) -> None:
        super().__init__(str(error))
        self.usage = usage
        self.cycles = cycles
        self.error = error
        self.tool_calls = tool_calls


ChildRunner = Callable[[str, CallContext | None], Awaitable[ChildEnd]]
"""Runs (or finds) the child run of a call: its prompt and its caller (None outside a run).

One that does not end raises `ChildSpent` with what it spent, when it knows."""


class ChildAgent(Protocol):
    """What a child run needs of the agent it runs (`convergent.Agent` has it)."""

    limits: Limits
    """The agent's own budgets; a child gets at most what its caller has left of them."""
    observers: list[RunObserver]
    """Receive the run's events with its live state."""

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


def agent_tool(
    agent: ChildAgent,
    name: str,
    description: str,
    *,
    timeout: float | None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Tool:
    """A tool that runs ``agent`` on the call's task as a child run (see `Agent.as_tool`)."""
    run = functools.partial(_run_child, agent)
    return child_tool(name, description, run, timeout=timeout, max_depth=max_depth)


def child_tool(
    name: str,
    description: str,
    run: ChildRunner,
    *,
    timeout: float | None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Tool:
    """A tool whose calls are child runs that ``run`` makes, in the caller's budget.

    What the child spends counts as the caller's, whether it ended or not; its answer
    is the result of a call that ended ``completed``, and part of the failure of any
    other. A call from a run nested ``max_depth`` levels deep fails without running.
    """
    if max_depth < 0:
        raise UserError(f"max_depth must be >= 0, got {max_depth}")

    async def run_agent(task: str, context: str = "") -> str:
        """Run the agent on a task.

        Args:
            task: What the agent should do, in full: it sees nothing else of this
                conversation.
            context: Facts the agent needs for the task, if any.
        """
        depth = run_depth()
        if depth >= max_depth:
            raise ToolError(
                f"not run: agents called as tools nest at most {max_depth} levels deep "
                f"(max_depth), and this run is {depth} levels down; answer without it"
            )
        prompt = f"{task}\n\nContext:\n{context}" if context else task
        caller = current_call()
        if caller is not None:
            _check_share(caller)
        try:
            with nesting(depth + 1):
                ended = await run(prompt, caller)
        except ChildSpent as spent:
            if caller is not None:
                caller.budget.add_usage(spent.usage, spent.cycles, spent.tool_calls)
            raise spent.error from None
        if caller is not None:
            caller.budget.add_usage(ended.usage, ended.cycles, ended.tool_calls)
        if ended.stop_reason is StopReason.COMPLETED:
            return ended.output
        detail = f" ({ended.stop_detail})" if ended.stop_detail else ""
        reason = ended.stop_reason
        ending = "was stopped" if reason is StopReason.STOPPED else f"stopped {reason.value}"
        raise ToolError(f"the agent {ending}{detail}; its final answer: {ended.output or '(none)'}")

    made = tool(name=name, description=description, timeout=timeout, idempotent=True)(run_agent)
    return dataclasses.replace(made, spends_budget=True)


def _check_share(caller: CallContext) -> None:
    """Refuse a child whose share of the caller's budgets is nothing.

    It would stop at once, and a run that stops on a budget makes one last request for
    its answer: children started with nothing left would each make one.

    Raises:
        ToolError: Naming the budget that is used up.
    """
    share = shared(caller.budget.remaining(), caller.sharing)
    for name in ("max_cycles", "max_total_tokens", "max_cost", "max_seconds"):
        left = getattr(share, name)
        if left is not None and left <= 0:
            raise ToolError(f"not run: the calling run has no {name} left for it")


class _Watch:
    """Keeps the live state of the run it observes (what a child has spent so far)."""

    def __init__(self) -> None:
        self.state: RunState | None = None

    def on_event(self, event: Event, state: RunState) -> None:
        self.state = state


async def _run_child(agent: ChildAgent, prompt: str, caller: CallContext | None) -> ChildEnd:
    """Run (or find, or continue) the child run of the calling run's call."""
    if caller is None:
        return await _watched(agent, agent.run(prompt))
    child = copy.copy(agent)
    child.limits = caller.child_limits(agent.limits)
    if caller.store is None:
        return await _watched(child, child.run(prompt))
    run_id = child_run_id(caller.run_id, caller.cycle, caller.call_id)
    store = _ChildStore(caller.store, (caller.run_id, caller.call_id))
    try:
        stored: RunState | None = caller.store.load(run_id)
    except UserError:
        stored = None
    if stored is None:
        return await _watched(child, child.run(prompt, run_id=run_id, store=store))
    if stored.stop_reason is not None:
        # the caller stopped before it recorded this call's result: reuse the child's
        return ChildEnd.of(stored)
    return await _watched(child, child.run(state=stored, store=store))


async def _watched(child: ChildAgent, running: Awaitable[RunResult]) -> ChildEnd:
    """How the child run ``running`` of ``child`` ended, read from its final state.

    Raises:
        ChildSpent: If it raised (or was cancelled) before it ended, with what it spent.
    """
    watch = _Watch()
    child.observers = [*child.observers, watch]
    try:
        await running
    except BaseException as exc:
        state = watch.state
        if state is None:
            raise
        raise ChildSpent(state.usage, spent_cycles(state), exc, spent_tool_calls(state)) from exc
    finally:
        child.observers.remove(watch)
    assert watch.state is not None, "a run that ended was observed"
    return ChildEnd.of(watch.state)
