"""One run of the loop in progress: its cycle, tool calls and outcomes (machinery).

`Agent.run` holds the loop itself; `Run` holds what one run keeps while it goes (the
state, the event sink, the journal) and does each step of a cycle: the I/O. Every stop
decision is its `convergent.loop.driver.CycleDriver`'s (through the run's
`convergent.loop.monitor.RunMonitor`, `convergent.loop.budget.Budget` and
`convergent.stop.decide`), taken at the same points as the adapters for other
frameworks take them; the decision goes back to `Agent.run`, which handles it with
``match``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from functools import partial

from convergent._redact import known_secrets, redact
from convergent.clock import Clock, current_clock, readers
from convergent.durability.protocol import Durability, RunJournal
from convergent.events import (
    AnsweredAfterStop,
    Event,
    EventHandler,
    Nudged,
    Redirected,
    RunPaused,
    RunStarted,
    RunStopped,
    RunUnpaused,
    Verified,
)
from convergent.exceptions import ConvergentError, ModelError, ScriptExhaustedError, UserError
from convergent.extensions import RunObserver
from convergent.loop.budget import message_chars
from convergent.loop.driver import RUN_ALL, CycleDriver
from convergent.loop.ending import Settled, detail_with_note
from convergent.loop.executor import execute_batch, start, wait_for_stragglers
from convergent.loop.parts import (
    LoopAgent,
    Stopped,
    bounded,
    last_text,
    outside_facts,
    record_of,
    settings_fields,
    spending_calls,
    unless_stopped,
    within,
)
from convergent.loop.streamed import streamed_request
from convergent.loop.trace import EventSink
from convergent.messages import (
    AssistantMessage,
    CallOutcome,
    ModelResponse,
    ToolCall,
    Usage,
    UserMessage,
)
from convergent.models.base import ModelSettings
from convergent.result import RunResult
from convergent.run_context import CallContext, entered
from convergent.state import RunState, ToolCallRecord
from convergent.steering import NO_COMMANDS, SteeringCommand, SteeringQueue, Taken
from convergent.stop import CONTINUE, Decision, Interrupted, Nudge, Stop, StopReason

__all__ = ["LoopAgent", "RolledOver", "Run"]


class RolledOver(ConvergentError):  # noqa: N818  (a hand-over, not an error)
    """Raised by `Agent.run` when its steering asked to continue the run elsewhere.

    The run did not stop: ``state`` holds it so far, to continue in a fresh process
    (a Temporal workflow's continue-as-new).
    """

    def __init__(self, state: RunState) -> None:
        super().__init__("the run continues from its state in a fresh process")
        self.state = state


class _HandlerObserver:
    __slots__ = ("_handler",)

    def __init__(self, handler: EventHandler) -> None:
        self._handler = handler

    def on_event(self, event: Event, state: RunState) -> None:
        self._handler(event)


class _Unanswered:
    """Characters added to a run's conversation since its latest request was answered.

    The budgets ask before every request; only the messages added since they last asked
    are counted (all of them again when the conversation was rewritten). It holds the
    state, not the run: the driver that asks holds no reference back to the run, so a
    finished run is freed at once rather than by the cyclic garbage collector.
    """

    __slots__ = ("answered_at", "counted", "end", "last", "start", "state")

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.answered_at = 0
        """Length of the conversation when this process's latest request was answered
        (0 before: the estimates count the whole conversation)."""
        self.start = self.end = self.counted = 0
        """From and to which message the last count went, and its characters."""
        self.last: object = None
        """The last message counted."""

    def chars(self) -> int:
        """Characters of the messages after the latest answered request."""
        messages, start = self.state.messages, self.answered_at
        end, size = self.end, len(messages)
        if (
            self.start != start
            or end > size
            or (end > start and messages[end - 1] is not self.last)
        ):
            end, self.counted = start, 0
        elif end == size:
            return self.counted
        chars = self.counted
        for message in messages[end:]:
            chars += message_chars(message)
        self.start, self.end, self.counted = start, size, chars
        self.last = messages[-1] if size else None
        return chars


class Run:
    """The mutable bookkeeping of one `Agent.run` call, and each step of its cycles.

    Its `driver` takes the stop decisions, in the order every adapter takes them too;
    what is here is the I/O (steering, events, the journal, the model and the tools).
    """

    __slots__ = (
        "agent",
        "budget_shares",
        "clock",
        "conversation",
        "driver",
        "first_cycle",
        "journal",
        "monotonic",
        "observed",
        "redirects",
        "sink",
        "state",
        "steering",
        "stop_commands",
        "store",
    )

    def __init__(
        self,
        agent: LoopAgent,
        state: RunState,
        steering: SteeringQueue | None,
        on_event: EventHandler | None,
        journal: RunJournal | None,
        telemetry: RunObserver | None = None,
        store: Durability | None = None,
    ) -> None:
        self.agent = agent
        self.state = state
        self.steering = steering
        self.journal = journal
        self.store = store
        """Where the run is stored, for tools that store runs of their own (child runs)."""
        self.budget_shares = 1
        """Calls of the running batch that spend the run's budgets: each call's child run
        may spend that share of what is left (`convergent.run_context.CallContext`)."""
        observers: list[RunObserver] = list(agent.observers)
        if telemetry is not None:
            observers.insert(0, telemetry)
        if journal is not None:
            observers.append(journal)
        if on_event is not None:
            observers.append(_HandlerObserver(on_event))
        self.clock: Clock = current_clock()
        _, self.monotonic = readers(self.clock)
        self.sink = EventSink(state, observers, record=agent.record_events, clock=self.clock)
        self.observed = self.sink.active
        """Whether anyone wants the run's events (observers, or the result's events): when
        nobody does, none is built."""
        self.conversation = _Unanswered(state)
        """What the conversation grew by since the latest request was answered."""
        self.driver = CycleDriver(
            agent.limits,
            policy=agent.policy,
            tools=agent.tool_effects,
            terminal_tools=agent.terminal_tools,
            verifier=agent.verifier,
            output=agent.output,
            tally=state,
            monitor_state=state.monitor,
            clock=self.monotonic,
            elapsed_before=state.elapsed,
            price=agent.model.price,
            conversation=self.conversation.chars,
        )
        self.driver.monitor.task(state.task)
        self.first_cycle = state.cycles
        self.stop_commands: tuple[SteeringCommand, ...] = ()
        """The steering command that asked for the stop, acknowledged when the run stops."""
        self.redirects: tuple[SteeringCommand, ...] = ()
        """The steering messages of the pending `Interrupted`, acknowledged once they are
        delivered."""

    def failed(self, error: BaseException) -> None:
        """An exception ends the run without a stop: tell observers that want to know.

        An observer may define ``on_run_error(error, state)`` (telemetry ends its spans).
        """
        for observer in self.sink.observers:
            hook = getattr(observer, "on_run_error", None)
            if hook is not None:
                hook(error, self.state)

    async def start(self, resumed: bool) -> None:
        """Journal the start and announce it."""
        agent, state = self.agent, self.state
        if self.journal is not None:
            await self.journal.started(state, resumed=resumed)
        if self.observed:
            self.sink.emit(
                RunStarted(
                    run_id=state.run_id,
                    cycle=state.cycles,
                    task=state.task,
                    model=agent.model.name,
                    tools=agent.tool_names,
                    resumed=resumed,
                    elapsed=state.elapsed,
                    tool_specs=agent.tool_specs,
                )
            )

    async def wait_while_paused(self) -> None:
        """Hold the run until its pause ends (a stop also ends it)."""
        if self.steering is not None:
            state = self.state
            self.sink.emit(RunPaused(run_id=state.run_id, cycle=state.cycles))
            await self.steering.wait_while_paused()
            self.sink.emit(RunUnpaused(run_id=state.run_id, cycle=state.cycles))

    async def deliver(self, message: str) -> None:
        """Give the model a message: steering's redirect, or the verifier's feedback."""
        state = self.state
        state.messages.append(UserMessage(content=message))
        commands, self.redirects = self.redirects, ()
        if not commands:
            return
        self.driver.message(message)
        if self.observed:
            self.sink.emit(Redirected(run_id=state.run_id, cycle=state.cycles, message=message))
        if self.journal is not None:
            await self.journal.delivered(state, commands)
        elif self.steering is not None:
            self.steering.acknowledge(commands)

    def nudge(self, nudge: Nudge) -> None:
        """Tell the model, after its results, that going on like this will not help."""
        self.state.messages.append(UserMessage(content=nudge.note))
        self._nudged(nudge)

    def _nudged(self, nudge: Nudge) -> None:
        if self.observed:
            state = self.state
            self.sink.emit(
                Nudged(run_id=state.run_id, cycle=state.cycles, about=nudge.reason, note=nudge.note)
            )

    def _settle(self, taken: Taken, decision: Decision) -> Decision:
        """Keep the steering commands the decision used; put back the messages it did not."""
        if taken.messages:
            if isinstance(decision, Interrupted):
                self.redirects = taken.messages
            else:
                assert self.steering is not None
                self.steering.requeue(taken.messages)
        if isinstance(decision, Stop) and decision.reason is StopReason.STOPPED:
            self.stop_commands = (taken.stop,) if taken.stop is not None else ()
        return decision

    def boundary(self) -> Decision:
        """Steering and limits, decided before every model request."""
        steering, driver = self.steering, self.driver
        if steering is None:
            return driver.before_request()
        taken, paused = steering.take(), steering.paused
        if taken is NO_COMMANDS and not paused:
            return driver.before_request()
        return self._settle(taken, driver.before_request(outside_facts(taken, paused)))

    async def cycle(self) -> Decision:
        """One cycle: the budget note, compaction, the model request, then its answer or calls."""
        agent, state, driver = self.agent, self.state, self.driver
        self._note_budget()
        if agent.context_policy is not None:
            await agent.context_policy.maybe_compact(state, agent.model, self.sink.emit)
        seconds = driver.budget.seconds_left()
        settings = self._request_settings(seconds)
        cycle = driver.start_request()
        if self.observed:
            self.sink.cycle_started(cycle, len(state.messages))
        started = self.monotonic()
        response: ModelResponse | Stopped | None
        try:
            if seconds is None and self.steering is None and not self.sink.streaming:
                # nothing can end the request early: it needs nothing around it
                response = await agent.model.request(state.messages, agent.tool_specs, settings)
            else:
                response = await self._request(settings, seconds, cycle)
        except ModelError as exc:
            # any backend's error text, masked once more: it is stored and printed
            return driver.model_failed(redact(str(exc), known_secrets()))
        if isinstance(response, Stopped):  # a stop came while the reply came in: it ends now
            return self.boundary()
        if response is None:
            return driver.ran_out("a model request")
        response = response.with_unique_call_ids()
        driver.responded(response.usage)
        state.messages.append(response.to_message())
        self.conversation.answered_at = len(state.messages)
        if self.observed:
            self.sink.responded(cycle, response, self.monotonic() - started, settings)
        if not response.tool_calls:
            return await self._on_answer(response.content, response.finish_reason)
        calls = response.tool_calls
        if agent.gate is not None:
            calls = await agent.gate.review(response, state, self.sink.emit)
            if not calls:
                raise UserError("an ActionGate must never drop every proposed call")
            if calls != response.tool_calls:
                state.messages[-1] = AssistantMessage(content=response.content, tool_calls=calls)
        return await self._run_tools(calls, cycle)

    def _note_budget(self) -> None:
        """Tell the model what is left of its budgets, once, when it is due."""
        note = self.driver.budget_note()
        if note is not None:
            state = self.state
            state.messages.append(UserMessage(content=note))
            if self.observed:
                self.sink.emit(
                    Nudged(run_id=state.run_id, cycle=state.cycles, about="budget", note=note)
                )

    async def _request(
        self, settings: ModelSettings | None, seconds: float | None, cycle: int
    ) -> ModelResponse | None | Stopped:
        """The model's response; None when the time ran out; `Stopped` when a stop came."""
        agent, messages = self.agent, self.state.messages
        request = within(
            seconds,
            streamed_request(agent.model, messages, agent.tool_specs, settings, self.sink, cycle)
            if self.sink.streaming
            else agent.model.request(messages, agent.tool_specs, settings),
        )
        return await unless_stopped(self.steering, request)

    def _request_settings(self, seconds: float | None) -> ModelSettings | None:
        """The agent's settings, capped to the output tokens and ``seconds`` budgets leave."""
        settings = self.agent.settings
        budget = self.driver.budget
        if not budget.counts_text:  # no token or cost budget to cap the output to
            return settings if seconds is None else bounded(settings, seconds)
        wanted = settings.max_tokens if settings is not None else None
        cap = budget.request_tokens(self.driver.pending_chars(), wanted)
        if cap is not None and cap != wanted:
            settings = dataclasses.replace(settings or ModelSettings(), max_tokens=cap)
        return settings if seconds is None else bounded(settings, seconds)

    async def _on_answer(self, content: str, finish_reason: str | None) -> Decision:
        """A reply without tool calls: steering that arrived meanwhile, then the judgement.

        The driver judges it: not an answer (empty, cut, refused), the output type, the
        verifier.
        """
        taken = self.steering.take() if self.steering is not None else NO_COMMANDS
        if taken is not NO_COMMANDS:
            return self._settle(taken, self.driver.judge_answer(None, outside_facts(taken)))
        decision = await self.driver.answered_async(
            content, finish_reason, on_verdict=self._verified
        )
        if isinstance(decision, Stop) and decision.reason is StopReason.COMPLETED:
            self.state.output_json = self.driver.output_json
        return decision

    def _verified(self, passed: bool, feedback: str) -> None:
        if self.observed:
            state = self.state
            self.sink.emit(
                Verified(run_id=state.run_id, cycle=state.cycles, passed=passed, feedback=feedback)
            )

    async def _run_tools(
        self, calls: Sequence[ToolCall], cycle: int, *, reviewed: bool = False
    ) -> Decision:
        """Review the calls for repeats, run them, and decide what their outcomes mean."""
        review = RUN_ALL if reviewed else self.driver.review(calls)
        notes = review.skipped
        if notes:  # no call runs (a stop), or some get a note (a repeat, a cap) instead
            if isinstance(review.decision, Stop):
                skipped = await self._not_run(calls, notes)
                self.state.messages.extend(record.to_message() for record in skipped.values())
                return review.decision
            if isinstance(review.decision, Nudge):
                self._nudged(review.decision)
        if self.journal is not None:
            await self.journal.calls_ready(self.state, cycle, calls)
        self.budget_shares = spending_calls(calls, self.agent.tools, notes) if len(calls) > 1 else 1
        if notes:
            records = await self._run_some(calls, notes)
        elif len(calls) == 1:
            records = [await self._call(calls[0], 0)]
        else:
            records = await execute_batch(
                calls, self._call, concurrent=self.agent.parallel_tool_calls
            )
        decision = self._record(calls, records)
        if self.agent.follow_up is None:
            return decision
        return await self._after_tools(records, decision)

    async def _run_some(
        self, calls: Sequence[ToolCall], notes: Mapping[int, str]
    ) -> list[ToolCallRecord]:
        """Run the calls without a note; the others get their note as result, in order."""
        records = await self._not_run(calls, notes)
        positions = [position for position in range(len(calls)) if position not in notes]

        async def run_one(call: ToolCall, index: int) -> ToolCallRecord:
            return await self._call(call, positions[index])

        ran = await execute_batch(
            [calls[position] for position in positions],
            run_one,
            concurrent=self.agent.parallel_tool_calls,
        )
        records.update(zip(positions, ran, strict=True))
        return [records[position] for position in range(len(calls))]

    async def _not_run(
        self, calls: Sequence[ToolCall], results: Mapping[int, str]
    ) -> dict[int, ToolCallRecord]:
        """Records for calls that do not run (the run stops, or a nudge), journaled."""
        state, journal = self.state, self.journal
        records = {}
        for position, text in results.items():
            record = record_of(calls[position], CallOutcome.NOT_EXECUTED, text, state.cycles)
            if journal is not None:
                await journal.finished(state, record, position)
            records[position] = record
        return records

    async def _call(self, call: ToolCall, position: int) -> ToolCallRecord:
        """Run one call of the batch, with its events and journal entries."""
        state, journal = self.state, self.journal
        cycle = state.cycles
        if self.observed:
            self.sink.tool_started(call, cycle)
        tools = self.agent.tools
        tool = tools.get(call.name)
        if tool is not None and tool.modifies_files:
            await wait_for_stragglers()
            if journal is not None:
                await journal.before_call(state, cycle, call, tool)
        monotonic = self.monotonic
        started = monotonic()
        # the call's context is built only if its tool asks for it (`current_call`)
        token = entered(partial(self._call_context, call.id, cycle, self.budget_shares))
        try:
            ended = start(call, tools)
            if isinstance(ended, tuple):
                kind, text, fatal = ended
            else:
                seconds = self.driver.budget.seconds_left()
                finished = await ended if seconds is None else await within(seconds, ended)
                kind, text, fatal = finished if finished is not None else self._out_of_time()
        finally:
            try:
                token.var.reset(token)
            except ValueError:
                # a coroutine closed from another context (a Temporal workflow evicted
                # from its worker's cache) cannot reset; that context is gone with it
                pass
        record = record_of(call, kind, text, cycle, monotonic() - started, fatal)
        if self.observed:
            self.sink.tool_finished(record)
        if journal is not None:
            await journal.finished(state, record, position)
        return record

    def _call_context(self, call_id: str, cycle: int, shares: int) -> CallContext:
        """What a tool call knows of this run (`convergent.run_context.current_call`)."""
        return CallContext(
            run_id=self.state.run_id,
            call_id=call_id,
            cycle=cycle,
            store=self.store,
            budget=self.driver.budget,
            sharing=shares,
        )

    def _out_of_time(self) -> tuple[CallOutcome, str, bool]:
        maximum = self.driver.limits.max_seconds
        return (
            CallOutcome.INTERRUPTED,
            f"interrupted: the run's time ran out (max_seconds={maximum:g}) before this call "
            "finished",
            False,
        )

    async def _after_tools(self, records: Sequence[ToolCallRecord], decision: Decision) -> Decision:
        """Show the batch to the gate; run the ``ask_user`` call it may return."""
        gate = self.agent.follow_up
        assert gate is not None
        ask = await gate.after_tools(records, self.state, self.sink.emit)
        if ask is None or decision is not CONTINUE:
            return decision
        self.state.messages.append(AssistantMessage(tool_calls=(ask,)))
        return await self._run_tools((ask,), self.state.cycles)

    def _record(self, calls: Sequence[ToolCall], records: Sequence[ToolCallRecord]) -> Decision:
        """Append results in call order, count them, and decide what the batch means."""
        state = self.state
        messages, history = state.messages, state.tool_calls
        question: ToolCallRecord | None = None
        for call, record in zip(calls, records, strict=True):
            outcome = record.outcome
            if outcome == CallOutcome.NEEDS_USER:
                question = question or record
                continue
            messages.append(record.to_message())
            if outcome == CallOutcome.NOT_EXECUTED:
                continue
            history.append(record)
            self.driver.observe(call, outcome, record.result, fatal=record.fatal)
        if question is None:
            return self.driver.end_step()
        decision = self.driver.end_step(question.result)
        if not (isinstance(decision, Stop) and decision.reason is StopReason.NEEDS_USER):
            # the run ends for another reason: the question gets its (unanswered) result
            messages.append(question.to_message())
        return decision

    async def finish_pending(self, answers: Mapping[str, str]) -> Decision:
        """Complete calls a previous process requested but never recorded a result for.

        A call with a supplied answer gets it; an idempotent tool is re-run; any other
        call is reported to the model as interrupted, so nothing runs twice.
        """
        state = self.state
        rerun: list[ToolCall] = []
        for call in state.pending_calls():
            tool = self.agent.tools.get(call.name)
            if call.id in answers:
                outcome, text = CallOutcome.OK, answers[call.id]
            elif tool is not None and tool.idempotent:
                rerun.append(call)
                continue
            else:
                outcome = CallOutcome.INTERRUPTED
                text = (
                    "interrupted: the run stopped before this call finished; "
                    "it was not retried because the tool is not idempotent"
                )
            record = record_of(call, outcome, text, state.cycles)
            if self.observed:
                self.sink.tool_finished(record)
            state.messages.append(record.to_message())
            state.tool_calls.append(record)
            self.driver.observe(call, outcome, text)
            if self.journal is not None:
                await self.journal.finished(state, record, -1)
        if not rerun:
            self.driver.monitor.end_step()
            return CONTINUE
        # these calls were reviewed for repeats when the model first requested them
        return await self._run_tools(rerun, state.cycles, reviewed=True)

    def rolled_over(self) -> RolledOver:
        """The run continues elsewhere: its state so far, to continue from."""
        self.state.elapsed = self.driver.elapsed()
        return RolledOver(self.state)

    async def finish(self, stop: Stop) -> RunResult:
        """End the run on ``stop``: its output (with an answer after it, if due), its result."""
        state, driver = self.state, self.driver
        state.stop_reason, state.stop_detail, state.stop_rule = stop.reason, stop.detail, stop.rule
        if stop.reason is not StopReason.COMPLETED:
            state.output_json = None
        state.output, state.output_after_stop, note = await self._output(stop)
        state.stop_detail = detail_with_note(stop.detail, note)
        state.elapsed = driver.elapsed()
        if self.journal is not None:
            await self.journal.stopped(state, self.stop_commands)
        elif self.steering is not None and self.stop_commands:
            self.steering.acknowledge(self.stop_commands)
        if self.observed:
            self.sink.emit(
                RunStopped(
                    run_id=state.run_id,
                    cycle=state.cycles,
                    reason=stop.reason,
                    detail=state.stop_detail,
                    rule=stop.rule,
                    output=state.output,
                    output_after_stop=state.output_after_stop,
                    usage=state.usage,
                )
            )
        return RunResult.from_state(state, output=self.agent.output, events=self.sink.log())

    async def _output(self, stop: Stop) -> Settled:
        """The run's output, whether it is an answer made after the stop, and a note."""
        state = self.state
        answer = None
        if self.driver.calls_for_answer(stop):
            if state.output_after_stop and state.cycles == self.first_cycle:
                # resumed and stopped again: nothing new to answer
                return Settled(state.output, True, "")
            answer = await self._final_answer(stop)
        return self.driver.output(last_text(state.messages), answer, stop)

    async def _final_answer(self, stop: Stop) -> str | None:
        """One request with no tools for the best answer so far; None if it fails or cannot fit.

        It is not a cycle; its usage counts, within the token and cost budgets.
        """
        agent, state = self.agent, self.state
        settings = agent.settings
        wanted = settings.max_tokens if settings is not None else None
        final = self.driver.final_request(stop, wanted_tokens=wanted)
        if final is None:
            return None
        # the best answer so far, in words: it is not held to the output type
        settings = dataclasses.replace(
            settings or ModelSettings(), output_schema=None, plain_answer=True
        )
        if final.max_tokens is not None:
            settings = dataclasses.replace(settings, max_tokens=final.max_tokens)
        settings = bounded(settings, final.seconds)
        messages = [*state.messages, UserMessage(content=final.prompt)]
        started = self.monotonic()
        try:
            response = await within(final.seconds, agent.model.request(messages, (), settings))
        except (ModelError, ScriptExhaustedError) as exc:
            # no answer is better than a crash: the run keeps its last text
            self._answered_after_stop(final.prompt, started, settings, None, str(exc))
            return None
        if response is None:
            self._answered_after_stop(final.prompt, started, settings, None, "no time was left")
            return None
        self.driver.add_usage(response.usage)
        self._answered_after_stop(final.prompt, started, settings, response, "")
        return response.content

    def _answered_after_stop(
        self,
        prompt: str,
        started: float,
        settings: ModelSettings | None,
        response: ModelResponse | None,
        error: str,
    ) -> None:
        """Tell the listeners about the request made after the stop (not a cycle)."""
        if not self.observed:
            return
        state = self.state
        self.sink.emit(
            AnsweredAfterStop(
                run_id=state.run_id,
                cycle=state.cycles,
                prompt=prompt,
                message_count=len(state.messages),
                content=response.content if response is not None else "",
                finish_reason=response.finish_reason if response is not None else None,
                usage=response.usage if response is not None else Usage(),
                duration=self.monotonic() - started,
                settings=settings_fields(settings),
                error=redact(error, known_secrets()),
            )
        )
