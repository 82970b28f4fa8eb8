"""`CycleDriver`: one run's stop decisions in the loop's order, for the loop and any host.

An agent loop decides at four points of each cycle: before a model request (outside
events such as a stop request, then the limits), after a response without tool calls
(the verifier, then completion), after a response with tool calls and before they run
(a stall becomes a nudge or a stop), and after they ran (a hand-off, tool errors).
`CycleDriver` keeps the `RunMonitor` and the run's counters between those points, asks
`convergent.stop.decide` at each, gives the monitor back the nudges it decided, and
after a stop says whether one final request without tools is due, with its prompt and
its output cap (`final_request`). It does no I/O.

convergent's own loop (`Agent.run`) and every adapter in `convergent.adapters` call one
driver per run at the same points, each making its requests and running its tools its
own way, so that a trajectory ends the same way wherever it runs. The wording the model
reads after a tool's exception (`failure_result`) and after a stop
(`FINAL_ANSWER_PROMPT`) is defined here once for all of them.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict, TypeVar, Unpack

from convergent._answer_check import Settled, detail_with_note, settle_output
from convergent.exceptions import ToolError
from convergent.extensions import Verification, Verifier
from convergent.limits import Limits
from convergent.messages import NO_USAGE, AssistantMessage, CallOutcome, Message, ToolCall, Usage
from convergent.models._prices import priced
from convergent.monitor import CHARS_PER_MESSAGE, FINAL_ANSWER_TOKENS, MonitorState, RunMonitor
from convergent.output import OutputCheck, OutputSpec
from convergent.stop import (
    CONTINUE,
    Decision,
    Facts,
    HandOff,
    Interrupted,
    Nudge,
    Stop,
    StopReason,
    decide,
)

if TYPE_CHECKING:
    from convergent.models._prices import TokenPrice

__all__ = [
    "ANSWER_AFTER_STOP",
    "FINAL_ANSWER_PROMPT",
    "CycleDriver",
    "FinalRequest",
    "PolicyOptions",
    "Review",
    "RunTally",
    "StopReport",
    "Tally",
    "failure_result",
    "message_chars",
]

ANSWER_AFTER_STOP = frozenset(
    {
        StopReason.MAX_CYCLES,
        StopReason.STALLED,
        StopReason.BUDGET_EXHAUSTED,
        StopReason.TOOL_ERROR,
    }
)
"""Stops after which the run asks the model for its best answer, with no tools."""

FINAL_ANSWER_PROMPT = (
    "The run has stopped ({detail}), and you cannot call tools any more. Reply with your "
    "best answer to the task from what you have found so far, and say briefly what is "
    "missing or uncertain, and why."
)
"""The request for the final answer after a stop."""


def failure_result(tool: str, error: BaseException) -> tuple[str, bool]:
    """A tool's exception as the model reads it, and whether the tool declared it fatal."""
    if isinstance(error, ToolError):
        return f"{tool} failed: {error}", error.fatal
    return f"{tool} raised {type(error).__name__}: {error}", False


def message_chars(message: Message) -> int:
    """Characters of a message as a model sees it: its text, call arguments and framing."""
    if isinstance(message, AssistantMessage) and message.tool_calls:
        return (
            CHARS_PER_MESSAGE
            + len(message.content)
            + sum(
                CHARS_PER_MESSAGE + len(call.name) + len(str(call.arguments))
                for call in message.tool_calls
            )
        )
    return CHARS_PER_MESSAGE + len(message.content)


def verdict_feedback(verdict: Verification) -> str:
    """What the model is told of a failed verdict ("" when it passed)."""
    return "" if verdict.passed else verdict.feedback or "the answer failed verification"


class PolicyOptions(TypedDict, total=False):
    """A run's stop policy besides its `Limits`: what the loop's `Agent` and every adapter take."""

    tools: Mapping[str, bool | None] | None
    """Tool names with their ``read_only`` flag (True, False, or None when unknown);
    None (the default): every name is a tool with an unknown flag."""
    terminal_tools: Collection[str]
    """Tools whose successful call hands the run off (its result is the output)."""
    max_consecutive_tool_errors: int | None
    """Failing steps in a row that stop the run, after a nudge (default 3); None never."""
    on_tool_error: Literal["continue", "stop"]
    """``stop``: any failure ends the run; ``continue`` (the default): streaks count."""
    verifier: Verifier | None
    """An external check of an answer without tool calls; while it fails, its feedback
    goes to the model and the run goes on."""
    output: OutputSpec | None
    """The type an answer without tool calls must have (`convergent.output`); while it
    does not validate, the errors go to the model and the run goes on. It is checked
    before the verifier, which judges only a valid answer."""
    final_answer: bool
    """Ask for one answer without tools after a stop for ``max_cycles``, ``stalled``,
    ``budget_exhausted`` or ``tool_error`` (the default); room for it is kept in the
    token and cost budgets."""


class Tally(Protocol):
    """Where a driver counts a run's requests and usage (`convergent.RunState` is one)."""

    cycles: int
    """Model requests made so far (a final answer's request is not one)."""
    usage: Usage
    """Usage reported so far, the final answer's included."""


@dataclass(slots=True)
class RunTally:
    """A `Tally` of its own, for a host that keeps no run state of convergent's."""

    cycles: int = 0
    """Model requests made so far."""
    usage: Usage = NO_USAGE
    """Usage reported so far."""


@dataclass(frozen=True, slots=True)
class Review:
    """What the driver makes of a response's tool calls before they run."""

    decision: Decision
    """`CONTINUE`, a stall `Nudge`, or a `Stop`."""
    skipped: Mapping[int, str]
    """Calls that must not run, by position in the batch, with the text the model
    gets as their result (the nudge's note, or why the run stopped)."""


RUN_ALL = Review(CONTINUE, {})
"""The review of a batch whose calls all run."""


@dataclass(frozen=True, slots=True)
class FinalRequest:
    """The one request without tools after a stop, for the best answer so far."""

    prompt: str
    """What the model is asked, appended to the conversation as a user message."""
    max_tokens: int | None
    """The output cap that keeps the answer within the token and cost budgets; None
    when no such budget is set (the host's own setting applies)."""


@dataclass(frozen=True, slots=True)
class StopReport:
    """How a host's run ended, in convergent's terms."""

    reason: StopReason
    """The objective reason."""
    detail: str
    """The reason in words, with the numbers that triggered it."""
    cycles: int
    """Model requests made before the stop (the final answer's request is not one)."""
    output: str
    """The final answer: the model's answer, a hand-off's result, or the answer the
    model gave after the stop (then ``output_after_stop``)."""
    output_after_stop: bool = False
    """The output was asked for after the stop, with no tools."""
    usage: Usage = NO_USAGE
    """Usage the host reported for the run's requests, the final one included."""


class CycleDriver:
    """The stop decisions of one run, taken in the loop's order.

    Args:
        limits: Budgets and thresholds (default `Limits()`).
        tally: Where requests and usage are counted (a run's `RunState`); default a
            fresh `RunTally`.
        monitor_state: The monitor's state to continue (a resumed run's).
        clock: Monotonic seconds, for ``max_seconds``.
        elapsed_before: Seconds the run took before this driver took it over (a
            resumed run's).
        price: The model's price: a response whose usage reports no cost is costed at
            it, and so is the room kept for the next cycle and the final answer; None:
            only reported costs count, and the room is estimated from the latest
            request's cost.
        **options: The rest of the stop policy (`PolicyOptions`).

    A host that can measure its conversation may override `pending_chars`, as
    convergent's loop does.
    """

    __slots__ = (
        "_before",
        "_budgets",
        "_clock",
        "_handoff",
        "_price",
        "_reserve",
        "_started",
        "_timed",
        "final_answer",
        "last",
        "limits",
        "monitor",
        "pending",
        "stop",
        "tally",
        "terminal_tools",
        "verifier",
        "output_spec",
    )

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        tally: Tally | None = None,
        monitor_state: MonitorState | None = None,
        clock: Callable[[], float] = time.monotonic,
        elapsed_before: float = 0.0,
        price: TokenPrice | None = None,
        **options: Unpack[PolicyOptions],
    ) -> None:
        self.monitor = RunMonitor(
            limits,
            tools=options.get("tools"),
            max_consecutive_tool_errors=options.get("max_consecutive_tool_errors", 3),
            on_tool_error=options.get("on_tool_error", "continue"),
            state=monitor_state,
            price=price,
        )
        limits = self.limits = self.monitor.limits
        self._price = self.monitor.price
        terminal_tools = options.get("terminal_tools", ())
        self.terminal_tools = (
            terminal_tools if isinstance(terminal_tools, frozenset) else frozenset(terminal_tools)
        )
        self.verifier = options.get("verifier")
        self.output_spec = options.get("output")
        final_answer = self.final_answer = options.get("final_answer", True)
        self.tally: Tally = tally if tally is not None else RunTally()
        self._clock = clock
        self._started = clock()
        self._before = elapsed_before
        self._timed = limits.max_seconds is not None
        budgets = limits.max_total_tokens is not None or limits.max_cost is not None
        self._budgets = budgets or self._timed
        # room is kept for the final answer only where a token or cost budget could run out
        self._reserve = final_answer and budgets
        self.last: Usage = NO_USAGE
        """The latest request's usage (none yet: the estimates count what came since)."""
        self.pending = 0
        """Characters the driver saw added to the conversation since the last response."""
        self.stop: Stop | None = None
        """The first stop decided, once there is one."""
        self._handoff: HandOff | None = None

    @property
    def cycles(self) -> int:
        """Model requests made so far (the final answer's request is not one)."""
        return self.tally.cycles

    @property
    def usage(self) -> Usage:
        """Usage reported so far."""
        return self.tally.usage

    def elapsed(self) -> float:
        """Seconds the run has taken."""
        return self._before + self._clock() - self._started

    def pending_chars(self) -> int:
        """Characters added to the conversation since the last response, for estimates.

        Here: the results, notes and feedback the driver saw, with their framing.
        """
        return self.pending

    def _decided(self, decision: Decision) -> Decision:
        if isinstance(decision, Stop):
            if self.stop is None:
                self.stop = decision
        elif isinstance(decision, Nudge):
            self.monitor.nudged(decision)
        return decision

    # -- before a model request ---------------------------------------------------------

    def before_request(self, outside: Facts | None = None) -> Decision:
        """Outside events (a stop request, messages, a pause), then the limits.

        Args:
            outside: What happened outside the run since the last decision (the
                steering facts); None: nothing.

        Returns:
            `CONTINUE`, or what ``decide`` makes of the facts: a `Stop` when a limit
            forbids the request (room is kept for the final answer), or the decision
            an outside event calls for.
        """
        tally = self.tally
        cycles = self.cycles_used()
        if not self._budgets:
            maximum = self.limits.max_cycles
            limit = (
                None
                if maximum is None or cycles < maximum
                else self.limits.reached(cycles, 0, 0.0, 0.0)
            )
        elif self._reserve and cycles:
            limit = self.monitor.limit(
                cycles=cycles,
                usage=tally.usage,
                elapsed=self.elapsed() if self._timed else 0.0,
                last=self.last,
                pending_chars=self.pending_chars(),
            )
        else:
            usage = tally.usage
            elapsed = self.elapsed() if self._timed else 0.0
            limit = self.limits.reached(cycles, usage.total_tokens, elapsed, usage.cost)
        if limit is None and outside is None:
            return CONTINUE
        facts = Facts(limit=limit) if outside is None else dataclasses.replace(outside, limit=limit)
        return self._decided(decide(facts))

    def budget_note(self) -> str | None:
        """Once per run, when 80 % of a budget is used: what is left, for the model."""
        tally, monitor = self.tally, self.monitor
        cycles = self.cycles_used()
        if cycles < monitor.note_from:
            return None
        elapsed = self.elapsed() if self._timed else 0.0
        note = monitor.budget_note(cycles=cycles, usage=tally.usage, elapsed=elapsed)
        if note is not None:
            self.pending += len(note) + CHARS_PER_MESSAGE
        return note

    def start_request(self) -> int:
        """A model request is about to be made: returns its cycle number."""
        tally = self.tally
        tally.cycles += 1
        return tally.cycles

    def responded(self, usage: Usage) -> None:
        """The request was answered, with this usage (`NO_USAGE` when unknown).

        Usage that reports no cost is costed at the driver's price, if it has one.
        """
        usage = priced(usage, self._price)
        self.last = usage
        self.pending = 0
        if usage.requests or usage.input_tokens or usage.output_tokens or usage.cost:
            tally = self.tally
            tally.usage = tally.usage + usage

    def requested(self, usage: Usage = NO_USAGE) -> int:
        """A model request was made and answered: `start_request`, then `responded`."""
        cycle = self.start_request()
        self.responded(usage)
        return cycle

    def add_usage(self, usage: Usage, cycles: int = 0) -> None:
        """Count usage that is not a cycle's: a final answer's, or a child run's and its cycles.

        A final answer's usage that reports no cost is costed at the driver's price; a
        child run's (``cycles`` > 0) counts as its own run reported it.
        """
        if not cycles:
            usage = priced(usage, self._price)
        tally = self.tally
        tally.usage = tally.usage + usage
        self.monitor.state.child_cycles += cycles

    def cycles_used(self) -> int:
        """Cycles counted against ``max_cycles``: the run's own and its child runs'."""
        return self.tally.cycles + self.monitor.state.child_cycles

    def remaining(self) -> Limits:
        """What is left of each budget now (a child run called as a tool gets at most this)."""
        limits, usage = self.limits, self.tally.usage
        return dataclasses.replace(
            limits,
            max_cycles=_left(limits.max_cycles, self.cycles_used()),
            max_total_tokens=_left(limits.max_total_tokens, usage.total_tokens),
            max_seconds=_left(limits.max_seconds, self.elapsed()),
            max_cost=_left(limits.max_cost, usage.cost),
        )

    def model_failed(self, error: str) -> Decision:
        """The model backend failed after its retries, with this text: a `Stop`."""
        return self._decided(decide(Facts(model_error=error)))

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
        facts = Facts(
            answered=True,
            verdict=verdict.passed if verdict is not None else None,
            feedback=verdict_feedback(verdict) if verdict is not None else "",
            output_errors=output_errors,
        )
        decision = decide(facts)
        if isinstance(decision, Interrupted):
            self.pending += len(decision.message) + CHARS_PER_MESSAGE
        return self._decided(decision)

    def answered(self, text: str) -> Decision:
        """`judge_answer` on ``text``: its output check, then the synchronous verifier."""
        errors = self._output_errors(text)
        if errors is not None:
            return self.judge_answer(None, output_errors=errors)
        return self.judge_answer(self.verify(text))

    async def answered_async(self, text: str) -> Decision:
        """`judge_answer` on ``text``: its output check, then the verifier, awaited if async."""
        errors = self._output_errors(text)
        if errors is not None:
            return self.judge_answer(None, output_errors=errors)
        return self.judge_answer(await self.verify_async(text))

    def _output_errors(self, text: str) -> str | None:
        check = self.check_output(text)
        return check.errors if check is not None else None

    # -- after a response with tool calls -----------------------------------------------

    def review(self, calls: Sequence[ToolCall]) -> Review:
        """The tool calls of a response, before they run: run them all, some, or none.

        A stall with a nudge left skips the repeated calls (their result is the note);
        a stall without one stops the run, and no call runs.
        """
        stall = self.monitor.review(calls)
        if stall is None:
            return RUN_ALL
        decision = self._decided(decide(Facts(stall=stall)))
        if isinstance(decision, Stop):
            text = f"not executed: {decision.detail}"
            skipped = dict.fromkeys(range(len(calls)), text)
        elif isinstance(decision, Nudge):
            skipped = dict.fromkeys(stall.positions, decision.note)
        else:
            return RUN_ALL
        self.pending += sum(len(text) + CHARS_PER_MESSAGE for text in skipped.values())
        return Review(decision, skipped)

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
        """The batch is complete: a hand-off, the tool-error policy, or `CONTINUE`.

        Args:
            needs_user: A question of the batch for the user that no channel can
                answer now.

        A tool-error `Nudge` carries a note the host adds to the conversation (as a
        user message) before the next request.
        """
        failure = self.monitor.end_step()
        handoff = self._handoff
        if handoff is None and failure is None and needs_user is None:
            return CONTINUE
        self._handoff = None
        decision = self._decided(
            decide(Facts(handed_off=handoff, tool_failure=failure, needs_user=needs_user))
        )
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
                setting); default `convergent.monitor.FINAL_ANSWER_TOKENS`. Within a
                token or cost budget the answer gets what is left, if that is enough.
        """
        stop = stop or self.stop
        if stop is None or not self.calls_for_answer(stop):
            return None
        prompt = FINAL_ANSWER_PROMPT.format(detail=stop.detail)
        if not self._reserve:
            return FinalRequest(prompt, None)
        room = self.monitor.final_answer_tokens(
            usage=self.tally.usage,
            last=self.last,
            pending_chars=self.pending_chars() + CHARS_PER_MESSAGE + len(prompt),
            wanted=wanted_tokens or FINAL_ANSWER_TOKENS,
        )
        return FinalRequest(prompt, room) if room else None

    def output(self, last_text: str, final: str | None = None, stop: Stop | None = None) -> Settled:
        """The run's output, whether it is an answer made after the stop, and a note.

        An answer after the stop that is no answer (empty, the request echoed, mostly
        repetition, the protocol's JSON: `convergent._answer_check`) is left out; the
        note says why.

        Args:
            last_text: The model's last text in the run (its answer, for ``completed``).
            final: The answer to the final request, if one was made and came back.
            stop: The stop (default the first decided).
        """
        stop = stop or self.stop
        if stop is not None and stop.output is not None:
            return Settled(stop.output, False, "")
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


_ANSWERED = Facts(answered=True)


_N = TypeVar("_N", int, float)


def _left(budget: _N | None, used: _N) -> _N | None:
    return None if budget is None else max(budget - used, 0)
