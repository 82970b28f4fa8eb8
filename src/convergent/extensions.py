"""The seams through which optional parts plug into the loop.

Each is a small protocol: observers see every event with the live state (checkpoints),
a context policy compacts the conversation, a gate reviews proposed tool calls, and a
verifier checks a final answer before ``completed`` is accepted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from convergent.events import Event
from convergent.messages import ModelResponse, ToolCall
from convergent.models.base import Model
from convergent.state import RunState, ToolCallRecord
from convergent.tools import Tool

__all__ = [
    "ActionGate",
    "ContextPolicy",
    "FollowUpGate",
    "RunObserver",
    "Verification",
    "Verifier",
    "verdict_feedback",
]


@dataclass(frozen=True, slots=True)
class Verification:
    """The verdict of a completion verifier."""

    passed: bool
    """Whether the external check passed."""
    feedback: str = ""
    """What failed, sent to the model when the check did not pass."""


Verifier = Callable[[str], "Verification | Awaitable[Verification]"]
"""An external check run on the final answer before ``completed`` is accepted."""


class RunObserver(Protocol):
    """Receives every event together with the live run state (for checkpoints).

    An observer may also define ``on_run_error(error, state)``: it is called when an
    exception (a caller's mistake, a cancellation) ends a run without a `RunStopped`.

    An observer gets the streaming deltas (`TextDelta`, `ToolCallDelta`) too, and its
    presence makes the loop stream its model requests, unless it sets the class
    attribute ``receives_deltas = False`` (journals and tracers, which keep only the
    final `ModelResponded`, do).
    """

    def on_event(self, event: Event, state: RunState) -> None:
        """Handle one event; must not keep a reference to ``state`` beyond the call."""


class ContextPolicy(Protocol):
    """Keeps the conversation inside the model's context window (compression)."""

    async def maybe_compact(
        self, state: RunState, model: Model, emit: Callable[[Event], None]
    ) -> None:
        """Shrink ``state.messages`` in place if the next request would be too large."""


class ActionGate(Protocol):
    """Reviews proposed tool calls before they run (the executive function)."""

    async def review(
        self, response: ModelResponse, state: RunState, emit: Callable[[Event], None]
    ) -> tuple[ToolCall, ...]:
        """Return the calls to execute: the proposed ones, or a non-empty replacement."""


@runtime_checkable
class FollowUpGate(ActionGate, Protocol):
    """An `ActionGate` that also sees each batch's results and may follow it with a call."""

    @property
    def tools(self) -> Sequence[Tool]:
        """Tools the agent must offer for the gate's calls (its ``ask_user``)."""

    async def after_tools(
        self, records: Sequence[ToolCallRecord], state: RunState, emit: Callable[[Event], None]
    ) -> ToolCall | None:
        """See a batch's results; return a call (``ask_user``) to run next, or None.

        The returned call runs in the same cycle, only if the batch did not end the run.
        It must not return a call for a batch that holds only its own returned calls.
        """


def verdict_feedback(verdict: Verification) -> str:
    """What the model is told of a failed verdict ("" when it passed)."""
    return "" if verdict.passed else verdict.feedback or "the answer failed verification"
