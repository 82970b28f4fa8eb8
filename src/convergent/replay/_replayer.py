"""Play a recorded turn through `Agent.run`: the model says what it said, tools answer as they did.

A `ScriptedModel` function plays the recorded replies in order; each tool answers a call
with the recorded result of the same call in the current reply, raising `ToolError`
where the recording marks a failure and `ToolArgumentsError` where it marks the model's
mistake. Each tool is declared with the `convergent.Effect` the recording (or the user)
gives it (`Trajectory.effect`): a read, an idempotent call, a write, or nothing; a tool
that waits advances the replay's clock past the policy's ``poll_gap`` and ``wait_gap``,
as the time it waited would (the replay runs on a clock of its own, so that nothing
else it does takes time).

When the loop does not run a call (it stops, or it answers the call with a note to the
model instead), that recorded result is dropped so the next reply's calls still get
their own. The recorded model never saw such a note,
so after one the replay plays what it did next anyway: the worst case, a model that
ignores the note. A request without the tools (the answer asked for after a stop) and
requests past the recording get a short text reply. A reply the recording does not
hold (`RecordedReply.unrecorded`: its harness refused it for having no tool call) is
played as an answer with a placeholder text, so its turn ends as it did (completed),
never as an empty reply the loop would ask to go on.

A recorded call to a name no tool can have (``echo<|channel|>commentary``: a model's
control tokens in the name) is not offered as a tool: the loop answers it as a call to a
tool the run does not have, the model's mistake, as it would in a live run.
"""

from __future__ import annotations

import inspect
import re
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import convergent
from convergent import Agent, ModelResponse, ScriptedModel, StopReason, ToolCall
from convergent.clock import Clock, use_clock
from convergent.effects import Effect
from convergent.exceptions import ToolArgumentsError, ToolError
from convergent.messages import Message, ToolSpec
from convergent.replay._recording import RecordedCall, RecordedReply, Trajectory, Turn, call_key
from convergent.replay._settings import Settings, agent_arguments
from convergent.tools import Tool

__all__ = ["FINISHED", "RunReplay", "TurnReplay", "replay_run", "replay_turn"]

FINISHED = frozenset({StopReason.COMPLETED, StopReason.HANDED_OFF})
"""Stops that end a turn where the recording ends it: anything else cuts the turn short."""

_NOTES_AFTER = frozenset({"stalled", "tool_error"})
"""What a note after the calls is about: a repeat or a streak (not a budget running low)."""
_UNRECORDED = "(a reply the recording does not hold)"
"""What an unrecorded reply says when played: an answer, as the loop takes a reply
without calls (never an empty reply, which the loop would ask to go on)."""
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
"""What a tool's name can be: letters, digits and ``_.:/-`` (providers allow less)."""
_DECLARES = frozenset(inspect.signature(Tool.from_schema).parameters)
"""The flags the installed `Tool` takes (an older convergent may lack some)."""
_FLAGS: dict[Effect, dict[str, Any]] = {
    Effect.READ: {"read_only": True},
    Effect.IDEMPOTENT: {"idempotent": True},
    Effect.WRITE: {"read_only": False},
    Effect.UNDECLARED: {},
}
"""The flags of `Tool` that declare each effect (`convergent.effects.effect_of`)."""


@dataclass(frozen=True, slots=True)
class TurnReplay:
    """How the loop ended one recorded turn."""

    stop_reason: str
    """The run's stop reason."""
    detail: str
    """The run's stop detail."""
    rule: str
    """The rule that gave the stop, as the loop names it (`convergent.RunResult.stop_rule`:
    ``max_repeated_calls``, ``max_failing_steps``..., ``answered``); "" from a loop that
    does not name it."""
    played: int
    """Recorded replies the model had given when the run stopped."""
    recorded: int
    """Recorded replies in the turn."""
    notes: int
    """Times the loop answered a call with a note instead of running it, or gave a note
    after a reply's calls ran (a repeated read, a failure streak), and went on."""
    extra_requests: int
    """Model requests past the end of the recording (a final answer after a stop)."""
    replaced: tuple[tuple[int, str], ...] = ()
    """The recorded calls the loop answered with a note instead of running them and
    went on: each as its reply (0-based) and its `RecordedCall.key`."""
    unrun: tuple[tuple[int, str], ...] = ()
    """The calls of the last reply played that the loop never ran (it stopped first)."""
    noted_after: tuple[int, ...] = ()
    """Replies (0-based) whose calls ran and were then followed by a note that they
    repeat (a read is judged on its result) or that failures persist."""
    unplayed_calls: int = 0
    """Tool calls of the recorded replies the replay never played."""

    @property
    def cut(self) -> bool:
        """Whether the loop stopped the turn before the recording ended it."""
        return StopReason(self.stop_reason) not in FINISHED

    @property
    def partial(self) -> bool:
        """Whether the turn ended before the recording's end without a cut.

        Some of its recorded calls were then never played (closing words after a
        hand-off are not: the loop ends the turn where the recording hands off).
        """
        return not self.cut and self.unplayed_calls > 0


@dataclass(frozen=True, slots=True)
class RunReplay:
    """The replay of one recorded run: every turn's outcome, in order."""

    id: str
    """The run's id."""
    turns: tuple[TurnReplay, ...]
    """One outcome per recorded turn."""

    @property
    def first_cut(self) -> int | None:
        """The first turn the loop cut short (0-based), if any."""
        return next((index for index, turn in enumerate(self.turns) if turn.cut), None)

    @property
    def unplayed(self) -> int:
        """Recorded replies of turns not cut that the replay never played."""
        return sum(turn.recorded - turn.played for turn in self.turns if turn.partial)


class _ReplayClock(Clock):
    """The replay's own time: it stands still but where a recorded tool waited."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0

    def monotonic(self) -> float:
        return self.seconds


class _Recording:
    """The model's script and the tools' answers for one turn, kept in step."""

    def __init__(
        self, turn: Turn, clock: _ReplayClock | None = None, wait: float | None = None
    ) -> None:
        self.turn = turn
        self.clock = clock
        self.wait = wait
        self.played = 0
        self.notes = 0
        self.extra_requests = 0
        self.pending: defaultdict[str, deque[RecordedCall]] = defaultdict(deque)
        self.replaced: list[tuple[int, str]] = []
        self.noted_after: list[int] = []
        self.offers_tools = any(_is_tool_name(call.name) for reply in turn for call in reply.calls)

    def on_event(self, event: object) -> None:
        """Keep where the loop gave a note after the calls ran.

        A read is judged on its result, and a streak of failing steps gets its note after
        the failing results: either way the calls ran and the note came after them.
        """
        # a note given before its call runs leaves the call pending (it counts as replaced)
        if getattr(event, "type", None) != "nudged" or any(self.pending.values()):
            return
        reply = self.played - 1
        if getattr(event, "about", "") in _NOTES_AFTER and reply not in self.noted_after[-1:]:
            self.noted_after.append(reply)

    def respond(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        if self.offers_tools and not tools:
            # a request without the tools: the answer asked for after a stop
            self.extra_requests += 1
            return ModelResponse(content="(the best answer the recording has)")
        if any(self.pending.values()):
            self.notes += 1  # the loop went on without running every call of the last reply
            self.replaced += [(self.played - 1, key) for key, left in self.pending.items() if left]
        self.pending.clear()
        if self.played >= len(self.turn):
            self.extra_requests += 1
            return ModelResponse(content="(the recording ends here)")
        reply = self.turn[self.played]
        self.played += 1
        for call in reply.calls:
            if _is_tool_name(call.name):  # a call to no tool is answered by the loop
                self.pending[call.key].append(call)
        return _response(reply, self.played)

    def answer(self, name: str, arguments: Mapping[str, Any]) -> str:
        queue = self.pending.get(call_key(name, arguments))
        if not queue:
            raise ToolError(f"the recording has no result for this call of {name}")
        call = queue.popleft()
        if call.mistake:
            raise ToolArgumentsError(call.result or "the call could not be run")
        if call.failed:
            raise ToolError(call.result or "failed")
        return call.result if call.result is not None else "(no recorded result)"

    def waited(self) -> None:
        """A tool that waits ran: the replay's time passes the policy's time gaps."""
        if self.clock is not None and self.wait is not None:
            self.clock.seconds += self.wait + 1.0


def _response(reply: RecordedReply, number: int) -> ModelResponse:
    calls = tuple(
        ToolCall(id=f"r{number}c{index}", name=call.name, arguments=dict(call.arguments))
        for index, call in enumerate(reply.calls)
    )
    content = _UNRECORDED if reply.unrecorded else reply.content
    if reply.usage is None:
        return ModelResponse(content=content, tool_calls=calls)
    return ModelResponse(content=content, tool_calls=calls, usage=reply.usage)


def _tools(recording: _Recording, trajectory: Trajectory, turn: Turn) -> list[Tool]:
    def make(name: str) -> Tool:
        waits = name in trajectory.waits

        async def answer(**arguments: Any) -> str:
            if waits:
                recording.waited()
            return recording.answer(name, arguments)

        flags = _FLAGS[trajectory.effect(name)]
        extra = {flag: value for flag, value in flags.items() if flag in _DECLARES}
        return Tool.from_schema(
            name=name,
            description=name,
            parameters={"type": "object"},
            function=answer,
            terminal=name in trajectory.terminal,
            **extra,
        )

    names = {call.name for reply in turn for call in reply.calls if _is_tool_name(call.name)}
    return [make(name) for name in sorted(names)]


def _is_tool_name(name: str) -> bool:
    """Whether a recorded call's name can be a tool's (else the call went to no tool)."""
    return _TOOL_NAME.fullmatch(name) is not None


async def replay_turn(trajectory: Trajectory, turn: Turn, settings: Settings) -> TurnReplay:
    """Replay one turn of a run under ``settings`` (the policy under test).

    Raises:
        UserError: If a setting is unknown or refused by the installed convergent.
    """
    return await _replay_turn(trajectory, turn, agent_arguments(settings))


def _time_gap(arguments: Mapping[str, Any]) -> float | None:
    """The longest of the policy's gaps after which a call is a fresh look (None: none)."""
    policy = arguments.get("policy")
    if policy is None:
        policy_type: Any = getattr(convergent, "StopPolicy", None)
        policy = policy_type() if policy_type is not None else None
    gaps = [getattr(policy, name, None) for name in ("poll_gap", "wait_gap")]
    return max((float(gap) for gap in gaps if gap is not None), default=None)


async def _replay_turn(
    trajectory: Trajectory, turn: Turn, arguments: Mapping[str, Any]
) -> TurnReplay:
    clock = _ReplayClock()
    recording = _Recording(turn, clock, _time_gap(arguments) if trajectory.waits else None)
    agent = Agent(
        ScriptedModel(recording.respond, record_requests=False),
        _tools(recording, trajectory, turn),
        record_events=False,
        instrument=False,
        **arguments,
    )
    with use_clock(clock):
        result = await agent.run("replay", on_event=recording.on_event)
    return TurnReplay(
        stop_reason=result.stop_reason.value,
        detail=result.stop_detail,
        rule=getattr(result, "stop_rule", ""),
        played=recording.played,
        recorded=len(turn),
        notes=recording.notes + len(recording.noted_after),
        extra_requests=recording.extra_requests,
        replaced=tuple(recording.replaced),
        noted_after=tuple(recording.noted_after),
        unrun=tuple(
            (recording.played - 1, key) for key, left in recording.pending.items() for _ in left
        ),
        unplayed_calls=sum(len(reply.calls) for reply in turn[recording.played :]),
    )


async def replay_run(trajectory: Trajectory, settings: Settings | None = None) -> RunReplay:
    """Replay every turn of a recorded run through `Agent.run`, each turn as its own run.

    Args:
        trajectory: The recorded run.
        settings: Setting names and values of the policy under test (default: the
            installed library's own defaults).

    Raises:
        UserError: If a setting is unknown or refused by the installed convergent.
    """
    arguments = agent_arguments(settings or {})
    turns = [await _replay_turn(trajectory, turn, arguments) for turn in trajectory.turns]
    return RunReplay(id=trajectory.id, turns=tuple(turns))
