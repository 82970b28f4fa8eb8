"""One run of the loop in progress: its cycle, tool calls and outcomes (machinery).

`Agent.run` holds the loop itself; `Run` holds what one run keeps while it goes (the
state, the event sink, the stall detector, the journal) and does each step of a cycle.
Each step ends in one of a small closed set of outcomes (`Continue`, `Stop`,
`Interrupted`, `Paused`), which `Agent.run` handles with ``match``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from convergent._executor import (
    Outcome,
    execute_batch,
    start,
    wait_for_stragglers,
)
from convergent._redact import known_secrets, redact
from convergent._trace import EventSink
from convergent.clock import Clock, current_clock
from convergent.events import Event, EventHandler, Redirected, RunStarted, RunStopped, Verified
from convergent.exceptions import ModelError, UserError
from convergent.extensions import ActionGate, ContextPolicy, FollowUpGate, RunObserver, Verifier
from convergent.journal import RunJournal
from convergent.messages import AssistantMessage, Message, ToolCall, ToolSpec, UserMessage
from convergent.models.base import Model, ModelSettings
from convergent.result import RunResult
from convergent.state import RunState, ToolCallRecord
from convergent.steering import SteeringCommand, SteeringQueue
from convergent.stop import Limits, StallDetector, StopReason
from convergent.tools import Tool

__all__ = [
    "CONTINUE",
    "Continue",
    "CycleOutcome",
    "Interrupted",
    "LoopSpec",
    "Paused",
    "Run",
    "Stop",
    "ToolErrorPolicy",
]

ToolErrorPolicy = Literal["stop", "continue"]


class LoopSpec(Protocol):
    """What a run needs of its agent (`convergent.Agent` provides it)."""

    model: Model
    tools: dict[str, Tool]
    tool_specs: tuple[ToolSpec, ...]
    tool_names: tuple[str, ...]
    terminal_tools: frozenset[str]
    settings: ModelSettings | None
    limits: Limits
    on_tool_error: ToolErrorPolicy
    max_consecutive_tool_errors: int | None
    verifier: Verifier | None
    context_policy: ContextPolicy | None
    gate: ActionGate | None
    follow_up: FollowUpGate | None
    observers: list[RunObserver]
    record_events: bool
    parallel_tool_calls: bool


@dataclass(frozen=True, slots=True)
class Continue:
    """The cycle ran its tools; the loop goes on."""


@dataclass(frozen=True, slots=True)
class Stop:
    """The run ends for ``reason``."""

    reason: StopReason
    detail: str
    consumed: tuple[SteeringCommand, ...] = ()
    """The steering command that asked for the stop, if any."""
    output: str | None = None
    """The run's output when it is not the model's last text (a hand-off's result)."""


@dataclass(frozen=True, slots=True)
class Interrupted:
    """A message for the model arrived; it is delivered and the loop goes on."""

    message: str
    commands: tuple[SteeringCommand, ...] = ()
    """The steering messages delivered (empty for verifier feedback)."""


@dataclass(frozen=True, slots=True)
class Paused:
    """A pause is in force: the loop waits for its end, then checks the boundary again."""


CycleOutcome = Continue | Stop | Interrupted | Paused

CONTINUE = Continue()
"""The one `Continue` (it carries nothing)."""
_PAUSED = Paused()
_OK, _FAILED, _NEEDS_USER = Outcome.OK.value, Outcome.FAILED.value, Outcome.NEEDS_USER.value


class _HandlerObserver:
    __slots__ = ("_handler",)

    def __init__(self, handler: EventHandler) -> None:
        self._handler = handler

    def on_event(self, event: Event, state: RunState) -> None:
        self._handler(event)


class Run:
    """The mutable bookkeeping of one `Agent.run` call, and each step of its cycles."""

    __slots__ = (
        "agent",
        "clock",
        "clock_start",
        "elapsed_before",
        "journal",
        "listening",
        "sink",
        "stall",
        "state",
        "steering",
        "timed",
    )

    def __init__(
        self,
        agent: LoopSpec,
        state: RunState,
        steering: SteeringQueue | None,
        on_event: EventHandler | None,
        journal: RunJournal | None,
        telemetry: RunObserver | None = None,
    ) -> None:
        self.agent = agent
        self.state = state
        self.steering = steering
        self.journal = journal
        observers: list[RunObserver] = list(agent.observers)
        if telemetry is not None:
            observers.insert(0, telemetry)
        if journal is not None:
            observers.append(journal)
        if on_event is not None:
            observers.append(_HandlerObserver(on_event))
        self.clock: Clock = current_clock()
        self.sink = EventSink(state, observers, record=agent.record_events, clock=self.clock)
        self.listening = self.sink.active
        self.stall = StallDetector(agent.limits.max_repeated_calls, state.call_counts)
        self.clock_start = self.clock.monotonic()
        self.elapsed_before = state.elapsed
        self.timed = agent.limits.max_seconds is not None

    def failed(self, error: BaseException) -> None:
        """An exception ends the run without a stop: tell observers that want to know.

        An observer may define ``on_run_error(error, state)`` (telemetry ends its spans).
        """
        for observer in self.sink.observers:
            hook = getattr(observer, "on_run_error", None)
            if hook is not None:
                hook(error, self.state)

    def elapsed(self) -> float:
        return self.elapsed_before + self.clock.monotonic() - self.clock_start

    async def start(self, resumed: bool) -> None:
        """Journal the start and announce it."""
        agent, state = self.agent, self.state
        if self.journal is not None:
            await self.journal.started(state, resumed=resumed)
        if self.listening:
            self.sink.emit(
                RunStarted(
                    run_id=state.run_id,
                    cycle=state.cycles,
                    task=state.task,
                    model=agent.model.name,
                    tools=agent.tool_names,
                    resumed=resumed,
                )
            )

    async def wait_while_paused(self) -> None:
        """Hold the run until its pause ends (a stop also ends it)."""
        if self.steering is not None:
            await self.steering.wait_while_paused()

    async def deliver(self, message: str, commands: tuple[SteeringCommand, ...]) -> None:
        state = self.state
        state.messages.append(UserMessage(content=message))
        if not commands:
            return
        if self.listening:
            self.sink.emit(Redirected(run_id=state.run_id, cycle=state.cycles, message=message))
        if self.journal is not None:
            await self.journal.delivered(state, commands)
        elif self.steering is not None:
            self.steering.acknowledge(commands)

    def _take_steering(self) -> Stop | Interrupted | None:
        """A stop request (which keeps any message for later), or messages to deliver."""
        steering = self.steering
        if steering is None:
            return None
        taken = steering.take()
        if taken.stop is not None:
            steering.requeue(taken.messages)
            return Stop(StopReason.STOPPED, taken.stop.text or "stop requested", (taken.stop,))
        if taken.messages:
            text = "\n\n".join(command.text for command in taken.messages)
            return Interrupted(text, taken.messages)
        return None

    def boundary(self) -> Stop | Interrupted | Paused | None:
        """Steering and limits, checked before every model request."""
        steering = self.steering
        if steering is not None:
            taken = self._take_steering()
            if taken is not None:
                return taken
            if steering.paused:
                return _PAUSED
        state = self.state
        exceeded = self.agent.limits.exceeded(
            cycles=state.cycles,
            total_tokens=state.usage.total_tokens,
            elapsed=self.elapsed() if self.timed else 0.0,
            cost=state.usage.cost,
        )
        if exceeded is not None:
            return Stop(*exceeded)
        return None

    async def cycle(self) -> CycleOutcome:
        agent, state = self.agent, self.state
        if agent.context_policy is not None:
            await agent.context_policy.maybe_compact(state, agent.model, self.sink.emit)
        state.cycles += 1
        cycle = state.cycles
        if self.listening:
            self.sink.cycle_started(cycle, len(state.messages))
        started = self.clock.monotonic()
        try:
            response = await agent.model.request(state.messages, agent.tool_specs, agent.settings)
        except ModelError as exc:
            # any backend's error text, masked once more: it is stored and printed
            return Stop(StopReason.MODEL_ERROR, redact(str(exc), known_secrets()))
        if response.usage.requests or response.usage.total_tokens or response.usage.cost:
            state.usage = state.usage + response.usage
        state.messages.append(response.to_message())
        if self.listening:
            self.sink.responded(cycle, response, self.clock.monotonic() - started)
        if not response.tool_calls:
            return self._take_steering() or await self._on_answer(response.content)
        calls = response.tool_calls
        if agent.gate is not None:
            calls = await agent.gate.review(response, state, self.sink.emit)
            if not calls:
                raise UserError("an ActionGate must never drop every proposed call")
            if calls != response.tool_calls:
                state.messages[-1] = AssistantMessage(content=response.content, tool_calls=calls)
        return await self._run_tools(calls, cycle)

    async def _on_answer(self, content: str) -> CycleOutcome:
        verifier = self.agent.verifier
        if verifier is None:
            return Stop(StopReason.COMPLETED, "the model answered without tool calls")
        verdict = verifier(content)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        feedback = "" if verdict.passed else verdict.feedback or "the answer failed verification"
        state = self.state
        if self.listening:
            self.sink.emit(
                Verified(
                    run_id=state.run_id,
                    cycle=state.cycles,
                    passed=verdict.passed,
                    feedback=feedback,
                )
            )
        if verdict.passed:
            return Stop(StopReason.COMPLETED, "answered without tool calls; verifier passed")
        return Interrupted(f"Verification failed: {feedback}. Continue working on the task.")

    async def _run_tools(
        self, calls: Sequence[ToolCall], cycle: int, *, count_repeats: bool = True
    ) -> CycleOutcome:
        state = self.state
        stalled = None
        if count_repeats:
            observe = self.stall.observe
            for call in calls:
                if observe(call.name, call.arguments) and stalled is None:
                    stalled = call
        if stalled is not None:
            detail = (
                f"{stalled.name} was requested with the same arguments {self.stall.threshold} times"
            )
            for position, call in enumerate(calls):
                record = _record_of(call, Outcome.NOT_EXECUTED, f"not executed: {detail}", cycle)
                state.messages.append(record.to_message())
                if self.journal is not None:
                    await self.journal.finished(state, record, position)
            return Stop(StopReason.STALLED, detail)
        if self.journal is not None:
            await self.journal.requested(state, cycle, calls)
        if len(calls) == 1:
            records = [await self._call(calls[0], 0)]
        else:
            records = await execute_batch(
                calls, self._call, concurrent=self.agent.parallel_tool_calls
            )
        outcome = self._record(records)
        if self.agent.follow_up is None:
            return outcome
        return await self._after_tools(records, outcome)

    async def _call(self, call: ToolCall, position: int) -> ToolCallRecord:
        """Run one call of the batch, with its events and journal entries."""
        state, journal = self.state, self.journal
        cycle = state.cycles
        if self.listening:
            self.sink.tool_started(call, cycle)
        tool = self.agent.tools.get(call.name)
        if tool is not None and tool.modifies_files:
            await wait_for_stragglers()
            if journal is not None:
                await journal.before_call(state, cycle, call, tool)
        started = self.clock.monotonic()
        ended = start(call, self.agent.tools)
        kind, text, fatal = ended if isinstance(ended, tuple) else await ended
        record = _record_of(call, kind, text, cycle, self.clock.monotonic() - started, fatal)
        self._report(record)
        if journal is not None:
            await journal.finished(state, record, position)
        return record

    def _report(self, record: ToolCallRecord) -> None:
        if self.listening:
            self.sink.tool_finished(record)

    async def _after_tools(
        self, records: Sequence[ToolCallRecord], result: CycleOutcome
    ) -> CycleOutcome:
        """Show the batch to the gate; run the ``ask_user`` call it may return."""
        gate = self.agent.follow_up
        assert gate is not None
        ask = await gate.after_tools(records, self.state, self.sink.emit)
        if ask is None or not isinstance(result, Continue):
            return result
        self.state.messages.append(AssistantMessage(tool_calls=(ask,)))
        return await self._run_tools((ask,), self.state.cycles)

    def _record(self, records: Sequence[ToolCallRecord]) -> CycleOutcome:
        """Append results in call order and decide what the batch means for the run."""
        agent, state = self.agent, self.state
        messages, history = state.messages, state.tool_calls
        failed: ToolCallRecord | None = None
        question: ToolCallRecord | None = None
        handoff: ToolCallRecord | None = None
        fatal = False
        streak = state.tool_error_streak
        for record in records:
            outcome = record.outcome
            if outcome == _NEEDS_USER:
                question = question or record
                continue
            messages.append(record.to_message())
            history.append(record)
            if outcome == _OK:
                streak = 0
                if handoff is None and record.name in agent.terminal_tools:
                    handoff = record
            elif outcome == _FAILED:
                streak += 1
                failed = failed or record
                fatal = fatal or record.fatal
        state.tool_error_streak = streak
        if handoff is not None:
            if question is not None:
                messages.append(question.to_message())
            detail = f"{handoff.name} handed the run off: {handoff.result}"
            return Stop(StopReason.HANDED_OFF, detail, output=handoff.result)
        if failed is not None:
            limit = agent.max_consecutive_tool_errors
            if agent.on_tool_error == "stop" or fatal or (limit is not None and streak >= limit):
                if question is not None:
                    messages.append(question.to_message())
                return Stop(StopReason.TOOL_ERROR, _tool_error_detail(failed, streak, fatal))
        if question is not None:
            return Stop(StopReason.NEEDS_USER, question.result)
        return CONTINUE

    async def finish_pending(self, answers: Mapping[str, str]) -> CycleOutcome:
        """Complete calls a previous process requested but never recorded a result for.

        A call with a supplied answer gets it; an idempotent tool is re-run; any other
        call is reported to the model as interrupted, so nothing runs twice.
        """
        state = self.state
        rerun: list[ToolCall] = []
        for call in state.pending_calls():
            tool = self.agent.tools.get(call.name)
            if call.id in answers:
                outcome, text = Outcome.OK, answers[call.id]
            elif tool is not None and tool.idempotent:
                rerun.append(call)
                continue
            else:
                outcome = Outcome.INTERRUPTED
                text = (
                    "interrupted: the run stopped before this call finished; "
                    "it was not retried because the tool is not idempotent"
                )
            record = _record_of(call, outcome, text, state.cycles)
            self._report(record)
            state.messages.append(record.to_message())
            state.tool_calls.append(record)
            if self.journal is not None:
                await self.journal.finished(state, record, -1)
        if not rerun:
            return CONTINUE
        # these calls were counted when the model first requested them
        return await self._run_tools(rerun, state.cycles, count_repeats=False)

    async def finish(self, stop: Stop) -> RunResult:
        state = self.state
        state.stop_reason, state.stop_detail = stop.reason, stop.detail
        state.output = stop.output if stop.output is not None else _last_text(state.messages)
        state.elapsed = self.elapsed()
        if self.journal is not None:
            await self.journal.stopped(state, stop.consumed)
        elif self.steering is not None and stop.consumed:
            self.steering.acknowledge(stop.consumed)
        if self.listening:
            self.sink.emit(
                RunStopped(
                    run_id=state.run_id,
                    cycle=state.cycles,
                    reason=stop.reason,
                    detail=stop.detail,
                    output=state.output,
                    usage=state.usage,
                )
            )
        return RunResult(
            run_id=state.run_id,
            output=state.output,
            stop_reason=stop.reason,
            stop_detail=stop.detail,
            cycles=state.cycles,
            tool_calls=tuple(state.tool_calls),
            usage=state.usage,
            messages=tuple(state.messages),
            events=self.sink.log(),
        )


def _record_of(
    call: ToolCall,
    outcome: Outcome,
    text: str,
    cycle: int,
    duration: float = 0.0,
    fatal: bool = False,
) -> ToolCallRecord:
    return ToolCallRecord(
        cycle=cycle,
        id=call.id,
        name=call.name,
        arguments=call.arguments,
        ok=outcome == _OK,
        outcome=outcome.value,
        result=text,
        duration=duration,
        fatal=fatal,
    )


def _tool_error_detail(failed: ToolCallRecord, streak: int, fatal: bool) -> str:
    if fatal or streak <= 1:
        return failed.result
    return f"{streak} tool calls failed in a row; the first of the last batch: {failed.result}"


def _last_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.role == "assistant" and message.content:
            return message.content
    return ""
