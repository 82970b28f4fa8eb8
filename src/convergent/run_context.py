"""What a tool call knows about the run that made it: `CallContext` and `current_call`.

The loop sets the context around each tool call, so a tool that runs work of its own
(an agent called as a tool, see `convergent.Agent.as_tool`) can see its caller's run
id, store and remaining budget, and report the usage of that work back to the run,
where the run's own budgets count it. A tool called outside a run sees None.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from convergent.limits import Limits, narrowed, shared
from convergent.messages import Usage

if TYPE_CHECKING:
    from convergent.durability.protocol import Durability

__all__ = ["CallContext", "RunBudget", "current_call", "entered"]


class RunBudget(Protocol):
    """The budget side of a run in progress, as a tool call sees it."""

    def remaining(self) -> Limits:
        """What is left of the run's cycle, token, cost and time budgets now."""

    def add_usage(self, usage: Usage, cycles: int, tool_calls: int = 0) -> None:
        """Count work done on the run's behalf (a child run's usage, cycles and tool calls)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """The run a tool call belongs to."""

    run_id: str
    """Id of the calling run."""
    call_id: str
    """Id of the call being run."""
    cycle: int
    """Cycle of the calling run in which the model requested the call."""
    store: Durability | None
    """Where the calling run is stored (None: in memory only)."""
    budget: RunBudget
    """The calling run's budget: what remains, and where to report usage."""
    sharing: int = 1
    """Calls of the batch that spend the run's budgets, this one included: each may
    spend an equal share of what remains (`shared`)."""

    def child_limits(self, own: Limits) -> Limits:
        """``own`` limits cut to this call's share of what the calling run has left."""
        return narrowed(own, shared(self.budget.remaining(), self.sharing))


_Entered = CallContext | Callable[[], CallContext] | None

_CURRENT: ContextVar[_Entered] = ContextVar("convergent_call", default=None)


def current_call() -> CallContext | None:
    """The context of the tool call running now; None outside a run's tool call."""
    context = _CURRENT.get()
    return context() if callable(context) else context


def entered(context: _Entered) -> Token[_Entered]:
    """Make ``context`` the current call's; the loop does, around each call.

    ``context`` may be a function that builds it: it is called only if the tool asks
    (most tools never do). Undo it with the token (``token.var.reset(token)``).
    """
    return _CURRENT.set(context)
