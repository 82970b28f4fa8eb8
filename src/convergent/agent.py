"""The objective agent loop: continue while the model calls tools, stop when it does not.

`Agent.run` is the whole loop. Each cycle ends in exactly one of three outcomes
(`Continue`, `Stop`, `Interrupted`), and every run ends with exactly one `StopReason`.
The model's self-reported confidence or ``finish`` action is recorded, never obeyed.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, assert_never

from convergent._executor import Outcome, execute_batch, start, wait_for_stragglers
from convergent._trace import EventSink
from convergent.clock import Clock, current_clock
from convergent.events import (
    Event,
    EventHandler,
    Redirected,
    RunStarted,
    RunStopped,
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
from convergent.journal import Durability, RunJournal
from convergent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    UserMessage,
)
from convergent.models.base import Model, ModelSettings
from convergent.recipe import BuildContext, RunRecipe, agent_arguments
from convergent.result import RunResult
from convergent.state import RunState, ToolCallRecord
from convergent.steering import SteeringCommand, SteeringQueue
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

_CONTINUE = Continue()
_PAUSED = Paused()
_OK, _FAILED, _NEEDS_USER = Outcome.OK.value, Outcome.FAILED.value, Outcome.NEEDS_USER.value


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
        on_tool_error: ``continue`` (the default) sends a tool's failure back to the model
            as its result and stops ``tool_error`` only after
            ``max_consecutive_tool_errors`` failures in a row or a failure the tool marks
            fatal; ``stop`` ends the run at the first failure.
        max_consecutive_tool_errors: Failures in a row that end the run under
            ``continue`` (a successful call resets the count); None never stops.
        settings: Per-request model settings.
        verifier: Optional external check on the final answer; while it fails, its
            feedback goes back to the model and the run continues.
        observers: Receive every event with the live state (live views, telemetry).
        context_policy: Optional context compression, run before every model request.
        gate: Optional executive function that reviews proposed tool calls; the tools
            a `FollowUpGate` needs (its ``ask_user``) are offered to the model too.
        record_events: Keep every event on the `RunResult`.
        parallel_tool_calls: Run the calls of one response concurrently (the default);
            False runs them one at a time in call order, for tools that share state.
        workspace: Folder the file tools work in; a durable run snapshots the files a
            ``modifies_files`` tool changes there, so that it can be rewound.
        recipe: How to rebuild this agent in another process (set by `from_recipe`);
            stored with durable runs so that `convergent.resume` can continue them.
        store: Persist every run of this agent here (e.g. a `convergent.store.RunStore`),
            unless `run` is given another; None runs in memory only.

    Raises:
        UserError: For an invalid option or tool list.
    """

    def __init__(
        self,
        model: Model,
        tools: Sequence[Tool] = (),
        *,
        system_prompt: str | None = None,
        limits: Limits | None = None,
        on_tool_error: ToolErrorPolicy = "continue",
        max_consecutive_tool_errors: int | None = 3,
        settings: ModelSettings | None = None,
        verifier: Verifier | None = None,
        observers: Sequence[RunObserver] = (),
        context_policy: ContextPolicy | None = None,
        gate: ActionGate | None = None,
        record_events: bool = True,
        parallel_tool_calls: bool = True,
        workspace: str | Path | None = None,
        recipe: RunRecipe | None = None,
        store: Durability | None = None,
    ) -> None:
        if on_tool_error not in ("stop", "continue"):
            raise UserError(f"on_tool_error must be 'stop' or 'continue', got {on_tool_error!r}")
        if max_consecutive_tool_errors is not None and max_consecutive_tool_errors < 1:
            raise UserError(
                f"max_consecutive_tool_errors must be >= 1, got {max_consecutive_tool_errors}"
            )
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
        self.tool_names = tuple(self.tools)
        self.terminal_tools = frozenset(n for n, t in self.tools.items() if t.terminal)
        self.system_prompt = system_prompt
        self.limits = limits or Limits()
        self.on_tool_error: ToolErrorPolicy = on_tool_error
        self.max_consecutive_tool_errors = max_consecutive_tool_errors
        self.settings = settings
        self.verifier = verifier
        self.observers = list(observers)
        self.context_policy = context_policy
        self.gate = gate
        self.record_events = record_events
        self.parallel_tool_calls = parallel_tool_calls
        self.workspace = str(Path(workspace).resolve()) if workspace is not None else None
        self.recipe = recipe
        self.store = store

    @classmethod
    def from_recipe(
        cls, recipe: RunRecipe, *, context: BuildContext | None = None, **overrides: Any
    ) -> Agent:
        """Build the agent a `RunRecipe` describes (see `convergent.recipe`).

        Args:
            recipe: The recipe.
            context: Where the agent will run (for ask channels that need the run's id
                and store, such as the web console's).
            **overrides: `Agent` arguments that replace what the recipe builds
                (``observers=``, ``verifier=``...).

        Raises:
            UserError: If the recipe cannot be built here (unknown tool, model, version).
        """
        return cls(**{**agent_arguments(recipe, context), **overrides})

    @property
    def models(self) -> dict[str, Model]:
        """The models a run of this agent requests, by role (``model``, ``scorer``...)."""
        found: dict[str, Model] = {"model": self.model}
        for role, owner in (("scorer", self.gate), ("summary", self.context_policy)):
            candidate = getattr(owner, f"{role}_model", None) or getattr(owner, role, None)
            if isinstance(candidate, Model) and candidate is not self.model:
                found[role] = candidate
        return found

    async def aclose(self) -> None:
        """Release what the agent's models hold (connections, local model servers)."""
        for model in self.models.values():
            await model.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def new_state(self, task: str, *, run_id: str | None = None) -> RunState:
        """The initial state of a run of ``task``."""
        messages: list[Message] = []
        if self.system_prompt:
            messages.append(SystemMessage(content=self.system_prompt))
        messages.append(UserMessage(content=task))
        clock = current_clock()
        return RunState(
            run_id=run_id or clock.new_id(),
            task=task,
            model=self.model.name,
            messages=messages,
            started_at=clock.now(),
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
        store: Durability | None = None,
    ) -> RunResult:
        """Run the loop until an objective stop condition holds.

        The steps, in order, each cycle:

        1. Take steering: a stop request ends the run (``stopped``); a message is
           delivered as a redirect; a pause waits here.
        2. Check the limits (cycles, tokens, time, cost) before the model request.
        3. Let the context policy compact the conversation if it is near the window.
        4. Request the model (a backend failure ends the run with ``model_error``).
        5. No tool calls: a stop or message that arrived meanwhile comes first (the
           run stops, or the message is delivered and the run goes on); else the
           verifier runs if any; if it passes (or there is none) the run ends
           ``completed``, otherwise its feedback goes back to the model.
        6. Let the gate review the proposed calls (it may replace them with ``ask_user``).
        7. Count repeats; the same call requested ``max_repeated_calls`` times ends the
           run ``stalled`` before it runs again.
        8. Journal the calls (durable runs), then run the batch concurrently, results in
           call order, each journaled as it finishes.
        9. Apply the outcomes: a successful terminal tool ends the run ``handed_off``;
           tool failures end it ``tool_error`` per the tool-error policy; a question no
           channel can answer ends it ``needs_user``.
        10. Let a `FollowUpGate` see the results; if the run goes on and a result calls
            for it (an ambiguity, repeated invalid arguments) run the ``ask_user`` call it
            returns.

        Args:
            task: The task; required unless ``state`` is given.
            run_id: Id for a new run (default: a fresh id from the clock).
            state: A checkpointed state to continue instead of starting afresh.
            steering: Queue of messages / stop / pause requests for this run (default
                with a ``store``: the commands other processes store for the run).
            answers: Results for pending calls when resuming (e.g. the user's reply to
                an ``ask_user`` call that ended the run with ``needs_user``).
            on_event: Called with every event, in order.
            store: Persist the run as it goes (e.g. a `convergent.store.RunStore`), so
                that it can be resumed after a crash or a resumable stop (default: the
                agent's ``store``).

        Raises:
            UserError: On misuse (no task, exhausted `ScriptedModel`, ...).
            StorageError: If the store cannot be written.
        """
        resumed = state is not None
        if state is None:
            if task is None:
                raise UserError("run() needs a task or a state to resume")
            state = self.new_state(task, run_id=run_id)
        if state.stop_reason is StopReason.TOOL_ERROR:
            # resuming after tool_error is a fresh chance: count failures from here
            state.tool_error_streak = 0
        state.stop_reason, state.stop_detail = None, ""
        journal = None
        store = store if store is not None else self.store
        if store is not None:
            journal = store.journal(
                state.run_id,
                tools=tuple(self.tools.values()),
                workspace=self.workspace,
                recipe=self.recipe.model_dump(mode="json") if self.recipe else None,
                models=self.models,
            )
            if steering is None:
                steering = journal.steering
        run = _Run(self, state, steering, on_event, journal)
        await run.start(resumed)
        outcome: CycleOutcome = _CONTINUE
        if resumed and state.pending_calls():
            outcome = await run.finish_pending(answers or {})
        while not isinstance(outcome, Stop):
            match outcome:
                case Continue():
                    pass
                case Interrupted(message, commands):
                    await run.deliver(message, commands)
                case Paused():
                    await run.wait_while_paused()
                case _:
                    assert_never(outcome)
            outcome = run.boundary() or await run.cycle()
        return await run.finish(outcome)

    async def resume(
        self,
        run_id: str,
        *,
        store: Durability | None = None,
        answers: Mapping[str, str] | None = None,
        message: str | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """Continue a stored run with this agent.

        Args:
            run_id: The run.
            store: Where it is stored (default: the agent's ``store``).
            answers: Replies to the questions it stopped ``needs_user`` on, by call id.
            message: New instructions, delivered before its next cycle.
            on_event: Called with every event, in order.

        Raises:
            UserError: If the run is unknown or cannot be loaded, or no store is given.
        """
        store = store if store is not None else self.store
        if store is None:
            raise UserError("resume() needs a store (pass store=, or give the Agent one)")
        state = store.load(run_id)
        if message is not None:
            store.send_steering(run_id, "message", message)
        return await self.run(state=state, answers=answers, on_event=on_event, store=store)


class _Run:
    """The mutable bookkeeping of one `Agent.run` call."""

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
        agent: Agent,
        state: RunState,
        steering: SteeringQueue | None,
        on_event: EventHandler | None,
        journal: RunJournal | None,
    ) -> None:
        self.agent = agent
        self.state = state
        self.steering = steering
        self.journal = journal
        observers: list[RunObserver] = list(agent.observers)
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
            return Stop(StopReason.MODEL_ERROR, str(exc))
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
        return _CONTINUE

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
            return _CONTINUE
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
