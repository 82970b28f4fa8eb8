"""The objective agent loop: continue while the model calls tools, stop when it does not.

`Agent.run` is the whole loop. Each cycle ends in exactly one of three outcomes
(`Continue`, `Stop`, `Interrupted`), and every run ends with exactly one `StopReason`.
The model's self-reported confidence or ``finish`` action is recorded, never obeyed.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from convergent._executor import Outcome, ToolOutcome, execute_batch
from convergent.events import (
    CycleStarted,
    Event,
    EventHandler,
    ModelResponded,
    Redirected,
    RunStarted,
    RunStopped,
    ToolFinished,
    ToolStarted,
    Verified,
)
from convergent.exceptions import ModelError, UserError
from convergent.extensions import (
    ActionGate,
    ContextPolicy,
    FollowUpGate,
    RunObserver,
    Verifier,
)
from convergent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from convergent.models.base import Model, ModelSettings
from convergent.result import RunResult
from convergent.state import RunState, ToolCallRecord
from convergent.steering import SteeringQueue
from convergent.stop import Limits, StallDetector, StopReason
from convergent.tools import Tool

__all__ = ["Agent", "RunStream"]

ToolErrorPolicy = Literal["stop", "continue"]


@dataclass(frozen=True, slots=True)
class Continue:
    """The cycle ran its tools; the loop goes on."""


@dataclass(frozen=True, slots=True)
class Stop:
    """The run ends for ``reason``."""

    reason: StopReason
    detail: str


@dataclass(frozen=True, slots=True)
class Interrupted:
    """A message for the model arrived; it is delivered and the loop goes on."""

    message: str
    redirect: bool = True
    """True for new user instructions (a `Redirected` event); False for verifier feedback."""


CycleOutcome = Continue | Stop | Interrupted


class _HandlerObserver:
    __slots__ = ("_handler",)

    def __init__(self, handler: EventHandler) -> None:
        self._handler = handler

    def on_event(self, event: Event, state: RunState) -> None:
        self._handler(event)


class Agent:
    """A model, its tools and the objective rules that decide when a run stops.

    Args:
        model: The model backend.
        tools: Tools the model may call.
        system_prompt: Instructions placed before the task.
        limits: Cycle, token, time and cost budgets, plus the repeated-call threshold.
        on_tool_error: ``stop`` ends the run with ``tool_error`` when a tool raises or
            times out; ``continue`` sends the error back to the model instead.
        settings: Per-request model settings.
        verifier: Optional external check on the final answer; while it fails, its
            feedback goes back to the model and the run continues.
        observers: Receive every event with the live state (checkpoints, live views).
        context_policy: Optional context compression, run before every model request.
        gate: Optional executive function that reviews proposed tool calls; the tools
            a `FollowUpGate` needs (its ``ask_user``) are offered to the model too.
        record_events: Keep every event on the `RunResult`.
        parallel_tool_calls: Run the calls of one response concurrently (the default);
            False runs them one at a time in call order, for tools that share state.
    """

    def __init__(
        self,
        model: Model,
        tools: Sequence[Tool] = (),
        *,
        system_prompt: str | None = None,
        limits: Limits | None = None,
        on_tool_error: ToolErrorPolicy = "stop",
        settings: ModelSettings | None = None,
        verifier: Verifier | None = None,
        observers: Sequence[RunObserver] = (),
        context_policy: ContextPolicy | None = None,
        gate: ActionGate | None = None,
        record_events: bool = True,
        parallel_tool_calls: bool = True,
    ) -> None:
        if on_tool_error not in ("stop", "continue"):
            raise UserError(f"on_tool_error must be 'stop' or 'continue', got {on_tool_error!r}")
        self.model = model
        self.tools: dict[str, Tool] = {}
        # the protocol check is slow (it inspects members), so it is done once, here
        self.follow_up: FollowUpGate | None = gate if isinstance(gate, FollowUpGate) else None
        gate_tools = self.follow_up.tools if self.follow_up is not None else ()
        for item in (*tools, *gate_tools):
            if item in gate_tools and self.tools.get(item.name) is item:
                continue
            if not isinstance(item, Tool):
                raise UserError(f"not a Tool: {item!r} (decorate the function with @tool)")
            if item.name in self.tools:
                raise UserError(f"two tools are named {item.name!r}")
            self.tools[item.name] = item
        self.tool_specs = tuple(t.spec for t in self.tools.values())
        self.system_prompt = system_prompt
        self.limits = limits or Limits()
        self.on_tool_error: ToolErrorPolicy = on_tool_error
        self.settings = settings
        self.verifier = verifier
        self.observers = list(observers)
        self.context_policy = context_policy
        self.gate = gate
        self.record_events = record_events
        self.parallel_tool_calls = parallel_tool_calls

    def new_state(self, task: str, *, run_id: str | None = None) -> RunState:
        """The initial state of a run of ``task``."""
        messages: list[Message] = []
        if self.system_prompt:
            messages.append(SystemMessage(content=self.system_prompt))
        messages.append(UserMessage(content=task))
        return RunState(
            run_id=run_id or uuid.uuid4().hex[:12],
            task=task,
            model=self.model.name,
            messages=messages,
            started_at=time.time(),
        )

    def run_sync(self, task: str, **kwargs: Any) -> RunResult:
        """Run `run` to completion from synchronous code."""
        return asyncio.run(self.run(task, **kwargs))

    def stream(self, task: str, **kwargs: Any) -> RunStream:
        """Run in the background and iterate over its events as they happen."""
        return RunStream(self, task, kwargs)

    async def run(
        self,
        task: str | None = None,
        *,
        run_id: str | None = None,
        state: RunState | None = None,
        steering: SteeringQueue | None = None,
        answers: Mapping[str, str] | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """Run the loop until an objective stop condition holds.

        The steps, in order, each cycle:

        1. Drain steering: a stop request ends the run (``stopped``); a message is
           delivered as a redirect; a pause waits here.
        2. Check the limits (cycles, tokens, time, cost) before the model request.
        3. Let the context policy compact the conversation if it is near the window.
        4. Request the model (a backend failure ends the run with ``model_error``).
        5. No tool calls: run the verifier if any; if it passes (or there is none)
           the run ends ``completed``, otherwise its feedback goes back to the model.
        6. Let the gate review the proposed calls (it may replace them with ``ask_user``).
        7. Count repeats; the same call requested ``max_repeated_calls`` times ends the
           run ``stalled`` before it runs again.
        8. Run the batch concurrently, results in call order; a tool failure ends the
           run with ``tool_error`` unless ``on_tool_error="continue"``.
        9. Let a `FollowUpGate` see the results; if the run goes on and a result calls for it
           (an ambiguity, repeated invalid arguments) run the ``ask_user`` call it returns.

        Args:
            task: The task; required unless ``state`` is given.
            run_id: Id for a new run (default: random).
            state: A checkpointed state to continue instead of starting afresh.
            steering: Queue of messages / stop / pause requests for this run.
            answers: Results for pending calls when resuming (e.g. the user's reply to
                an ``ask_user`` call that ended the run with ``needs_user``).
            on_event: Called with every event, in order.

        Raises:
            UserError: On misuse (no task, exhausted `ScriptedModel`, ...).
        """
        resumed = state is not None
        if state is None:
            if task is None:
                raise UserError("run() needs a task or a state to resume")
            state = self.new_state(task, run_id=run_id)
        state.stop_reason, state.stop_detail = None, ""
        return await _Run(self, state, steering, on_event).execute(resumed, answers or {})


class _Run:
    """The mutable bookkeeping of one `Agent.run` call."""

    def __init__(
        self,
        agent: Agent,
        state: RunState,
        steering: SteeringQueue | None,
        on_event: EventHandler | None,
    ) -> None:
        self.agent = agent
        self.state = state
        self.steering = steering
        self.observers: list[RunObserver] = list(agent.observers)
        if on_event is not None:
            self.observers.append(_HandlerObserver(on_event))
        self.events: list[Event] = []
        self.stall = StallDetector(agent.limits.max_repeated_calls, state.call_counts)
        self.clock_start = time.monotonic()
        self.elapsed_before = state.elapsed

    def emit(self, event: Event) -> None:
        if self.agent.record_events:
            self.events.append(event)
        for observer in self.observers:
            observer.on_event(event, self.state)

    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.clock_start

    async def execute(self, resumed: bool, answers: Mapping[str, str]) -> RunResult:
        agent, state = self.agent, self.state
        self.emit(
            RunStarted(
                run_id=state.run_id,
                cycle=state.cycles,
                task=state.task,
                model=agent.model.name,
                tools=tuple(agent.tools),
                resumed=resumed,
            )
        )
        outcome: CycleOutcome = Continue()
        if resumed and state.pending_calls():
            outcome = await self._finish_pending(answers)
        while not isinstance(outcome, Stop):
            match outcome:
                case Continue():
                    pass
                case Interrupted(message, redirect):
                    state.messages.append(UserMessage(content=message))
                    if redirect:
                        self.emit(
                            Redirected(run_id=state.run_id, cycle=state.cycles, message=message)
                        )
                case _:
                    assert_never(outcome)
            outcome = await self._boundary() or await self._cycle()
        return self._finish(outcome)

    async def _boundary(self) -> Stop | Interrupted | None:
        """Steering and limits, checked before every model request."""
        steering = self.steering
        if steering is not None:
            if steering.paused:
                await steering.wait_while_paused()
            redirects: list[str] = []
            for command in steering.drain():
                if command.kind == "stop":
                    return Stop(StopReason.STOPPED, command.text or "stop requested")
                if command.kind == "message":
                    redirects.append(command.text)
                elif command.kind == "pause":
                    steering.pause()
            if redirects:
                return Interrupted("\n\n".join(redirects))
        state = self.state
        exceeded = self.agent.limits.exceeded(
            cycles=state.cycles,
            total_tokens=state.usage.total_tokens,
            elapsed=self.elapsed(),
            cost=state.usage.cost,
        )
        if exceeded is not None:
            return Stop(*exceeded)
        return None

    async def _cycle(self) -> CycleOutcome:
        agent, state = self.agent, self.state
        if agent.context_policy is not None:
            await agent.context_policy.maybe_compact(state, agent.model, self.emit)
        state.cycles += 1
        cycle = state.cycles
        self.emit(CycleStarted(run_id=state.run_id, cycle=cycle, message_count=len(state.messages)))
        started = time.perf_counter()
        try:
            response = await agent.model.request(state.messages, agent.tool_specs, agent.settings)
        except ModelError as exc:
            return Stop(StopReason.MODEL_ERROR, str(exc))
        state.usage = state.usage + response.usage
        state.messages.append(response.to_message())
        self.emit(
            ModelResponded(
                run_id=state.run_id,
                cycle=cycle,
                content=response.content,
                tool_calls=response.tool_calls,
                finish_reason=response.finish_reason,
                usage=response.usage,
                metadata=response.metadata,
                duration=time.perf_counter() - started,
            )
        )
        if not response.tool_calls:
            return await self._on_answer(response.content)
        calls = response.tool_calls
        if agent.gate is not None:
            calls = await agent.gate.review(response, state, self.emit)
            if not calls:
                raise AssertionError("an ActionGate must never drop every proposed call")
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
        self.emit(
            Verified(
                run_id=state.run_id, cycle=state.cycles, passed=verdict.passed, feedback=feedback
            )
        )
        if verdict.passed:
            return Stop(StopReason.COMPLETED, "answered without tool calls; verifier passed")
        return Interrupted(
            f"Verification failed: {feedback}. Continue working on the task.", redirect=False
        )

    async def _run_tools(
        self, calls: Sequence[ToolCall], cycle: int, *, count_repeats: bool = True
    ) -> CycleOutcome:
        state = self.state
        stalled = (
            [call for call in calls if self.stall.observe(call.name, call.arguments)]
            if count_repeats
            else []
        )
        if stalled:
            first = stalled[0]
            detail = (
                f"{first.name} was requested with the same arguments {self.stall.threshold} times"
            )
            for call in calls:
                state.messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        name=call.name,
                        content=f"not executed: {detail}",
                        is_error=True,
                    )
                )
            return Stop(StopReason.STALLED, detail)

        outcomes = await execute_batch(
            calls,
            self.agent.tools,
            on_start=lambda call: self._started(call, cycle),
            on_finish=lambda outcome: self._finished(outcome, cycle),
            concurrent=self.agent.parallel_tool_calls,
        )
        return await self._after_tools(outcomes, cycle, self._record(outcomes, cycle))

    def _started(self, call: ToolCall, cycle: int) -> None:
        self.emit(
            ToolStarted(
                run_id=self.state.run_id,
                cycle=cycle,
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
            )
        )

    def _finished(self, outcome: ToolOutcome, cycle: int) -> None:
        self.emit(
            ToolFinished(
                run_id=self.state.run_id,
                cycle=cycle,
                call_id=outcome.call.id,
                name=outcome.call.name,
                ok=outcome.ok,
                outcome=outcome.kind.value,
                result=outcome.text,
                duration=outcome.duration,
            )
        )

    async def _after_tools(
        self, outcomes: Sequence[ToolOutcome], cycle: int, result: CycleOutcome
    ) -> CycleOutcome:
        """Show the batch to the gate; run the ``ask_user`` call it may return."""
        gate = self.agent.follow_up
        if gate is None:
            return result
        records = [_to_record(outcome, cycle) for outcome in outcomes]
        ask = await gate.after_tools(records, self.state, self.emit)
        if ask is None or not isinstance(result, Continue):
            return result
        self.state.messages.append(AssistantMessage(tool_calls=(ask,)))
        return await self._run_tools((ask,), cycle)

    def _record(self, outcomes: Sequence[ToolOutcome], cycle: int) -> CycleOutcome:
        """Append results in call order and decide what the batch means for the run."""
        state = self.state
        failed: ToolOutcome | None = None
        question: ToolOutcome | None = None
        for outcome in outcomes:
            if outcome.kind is Outcome.NEEDS_USER:
                question = question or outcome
                continue
            state.messages.append(outcome.to_message())
            state.tool_calls.append(_to_record(outcome, cycle))
            if outcome.kind is Outcome.FAILED and failed is None:
                failed = outcome
        if failed is not None and self.agent.on_tool_error == "stop":
            if question is not None:
                state.messages.append(question.to_message())
            return Stop(StopReason.TOOL_ERROR, failed.text)
        if question is not None:
            return Stop(StopReason.NEEDS_USER, question.text)
        return Continue()

    async def _finish_pending(self, answers: Mapping[str, str]) -> CycleOutcome:
        """Complete calls a previous process requested but never recorded a result for.

        A call with a supplied answer gets it; an idempotent tool is re-run; any other
        call is reported to the model as interrupted, so nothing runs twice.
        """
        state = self.state
        rerun: list[ToolCall] = []
        settled: list[ToolOutcome] = []
        for call in state.pending_calls():
            tool = self.agent.tools.get(call.name)
            if call.id in answers:
                settled.append(ToolOutcome(call, Outcome.OK, answers[call.id], 0.0))
            elif tool is not None and tool.idempotent:
                rerun.append(call)
            else:
                text = (
                    "interrupted: the run stopped before this call finished; "
                    "it was not retried because the tool is not idempotent"
                )
                settled.append(ToolOutcome(call, Outcome.INTERRUPTED, text, 0.0))
        for outcome in settled:
            self._finished(outcome, state.cycles)
            state.messages.append(outcome.to_message())
            state.tool_calls.append(_to_record(outcome, state.cycles))
        if not rerun:
            return Continue()
        # these calls were counted when the model first requested them
        return await self._run_tools(rerun, state.cycles, count_repeats=False)

    def _finish(self, stop: Stop) -> RunResult:
        state = self.state
        state.stop_reason, state.stop_detail = stop.reason, stop.detail
        state.output = _last_assistant_text(state.messages)
        state.elapsed = self.elapsed()
        self.emit(
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
            events=tuple(self.events),
        )


def _to_record(outcome: ToolOutcome, cycle: int) -> ToolCallRecord:
    return ToolCallRecord(
        cycle=cycle,
        id=outcome.call.id,
        name=outcome.call.name,
        arguments=outcome.call.arguments,
        ok=outcome.ok,
        outcome=outcome.kind.value,
        result=outcome.text,
        duration=outcome.duration,
    )


def _last_assistant_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.role == "assistant" and message.content:
            return message.content
    return ""


@dataclass
class RunStream:
    """Iterate over a run's events while it runs; `result` is set once it ends."""

    agent: Agent
    task: str
    options: dict[str, Any]
    result: RunResult | None = field(default=None, init=False)

    async def __aiter__(self) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def runner() -> RunResult:
            try:
                return await self.agent.run(self.task, on_event=queue.put_nowait, **self.options)
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(runner())
        try:
            while (event := await queue.get()) is not None:
                yield event
            self.result = await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
