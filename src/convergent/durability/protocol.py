"""The durability seam: what the loop awaits around its side effects so a run survives.

A run has two kinds of side effect: model requests and tool calls. A `RunJournal` is
awaited at the points around them, in order, so that whatever it persists is written
before the loop goes on:

1. `RunJournal.started` once, before the first cycle (a new run, or a resumed one);
2. `RunJournal.calls_ready` when a response's tool calls are final (after the gate and
   the stall check) and before any of them runs: the assistant message is durable
   before its first side effect;
3. `RunJournal.before_call` before a tool marked ``modifies_files`` runs (file
   snapshots for rewind);
4. `RunJournal.finished` the moment each call finishes, so a process killed mid-batch
   never repeats a call that may not run twice, nor loses its result (a backend may
   keep the end of a call of an ``idempotent`` tool for its next write: a resumed run
   runs such a call again);
5. `RunJournal.delivered` when steering messages were delivered;
6. `RunJournal.stopped` once, with the run's stop reason.

Every event also reaches `RunJournal.on_event`; one that rewrites the history
(compaction) tells the journal to store the conversation afresh with its next write.
The streaming deltas reach it too unless it sets ``receives_deltas = False`` (the
SQLite journal does: it stores each final response, never its pieces).

A `Durability` (the SQLite `RunStore`, or any other backend) opens one journal per run,
from a `JournaledRun`: the run's id and what the journal needs to know of its agent.
Durable-execution engines such as Temporal need no journal: their own history records
each model request and tool call, which run as activities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from convergent.events import Event
from convergent.messages import ToolCall
from convergent.models.base import Model
from convergent.state import RunState, ToolCallRecord
from convergent.steering import SteeringCommand, SteeringQueue
from convergent.tools import Tool

__all__ = ["Durability", "JournaledRun", "RunJournal"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JournaledRun:
    """The run a journal persists, and what it needs to know of the run's agent."""

    run_id: str
    """The run (which may be new or stored)."""
    tools: Sequence[Tool] = ()
    """The agent's tools (to know which modify files, and their MCP servers)."""
    workspace: str | None = None
    """Folder file-modifying tools work in (snapshots for rewind)."""
    spec: Mapping[str, Any] | None = None
    """How to rebuild the agent in another process (an `AgentSpec` as JSON), stored
    with the run."""
    models: Mapping[str, Model] = field(default_factory=dict)
    """The run's models by role; the place of each `convergent.models.base.Replayable`
    one is kept with the run, so that a resumed run plays no response twice."""
    parent: tuple[str, str] | None = None
    """``(run id, call id)`` of the tool call that started this run as a child run (an
    agent called as a tool), to store the link with it."""


class RunJournal(Protocol):
    """Persists one run as it happens; every method is awaited by the loop."""

    @property
    def steering(self) -> SteeringQueue | None:
        """Steering commands stored for this run by other processes, if the backend has any."""

    def on_event(self, event: Event, state: RunState) -> None:
        """See every event (to keep the ones worth storing with the next write)."""

    async def started(self, state: RunState, *, resumed: bool) -> None:
        """The run begins or resumes from ``state``."""

    async def calls_ready(self, state: RunState, cycle: int, calls: Sequence[ToolCall]) -> None:
        """``calls`` (the last assistant message) are about to run."""

    async def before_call(self, state: RunState, cycle: int, call: ToolCall, tool: Tool) -> None:
        """A tool that modifies files is about to run this call."""

    async def finished(self, state: RunState, record: ToolCallRecord, position: int) -> None:
        """One call of the current batch finished (``position`` in its response)."""

    async def delivered(self, state: RunState, commands: Sequence[SteeringCommand]) -> None:
        """Steering ``commands`` were delivered: their messages are now in ``state``."""

    async def stopped(self, state: RunState, consumed: Sequence[SteeringCommand] = ()) -> None:
        """The run ended (``state.stop_reason`` is set); ``consumed``: a stop command."""


class Durability(Protocol):
    """A backend that persists runs: opens a journal per run, loads and steers them."""

    def load(self, run_id: str) -> RunState:
        """The latest state of a stored run, to continue it."""

    def send_steering(self, run_id: str, kind: str, text: str = "") -> None:
        """Store a steering command for the run's next boundary."""

    def journal(self, run: JournaledRun) -> RunJournal:
        """The journal of ``run`` (which may be new or stored)."""
