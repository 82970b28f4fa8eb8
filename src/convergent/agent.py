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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, assert_never

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
)
from convergent.exceptions import ModelError, UserError
from convergent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from convergent.models.base import Model, ModelSettings
from convergent.state import RunState, ToolCallRecord
from convergent.steering import SteeringQueue
from convergent.stop import Limits, StallDetector, StopReason
from convergent.tools import Tool

__all__ = [
    "ActionGate",
    "Agent",
    "ContextPolicy",
    "RunObserver",
    "RunResult",
    "Verification",
    "Verifier",
]

ToolErrorPolicy = Literal["stop", "continue"]


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
    """Receives every event together with the live run state (for checkpoints)."""

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

    @property
    def tools(self) -> Sequence[Tool]:
        """Tools the agent must offer for the gate's replacements (its ``ask_user``)."""

    async def review(
        self, response: ModelResponse, state: RunState, emit: Callable[[Event], None]
    ) -> tuple[ToolCall, ...]:
        """Return the calls to execute: the proposed ones, or a non-empty replacement."""

    async def after_tools(
        self, records: Sequence[ToolCallRecord], state: RunState, emit: Callable[[Event], None]
    ) -> ToolCall | None:
        """See a batch's results; return a call (``ask_user``) to run next, or None.

        The returned call runs in the same cycle, only if the batch did not end the run.
        It must not return a call for a batch that holds only its own returned calls.
        """


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
    """New user instructions arrived; they are delivered and the loop goes on."""

    message: str


CycleOutcome = Continue | Stop | Interrupted


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """The outcome of one run."""

    run_id: str
    """Unique id of the run."""
    output: str
    """The model's final text (for ``completed``: its answer)."""
    stop_reason: StopReason
    """The one objective reason the run ended."""
    stop_detail: str
    """Human-readable detail of the stop."""
    cycles: int
    """Model requests made (a cycle is one request plus the tools it asked for)."""
    tool_calls: tuple[ToolCallRecord, ...]
    """Every executed tool call, in order."""
    usage: Usage
    """Total usage of the run."""
    messages: tuple[Message, ...]
    """The final conversation."""
    events: tuple[Event, ...] = ()
    """Every event of the run, in order."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape printed by ``convergent run --json``."""
        return {
            "run_id": self.run_id,
            "stop_reason": self.stop_reason.value,
            "stop_detail": self.stop_detail,
            "output": self.output,
            "cycles": self.cycles,
            "tool_calls": [
                {
                    "name": record.name,
                    "arguments": record.arguments,
                    "ok": record.ok,
                    "outcome": record.outcome,
                    "result": record.result,
                    "cycle": record.cycle,
                }
                for record in self.tool_calls
            ],
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "total_tokens": self.usage.total_tokens,
                "requests": self.usage.requests,
                "cost": self.usage.cost,
            },
        }


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
        gate: Optional executive function that reviews proposed tool calls; the
            tools it needs (its ``ask_user``) are offered to the model too.
        record_events: Keep every event on the `RunResult`.
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
    ) -> None:
        if on_tool_error not in ("stop", "continue"):
            raise UserError(f"on_tool_error must be 'stop' or 'continue', got {on_tool_error!r}")
        self.model = model
        self.tools: dict[str, Tool] = {}
        for item in (*tools, *(gate.tools if gate is not None else ())):
            if self.tools.get(item.name) is item:
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
        9. Let the gate see the results; if the run goes on and a result calls for it
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
        if state is None:
            if task is None:
                raise UserError("run() needs a task or a state to resume")
            state = self.new_state(task, run_id=run_id)
            resumed = False
        else:
            resumed = True
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
                case Interrupted(message):
                    state.messages.append(UserMessage(content=message))
                    self.emit(Redirected(run_id=state.run_id, cycle=state.cycles, message=message))
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
        if verdict.passed:
            return Stop(StopReason.COMPLETED, "answered without tool calls; verifier passed")
        feedback = verdict.feedback or "the answer did not pass verification"
        return Interrupted(f"Verification failed: {feedback}. Continue working on the task.")

    async def _run_tools(self, calls: Sequence[ToolCall], cycle: int) -> CycleOutcome:
        state = self.state
        stalled = [call for call in calls if self.stall.observe(call.name, call.arguments)]
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

        def on_start(call: ToolCall) -> None:
            self.emit(
                ToolStarted(
                    run_id=state.run_id,
                    cycle=cycle,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                )
            )

        def on_finish(outcome: ToolOutcome) -> None:
            self.emit(
                ToolFinished(
                    run_id=state.run_id,
                    cycle=cycle,
                    call_id=outcome.call.id,
                    name=outcome.call.name,
                    ok=outcome.ok,
                    outcome=outcome.kind.value,
                    result=outcome.text,
                    duration=outcome.duration,
                )
            )

        outcomes = await execute_batch(
            calls, self.agent.tools, on_start=on_start, on_finish=on_finish
        )
        return await self._after_tools(outcomes, cycle, self._record(outcomes, cycle))

    async def _after_tools(
        self, outcomes: Sequence[ToolOutcome], cycle: int, result: CycleOutcome
    ) -> CycleOutcome:
        """Show the batch to the gate; run the ``ask_user`` call it may return."""
        gate = self.agent.gate
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
        pending = state.pending_calls()
        rerun: list[ToolCall] = []
        for call in pending:
            tool = self.agent.tools.get(call.name)
            if call.id in answers:
                state.messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id, name=call.name, content=answers[call.id]
                    )
                )
            elif tool is not None and tool.idempotent:
                rerun.append(call)
            else:
                state.messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        name=call.name,
                        content="interrupted: the run stopped before this call finished; "
                        "it was not retried because the tool is not idempotent",
                        is_error=True,
                    )
                )
        if not rerun:
            return Continue()
        return await self._run_tools_unchecked(rerun)

    async def _run_tools_unchecked(self, calls: Sequence[ToolCall]) -> CycleOutcome:
        saved = self.stall
        self.stall = StallDetector(10**9, {})
        try:
            return await self._run_tools(calls, self.state.cycles)
        finally:
            self.stall = saved

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
