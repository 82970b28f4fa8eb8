"""Events of the executive function: one per gate decision and one per question asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from convergent.events import Event
from convergent.messages import ToolCall, Usage

__all__ = ["AskStatus", "GateDecided", "GateTrigger", "UserAnswered"]

GateTrigger = Literal[
    "score", "scorer_error", "ambiguity", "invalid_arguments", "model_asked", "exempt"
]
"""What decided a gate review.

``score``: the scorer's score against the threshold; ``scorer_error``: the scorer's reply
was unusable; ``ambiguity``: a tool result declared an ambiguity; ``invalid_arguments``:
a tool's arguments failed validation repeatedly; ``model_asked``: the model itself asked
the user; ``exempt``: only calls of tools exempt from review were proposed.
"""

AskStatus = Literal["answered", "timed_out", "unavailable"]
"""How a question ended: answered, no answer before the timeout, or no channel could ask."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GateDecided(Event):
    """The executive function decided whether to act or to ask the user first."""

    type: ClassVar[str] = "gate_decided"
    decision: Literal["executed", "asked"]
    """``executed``: the proposed calls run; ``asked``: ``ask_user`` runs instead (or after)."""
    trigger: GateTrigger
    """What decided it."""
    score: float | None
    """``min(clarity, certainty)`` from the scorer; None when no score was requested."""
    clarity: float | None
    """The scorer's rating of the clarity of the thought, 0.0-1.0."""
    certainty: float | None
    """The scorer's rating of the certainty of the action, 0.0-1.0."""
    threshold: float
    """The gate's threshold: at or above it the action runs."""
    proposed: tuple[ToolCall, ...]
    """The calls under review (for objective triggers: the calls that revealed the trigger)."""
    question: str = ""
    """The question put to the user; empty when the action ran."""
    ask_call_id: str | None = None
    """Id of the ``ask_user`` call that carries the question."""
    reason: str = ""
    """The scorer's rationale, or what the objective trigger saw."""
    usage: Usage = field(default_factory=Usage)
    """Usage of the scorer request (zero when there was none)."""
    duration: float = 0.0
    """Seconds the review took."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserAnswered(Event):
    """A question put to the user ended: answered, timed out or unavailable."""

    type: ClassVar[str] = "user_answered"
    call_id: str
    """Id of the ``ask_user`` call."""
    question: str
    """The question."""
    answer: str | None
    """The user's reply; None when there was none."""
    status: AskStatus
    """How the question ended."""
    channel: str
    """Name of the channel that asked (``terminal``, ``dialog``, ``queue``...)."""
    waited: float
    """Seconds spent waiting for the reply."""
