"""`CycleDriver`: one run's stop decisions in the loop's order, for the loop and any host.

An agent loop decides at four points of each cycle: before a model request (outside
events such as a stop request, then the budgets), after a response without tool calls
(a reply that is not an answer, the output type, the verifier, then completion), after a
response with tool calls and before they run (a repeat becomes a note or a stop; the
tool-call caps), and after they ran (a hand-off, failures, mistakes, reads that repeat).
`CycleDriver` holds the run's `convergent.loop.budget.Budget` and
`convergent.loop.monitor.RunMonitor`, asks `convergent.stop.decide` at each point, gives the
monitor back the notes it decided, and after a stop says whether one final request
without tools is due, with its prompt and its output cap (`final_request`). It does no
I/O.

convergent's own loop (`Agent.run`) and every adapter in `convergent.adapters` call one
driver per run at the same points, each making its requests and running its tools its
own way, so that a trajectory ends the same way wherever it runs. The wording the model
reads after a tool's exception (`failure_result`) and after a stop
(`FINAL_ANSWER_PROMPT`) is defined here once for all of them.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from convergent.clock import current_clock
from convergent.effects import Declared
from convergent.extensions import Verification, Verifier, verdict_feedback
from convergent.limits import Limits
from convergent.loop.budget import (
    CHARS_PER_MESSAGE,
    FINAL_ANSWER_TOKENS,
    Budget,
    Tally,
)
from convergent.loop.ending import (
    ANSWER_AFTER_STOP,
    FINAL_ANSWER_PROMPT,
    FinalRequest,
    Settled,
    StopReport,
    detail_with_note,
    settle_output,
)
from convergent.loop.monitor import RunMonitor
from convergent.messages import (
    NO_USAGE,
    CallOutcome,
    ToolCall,
    Usage,
    reply_end,
)
from convergent.output import OutputCheck, OutputSpec
from convergent.policy import StopPolicy, ToolErrorPolicy, resolved_policy
from convergent.state import MonitorState
from convergent.stop import (
    CONTINUE,
    Decision,
    Facts,
    HandOff,
    Interrupted,
    LimitReached,
    Nudge,
    Stall,
    Stop,
    StopReason,
    decide,
)

if TYPE_CHECKING:
    from convergent.models._prices import TokenPrice

__all__ = [
    "MAX_CALLS_PER_RESPONSE",
    "RUN_ALL",
    "CycleDriver",
    "PolicyOptions",
    "Review",
    "cap_note",
]

MAX_CALLS_PER_RESPONSE = 256
"""A response with more tool calls than this runs none of them: the run stops
``model_error`` (no task needs them in one step, and each costs bookkeeping)."""


class PolicyOptions(TypedDict, total=False):
    """What a run's stop decisions need besides its `Limits` and `StopPolicy`.

    The loop's `Agent` and every adapter take these.
    """

    policy: StopPolicy | None
    """The rules that judge progress (default `StopPolicy()`)."""
    tools: Mapping[str, Declared] | None
    """Tool names with what each declares: a `convergent.effects.Effect`, or the older
    ``read_only`` flag (True: a read, False: a write, None: undeclared); None (the
    default): every name is an undeclared tool."""
    terminal_tools: Collection[str]
    """Tools whose successful call hands the run off (its result is the output)."""
    verifier: Verifier | None
    """An external check of an answer without tool calls; while it fails, its feedback
    goes to the model and the run goes on."""
    output: OutputSpec | None
    """The type an answer without tool calls must have (`convergent.output`); while it
    does not validate, the errors go to the model and the run goes on. It is checked
    before the verifier, which judges only a valid answer."""
    final_answer: bool
    """Deprecated: `StopPolicy.final_answer`."""
    max_consecutive_tool_errors: int | None
    """Deprecated: `StopPolicy.max_repeated_failures`."""
    on_tool_error: ToolErrorPolicy
    """Deprecated: `StopPolicy.on_tool_error`."""


class Review:
    """What the driver makes of a response's tool calls before they run."""

    __slots__ = ("decision", "skipped")

    def __init__(self, decision: Decision, skipped: Mapping[int, str]) -> None:
        self.decision = decision
        """`CONTINUE`, a stall `Nudge`, or a `Stop`."""
        self.skipped = skipped
        """Calls that must not run, by position in the batch, with the text the model
        gets as their result (the note, or why the run stopped)."""


RUN_ALL = Review(CONTINUE, {})
"""The review of a batch whose calls all run."""


def cap_note(limit: LimitReached) -> str:
    """The result of a call a tool-call cap refused while the run goes on (``continue``)."""
    if limit.limit == "max_calls_per_tool":
        return (
            f"Not run: {limit.tool} may be called at most {limit.maximum:g} times in this run "
            f"(max_calls_per_tool), and it has been. Use another tool, or answer with what "
            "you have."
        )
    return (
        f"Not run: this run may make at most {limit.maximum:g} tool calls (max_tool_calls), "
        "and it has made them all. Answer with what you have."
    )


class CycleDriver:
    """The stop decisions of one run, taken in the loop's order.

    Args:
        limits: Budgets (default `Limits()`).
        tally: Where requests and usage are counted (a run's `RunState`); default a
            fresh `RunTally`.
        monitor_state: The counters to continue (a resumed run's).
        clock: Monotonic seconds, for ``max_seconds`` and the time between polls;
            default the current context's clock (`convergent.clock.current_clock`).
        elapsed_before: Seconds the run took before this driver took it over.
        price: The model's price: a response whose usage reports no cost is costed at
            it, and so is the room kept for the next cycle and the final answer; None:
            only reported costs count, and the room is estimated from the latest
            request's cost.
        conversation: Characters added to the conversation since the last response,
            measured by a host that keeps the conversation (convergent's loop); None:
            the results, notes and feedback the driver saw are counted.
        **options: The policy and the rest (`PolicyOptions`).
    """

    __slots__ = (
        "_capped",
        "_handoff",
        "_measure",
        "answer",
        "budget",
        "monitor",
        "output_json",
        "output_spec",
        "output_value",
        "pending",
        "policy",
        "stop",
        "terminal_tools",
        "verifier",
    )

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        tally: Tally | None = None,
        monitor_state: MonitorState | None = None,
        clock: Callable[[], float] | None = None,
        elapsed_before: float = 0.0,
        price: TokenPrice | None = None,
        conversation: Callable[[], int] | None = None,
        **options: Unpack[PolicyOptions],
    ) -> None:
        limits = limits if limits is not None else Limits()
        self.policy = policy = resolved_policy(options.get("policy"), limits, options)
        state = monitor_state if monitor_state is not None else MonitorState()
        self.budget = Budget(
            limits,
            tally=tally,
            state=state.budget,
            clock=clock or current_clock().monotonic,
            elapsed_before=elapsed_before,
            price=price,
            final_answer=policy.final_answer,
        )
        self.monitor = RunMonitor(
            policy, tools=options.get("tools"), state=state, idle=self.budget.idle
        )
        terminal_tools = options.get("terminal_tools", ())
        self.terminal_tools = (
            terminal_tools if isinstance(terminal_tools, frozenset) else frozenset(terminal_tools)
        )
        self.verifier = options.get("verifier")
        self.output_spec = options.get("output")
        self.pending = 0
        """Characters the driver saw added to the conversation since the last response."""
        self.stop: Stop | None = None
        """The first stop decided, once there is one."""
        self.answer: str | None = None
        """The latest answer judged (a reply cut at the token limit joined with the
        rest), once there is one."""
        self.output_value: object = None
        """The latest answer's value of the output type, once one validated."""
        self.output_json: Any = None
        """The same as plain JSON data."""
        self._handoff: HandOff | None = None
        self._capped: LimitReached | None = None
        """A tool-call cap refused calls of the running batch."""
        self._measure = conversation

    # -- what the run spent (the budget's) ------------------------------------------------

    @property
    def limits(self) -> Limits:
        """The run's budgets."""
        return self.budget.limits

    @property
    def tally(self) -> Tally:
        """Where requests and usage are counted."""
        return self.budget.tally

    @property
    def cycles(self) -> int:
        """Model requests made so far (the final answer's request is not one)."""
        return self.budget.tally.cycles

    @property
    def usage(self) -> Usage:
        """Usage reported so far."""
        return self.budget.tally.usage

    @property
    def final_answer(self) -> bool:
        """Whether a stop that calls for it gets one more answer (`StopPolicy.final_answer`)."""
        return self.policy.final_answer

    def elapsed(self) -> float:
        """Seconds the run has taken."""
        return self.budget.elapsed()

    def pending_chars(self) -> int:
        """Characters added to the conversation since the last response, for estimates."""
        return self._measure() if self._measure is not None else self.pending

    def _decided(self, decision: Decision) -> Decision:
        if isinstance(decision, Stop):
            if self.stop is None:
                self.stop = decision
        elif isinstance(decision, Nudge):
            self.monitor.noted(decision)
        return decision

    # -- before a model request ---------------------------------------------------------

    def before_request(self, outside: Facts | None = None) -> Decision:
        """Outside events (a stop request, messages, a pause), then the budgets.

        Args:
            outside: What happened outside the run since the last decision (the
                steering facts); None: nothing.

        Returns:
            `CONTINUE`, or what ``decide`` makes of the facts: a `Stop` when a budget
            forbids the request (room is kept for it and for the final answer), or the
            decision an outside event calls for.
        """
        budget = self.budget
        limit = budget.limit(self.pending_chars() if budget.counts_text else 0)
        if limit is None and outside is None:
            return CONTINUE
        facts = Facts(limit=limit) if outside is None else dataclasses.replace(outside, limit=limit)
        return self._decided(decide(facts))

    def budget_note(self) -> str | None:
        """Once per run, before a budget could stop it: what is left, for the model."""
        budget = self.budget
        note = budget.note(self.pending_chars() if budget.counts_text else 0)
        if note is not None:
            self.pending += len(note) + CHARS_PER_MESSAGE
        return note

    def start_request(self) -> int:
        """A model request is about to be made: returns its cycle number."""
        budget = self.budget
        return budget.start_request(self.pending_chars() if budget.counts_text else 0)

    def responded(self, usage: Usage) -> None:
        """The request was answered, with this usage (`NO_USAGE` when unknown).

        Usage that reports no cost is costed at the driver's price, if it has one.
        """
        self.budget.responded(usage)
        self.pending = 0

    def requested(self, usage: Usage = NO_USAGE) -> int:
        """A model request was made and answered, reported after the fact.

        A host that can say when a request starts calls `start_request` and `responded`
        instead, so that the time between polls can count (``StopPolicy.poll_gap``).
        """
        budget = self.budget
        cycle = budget.requested(usage, self.pending_chars() if budget.counts_text else 0)
        self.pending = 0
        return cycle

    def add_usage(self, usage: Usage, cycles: int = 0, tool_calls: int = 0) -> None:
        """Count usage that is not a cycle's: a final answer's, or a child run's and its counts."""
        self.budget.add_usage(usage, cycles, tool_calls)

    def host_stop(self, facts: Facts) -> Stop:
        """A stop the host made itself (its own limit, its retries used up): decided here.

        The host's facts go through ``decide`` like every other decision, so its end is
        typed and worded as the loop's would be. The first stop decided stays the run's;
        it is returned.

        Raises:
            ValueError: If the facts call for no stop.
        """
        decision = decide(facts)
        if not isinstance(decision, Stop):
            raise ValueError(f"the host's facts call for no stop ({decision})")
        self._decided(decision)
        assert self.stop is not None
        return self.stop

    def ran_out(self, during: str) -> Decision:
        """``max_seconds`` ran out while a request or the tools ran (they were cancelled)."""
        return self._decided(decide(Facts(limit=self.budget.time_up(during, force=True))))

    def model_failed(self, error: str) -> Decision:
        """The model backend failed after its retries, with this text: a `Stop`.

        A request that failed once the run's time was up (it was given only the time
        left, `Budget.seconds_left`) stops for ``max_seconds``, which comes first.
        """
        return self._decided(decide(Facts(model_error=error, limit=self.budget.time_up())))

    def offers(self, tools: Mapping[str, Declared]) -> None:
        """The host names the tools the run has, with their effects, before the first call.

        For a host that learns them only once the run started (Claude Code lists its
        tools as a session begins): each name with its `Effect` (or ``read_only`` flag), from the
        caller's ``tools`` or the host's own metadata. Calls of other names are the
        model's mistakes; the counters so far are kept, and so are the last results, which
        the next ones are compared with.
        """
        self.monitor.declare(tools)

    def learns(self, name: str, declared: Declared) -> None:
        """The host came upon one of the run's tools, with its effect, during the run.

        For a host that meets a tool only as it runs (a LangGraph tool node): it joins the
        tools the run was told of, unless they name it already; when none were named,
        the tools not learned stay undeclared.
        """
        self.monitor.learn(name, declared)

    def message(self, text: str) -> None:
        """A message from the user reached the run (steering): a new one restarts the counts."""
        if self.monitor.message(text):
            self.monitor.changed()

    # -- after a response without tool calls --------------------------------------------

    def verify(self, text: str) -> Verification | None:
        """The synchronous verifier's verdict on an answer (None: no verifier)."""
        if self.verifier is None:
            return None
        verdict = self.verifier(text)
        if inspect.isawaitable(verdict):
            raise TypeError("an async verifier needs answered_async")
        return verdict

    async def verify_async(self, text: str) -> Verification | None:
        """The verifier's verdict on an answer, awaited when it is async."""
        if self.verifier is None:
            return None
        verdict = self.verifier(text)
        return await verdict if inspect.isawaitable(verdict) else verdict

    def check_output(self, text: str) -> OutputCheck | None:
        """An answer's check against the output type (None: no output type)."""
        return self.output_spec.check(text) if self.output_spec is not None else None

    def unfinished(
        self, text: str, finish_reason: str | None, *, continues: bool = True
    ) -> Decision | None:
        """A reply without tool calls that is not an answer: continue, or stop.

        Returns the request to continue, or the stop once the model was asked often
        enough; None: the reply is an answer.

        Args:
            text: The reply's text.
            finish_reason: The provider's finish reason, if known.
            continues: Whether the host can ask the model to go on; a host that cannot
                stops at such a reply as the loop stops once it asked often enough.
        """
        end = reply_end(text, finish_reason)
        if end == "answer":
            self.answer = self.monitor.finished_reply(text)
            return None
        unfinished = self.monitor.unfinished(end, text)
        if not continues:
            unfinished = dataclasses.replace(unfinished, left=False)
        facts = Facts(answered=True, unfinished=unfinished)
        decision = decide(facts)
        if isinstance(decision, Interrupted):
            self.pending += len(decision.message) + CHARS_PER_MESSAGE
        return self._decided(decision)

    def judge_answer(
        self,
        verdict: Verification | None,
        outside: Facts | None = None,
        *,
        output_errors: str | None = None,
    ) -> Decision:
        """An answer without tool calls: `Stop` (completed), or the feedback for the model.

        Args:
            verdict: The verifier's verdict on it; None: no verifier (or not asked).
            outside: Outside events that arrived while the model answered; they come
                first, and the verifier is then not asked.
            output_errors: Why the answer does not validate against the output type
                (`check_output`); None: it does, or there is none.
        """
        if outside is not None:
            return self._decided(decide(dataclasses.replace(outside, answered=True)))
        if verdict is None and output_errors is None:
            return self._decided(decide(_ANSWERED))
        passed = verdict.passed if verdict is not None else None
        stall: Stall | None = None
        if output_errors is not None:
            stall = self.monitor.rejected("the output type")
        elif passed is False:
            stall = self.monitor.rejected("the verifier")
        facts = Facts(
            answered=True,
            verdict=passed,
            feedback=verdict_feedback(verdict) if verdict is not None else "",
            output_errors=output_errors,
            stall=stall,
        )
        decision = decide(facts)
        if isinstance(decision, Interrupted | Nudge):
            self.pending += len(_text_of(decision)) + CHARS_PER_MESSAGE
        return self._decided(decision)

    def answered(
        self, text: str, finish_reason: str | None = None, *, continues: bool = True
    ) -> Decision:
        """A reply without tool calls, judged: is it an answer, of the output type, verified?

        ``continues``: whether the host can ask the model to go on after a reply that is
        not an answer (see `unfinished`).
        """
        ready = self._answer_to_verify(text, finish_reason, None, continues)
        return ready if not isinstance(ready, str) else self.judge_answer(self.verify(ready))

    async def answered_async(
        self,
        text: str,
        finish_reason: str | None = None,
        *,
        on_verdict: Callable[[bool, str], None] | None = None,
    ) -> Decision:
        """`answered`, with the verifier awaited when it is async.

        Args:
            text: The reply's text.
            finish_reason: The provider's finish reason, if known.
            on_verdict: Told each verdict (passed, feedback): the output type's, then the
                verifier's.
        """
        ready = self._answer_to_verify(text, finish_reason, on_verdict)
        if not isinstance(ready, str) or self.verifier is None:
            return ready if not isinstance(ready, str) else self.judge_answer(None)
        verdict = await self.verify_async(ready)
        assert verdict is not None
        if on_verdict is not None:
            on_verdict(verdict.passed, verdict_feedback(verdict))
        return self.judge_answer(verdict)

    def _answer_to_verify(
        self,
        text: str,
        finish_reason: str | None,
        on_verdict: Callable[[bool, str], None] | None,
        continues: bool = True,
    ) -> Decision | str:
        """What a reply gives the verifier: the answer, cut parts joined; else a decision.

        The decision is the one on a reply that is not an answer, or not of the output
        type.
        """
        unfinished = self.unfinished(text, finish_reason, continues=continues)
        if unfinished is not None:
            return unfinished
        text = self.answer or text
        errors = self._output_errors(text)
        if errors is None:
            return text
        if on_verdict is not None:
            on_verdict(False, f"output: {errors}")
        return self.judge_answer(None, output_errors=errors)

    def _output_errors(self, text: str) -> str | None:
        check = self.check_output(text)
        if check is None:
            return None
        if check.errors is None:
            self.output_value, self.output_json = check.value, check.data
        return check.errors

    # -- after a response with tool calls -----------------------------------------------

    def review(self, calls: Sequence[ToolCall]) -> Review:
        """The tool calls of a response, before they run: run them all, some, or none.

        A repeat with a note left skips the repeated calls (their result is the note);
        one without stops the run, and no call runs. Then the tool-call caps: the calls
        past a cap do not run, and the run stops ``budget_exhausted``.
        """
        self.monitor.finished_reply("")
        if len(calls) > MAX_CALLS_PER_RESPONSE:
            decision = self.model_failed(
                f"the model asked for {len(calls)} tool calls in one response; at most "
                f"{MAX_CALLS_PER_RESPONSE} are run"
            )
            assert isinstance(decision, Stop)
            return self._skip_all(calls, decision)
        stall = self.monitor.review(calls)
        skipped: dict[int, str] = {}
        decision = CONTINUE
        if stall is not None:
            decision = self._decided(decide(Facts(stall=stall)))
            if isinstance(decision, Stop):
                return self._skip_all(calls, decision)
            if isinstance(decision, Nudge):
                skipped = dict.fromkeys(stall.positions, decision.note)
        admission = self.budget.admit(calls, skipped)
        for index, limit in admission.refused.items():
            skipped[index] = cap_note(limit)
        if admission.refused:
            self.monitor.refused([calls[index] for index in admission.refused])
        if admission.stop is not None:
            first, self._capped = admission.stop
            text = f"not run: {_stop_text(self._capped)}"
            later = (index for index in range(first, len(calls)) if index not in skipped)
            skipped.update(dict.fromkeys(later, text))
        if not skipped:
            return RUN_ALL
        self.pending += sum(len(text) + CHARS_PER_MESSAGE for text in skipped.values())
        return Review(decision, skipped)

    def _skip_all(self, calls: Sequence[ToolCall], stop: Stop) -> Review:
        text = f"not executed: {stop.detail}"
        self.pending += (len(text) + CHARS_PER_MESSAGE) * len(calls)
        return Review(stop, dict.fromkeys(range(len(calls)), text))

    def observe(
        self, call: ToolCall, outcome: CallOutcome, result: str, *, fatal: bool = False
    ) -> None:
        """Record one call of the batch that ran (or was rejected), in call order.

        ``outcome`` is `CallOutcome.OK`, ``FAILED`` or ``INVALID``; other outcomes (a
        call that did not run) are not counted.
        """
        self.monitor.observe(call, outcome, result, fatal)
        self.pending += len(result) + CHARS_PER_MESSAGE
        if outcome == CallOutcome.OK and self._handoff is None and call.name in self.terminal_tools:
            self._handoff = HandOff(tool=call.name, result=result)

    def end_step(self, needs_user: str | None = None) -> Decision:
        """The batch is complete: a hand-off, failures, mistakes, a read that repeats.

        Args:
            needs_user: A question of the batch for the user that no channel can
                answer now.

        A `Nudge` here carries a note the host adds to the conversation (as a user
        message) before the next request.
        """
        failure, stall = self.monitor.end_step()
        handoff, capped = self._handoff, self._capped
        if (
            failure is None
            and stall is None
            and handoff is None
            and capped is None
            and needs_user is None
        ):
            return CONTINUE
        self._handoff = self._capped = None
        facts = Facts(
            handed_off=handoff,
            tool_failure=failure,
            stall=stall,
            needs_user=needs_user,
            limit=capped,
        )
        decision = self._decided(decide(facts))
        if isinstance(decision, Nudge):
            self.pending += len(decision.note) + CHARS_PER_MESSAGE
        return decision

    # -- the end ------------------------------------------------------------------------

    def calls_for_answer(self, stop: Stop | None = None) -> bool:
        """Whether the stop (default the first decided) calls for an answer after it."""
        stop = stop or self.stop
        return (
            stop is not None
            and stop.output is None
            and self.final_answer
            and stop.reason in ANSWER_AFTER_STOP
        )

    def final_request(
        self, stop: Stop | None = None, *, wanted_tokens: int | None = None
    ) -> FinalRequest | None:
        """The final request without tools, or None when none is due or none fits.

        Args:
            stop: The stop (default the first decided).
            wanted_tokens: The output tokens the host would allow the answer (its own
                setting); default `convergent.loop.budget.FINAL_ANSWER_TOKENS`. Within a
                token or cost budget the answer gets what is left, if that is enough.
        """
        stop = stop or self.stop
        if stop is None or not self.calls_for_answer(stop):
            return None
        prompt = FINAL_ANSWER_PROMPT.format(detail=stop.detail)
        limits = self.limits
        seconds = self.budget.final_seconds()
        if seconds is not None and seconds <= 0:
            return None
        if limits.max_total_tokens is None and limits.max_cost is None:
            return FinalRequest(prompt, None, seconds)
        room = self.budget.final_request_tokens(
            self.pending_chars() + CHARS_PER_MESSAGE + len(prompt),
            wanted_tokens or FINAL_ANSWER_TOKENS,
        )
        return FinalRequest(prompt, room, seconds) if room else None

    def output(self, last_text: str, final: str | None = None, stop: Stop | None = None) -> Settled:
        """The run's output, whether it is an answer made after the stop, and a note.

        An answer after the stop that is no answer (empty, the request echoed, mostly
        repetition, the protocol's JSON: `convergent.loop.ending`) is left out; the
        note says why.

        Args:
            last_text: The model's last text in the run (its answer, for ``completed``).
            final: The answer to the final request, if one was made and came back.
            stop: The stop (default the first decided).
        """
        stop = stop or self.stop
        if stop is not None and stop.output is not None:
            return Settled(stop.output, False, "")
        if stop is not None and stop.reason is StopReason.COMPLETED and self.answer:
            return Settled(self.answer, False, "")
        if final is None or stop is None:
            return Settled(last_text, False, "")
        return settle_output(last_text, final, (FINAL_ANSWER_PROMPT.format(detail=stop.detail),))

    def report(self, last_text: str, final: str | None = None) -> StopReport:
        """How the run ended (see `output` for the arguments)."""
        stop = self.stop
        if stop is None:
            raise RuntimeError("the run has not stopped")
        output, after, note = self.output(last_text, final, stop)
        return StopReport(
            reason=stop.reason,
            detail=detail_with_note(stop.detail, note),
            cycles=self.tally.cycles,
            output=output,
            output_after_stop=after,
            usage=self.tally.usage,
        )


def _stop_text(limit: LimitReached) -> str:
    stop = decide(Facts(limit=limit))
    assert isinstance(stop, Stop)
    return stop.detail


def _text_of(decision: Interrupted | Nudge) -> str:
    return decision.message if isinstance(decision, Interrupted) else decision.note


_ANSWERED = Facts(answered=True)
