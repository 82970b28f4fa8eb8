"""`CycleDriver`: one run's stop decisions in the loop's order, for any host framework.

A host that runs its own agent loop calls the driver at the same points of each cycle
as convergent's loop decides: before a model request (`before_request`: the limits),
after a response without tool calls (`answered`: the verifier, then completion), after
a response with tool calls and before they run (`review`: a stall becomes a nudge or a
stop), and after they ran (`observe` each, then `end_step`: a hand-off or tool errors).
The driver keeps the `RunMonitor` and the run's counters between those points, asks
`decide` at each, remembers the first `Stop`, and says whether the stop calls for one
final request without tools (`final_prompt`). It does no I/O: the host makes the
requests and runs the tools, its own way.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from convergent.exceptions import ToolError, UserError
from convergent.extensions import Verification, Verifier
from convergent.messages import NO_USAGE, ToolCall, Usage
from convergent.monitor import RunMonitor
from convergent.stop import (
    CONTINUE,
    Decision,
    Facts,
    HandOff,
    Interrupted,
    Limits,
    Nudge,
    Stop,
    StopReason,
    decide,
)

__all__ = [
    "ANSWER_AFTER_STOP",
    "FINAL_ANSWER_PROMPT",
    "CycleDriver",
    "NotExpressible",
    "Review",
    "StopReport",
    "failure",
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


class NotExpressible(UserError):
    """The host framework cannot express what was asked of its adapter.

    Raised when the adapter is built, never mid-run: for example a verifier for a host
    that ends its run at its first answer, or a nudge for a routing function, which
    cannot add a message.
    """


_MESSAGE_CHARS = 16
"""Characters counted per message for its framing when estimating the next request."""

ToolOutcome = Literal["ok", "failed", "invalid"]
"""How a call that was attempted ended: ran, failed, or was rejected as the model's mistake."""


def failure(tool: str, error: BaseException) -> tuple[str, bool]:
    """A tool's exception as the loop words it for the model, and whether it is fatal."""
    if isinstance(error, ToolError):
        return f"{tool} failed: {error}", error.fatal
    return f"{tool} raised {type(error).__name__}: {error}", False


@dataclass(frozen=True, slots=True)
class Review:
    """What the driver makes of a response's tool calls before they run."""

    decision: Decision
    """`CONTINUE`, a stall `Nudge`, or a `Stop`."""
    skipped: Mapping[int, str]
    """Calls that must not run, by position in the batch, with the text the model
    gets as their result (the nudge's note, or why the run stopped)."""


_RUN_ALL = Review(CONTINUE, {})


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
    """The stop decisions of one run, taken in the loop's order for a host framework.

    Args:
        limits: Budgets and thresholds (default `Limits()`).
        tools: Tool names with their ``read_only`` flag (True, False, or None when
            unknown); None: every name is a tool with an unknown flag.
        terminal_tools: Tools whose successful call hands the run off (its result is
            the output).
        max_consecutive_tool_errors: Failing steps in a row that stop the run (after a
            nudge); None never.
        on_tool_error: ``stop``: any failure ends the run.
        verifier: An external check of an answer without tool calls; while it fails,
            its feedback goes to the model and the run goes on.
        final_answer: Ask for one answer without tools after a stop for ``max_cycles``,
            ``stalled``, ``budget_exhausted`` or ``tool_error``.
        clock: Monotonic seconds, for ``max_seconds``.
    """

    __slots__ = (
        "_clock",
        "_handoff",
        "_pending",
        "_started",
        "cycles",
        "final_answer",
        "last",
        "monitor",
        "stop",
        "terminal_tools",
        "usage",
        "verifier",
    )

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        tools: Mapping[str, bool | None] | None = None,
        terminal_tools: Collection[str] = (),
        max_consecutive_tool_errors: int | None = 3,
        on_tool_error: Literal["continue", "stop"] = "continue",
        verifier: Verifier | None = None,
        final_answer: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.monitor = RunMonitor(
            limits,
            tools=tools,
            max_consecutive_tool_errors=max_consecutive_tool_errors,
            on_tool_error=on_tool_error,
        )
        self.terminal_tools = frozenset(terminal_tools)
        self.verifier = verifier
        self.final_answer = final_answer
        self._clock = clock
        self._started = clock()
        self.cycles = 0
        """Model requests made so far (the final answer's request is not one)."""
        self.usage = NO_USAGE
        """Usage reported so far."""
        self.last: Usage | None = None
        """The last request's usage."""
        self.stop: Stop | None = None
        """The first stop decided, once there is one."""
        self._pending = 0
        self._handoff: HandOff | None = None

    @property
    def limits(self) -> Limits:
        """The run's budgets and thresholds."""
        return self.monitor.limits

    def elapsed(self) -> float:
        """Seconds since the driver was made."""
        return self._clock() - self._started

    def _decided(self, decision: Decision) -> Decision:
        if isinstance(decision, Stop) and self.stop is None:
            self.stop = decision
        elif isinstance(decision, Nudge):
            self.monitor.nudged(decision)
        return decision

    # -- before a model request ---------------------------------------------------------

    def before_request(self) -> Decision:
        """The limits, checked before the next model request: `CONTINUE` or a `Stop`."""
        if self.stop is not None:
            return self.stop
        limits = self.limits
        reserve = (
            self.final_answer
            and self.last is not None
            and (limits.max_total_tokens is not None or limits.max_cost is not None)
        )
        limit = self.monitor.limit(
            cycles=self.cycles,
            usage=self.usage,
            elapsed=self.elapsed() if limits.max_seconds is not None else 0.0,
            last=self.last if reserve else None,
            pending_chars=self._pending,
        )
        if limit is None:
            return CONTINUE
        return self._decided(decide(Facts(limit=limit)))

    def budget_note(self) -> str | None:
        """Once per run, when 80 % of a budget is used: what is left, for the model."""
        timed = self.limits.max_seconds is not None
        elapsed = self.elapsed() if timed else 0.0
        return self.monitor.budget_note(cycles=self.cycles, usage=self.usage, elapsed=elapsed)

    def requested(self, usage: Usage | None = None) -> int:
        """A model request was made (with its usage, if known); returns its cycle number."""
        self.cycles += 1
        self._pending = 0
        if usage is not None:
            self.add_usage(usage)
            self.last = usage
        return self.cycles

    def add_usage(self, usage: Usage) -> None:
        """Count usage that is not a cycle's (the final answer's request)."""
        self.usage = self.usage + usage

    # -- after a response ---------------------------------------------------------------

    def answered(self, text: str, verdict: Verification | None = None) -> Decision:
        """A response without tool calls: `Stop` (completed) or the verifier's feedback.

        Args:
            text: The answer.
            verdict: The verifier's verdict on it, for hosts that run the verifier
                themselves (`answered_async` does it for async verifiers); by default
                the driver's synchronous verifier is asked.
        """
        if verdict is None and self.verifier is not None:
            found = self.verifier(text)
            if inspect.isawaitable(found):
                raise TypeError("an async verifier needs answered_async")
            verdict = found
        return self._verdict(verdict)

    async def answered_async(self, text: str) -> Decision:
        """`answered`, awaiting the verifier when it is async."""
        verdict = None
        if self.verifier is not None:
            found = self.verifier(text)
            verdict = await found if inspect.isawaitable(found) else found
        return self._verdict(verdict)

    def _verdict(self, verdict: Verification | None) -> Decision:
        if verdict is None:
            return self._decided(decide(_ANSWERED))
        feedback = "" if verdict.passed else verdict.feedback or "the answer failed verification"
        decision = decide(Facts(answered=True, verdict=verdict.passed, feedback=feedback))
        if isinstance(decision, Interrupted):
            self._pending += len(decision.message) + _MESSAGE_CHARS
        return self._decided(decision)

    def review(self, calls: Sequence[ToolCall]) -> Review:
        """The tool calls of a response, before they run: run them all, some, or none.

        A stall with a nudge left skips the repeated calls (their result is the note);
        a stall without one stops the run, and no call runs.
        """
        stall = self.monitor.review(calls)
        if stall is None:
            return _RUN_ALL
        decision = self._decided(decide(Facts(stall=stall)))
        if isinstance(decision, Stop):
            text = f"not executed: {decision.detail}"
            skipped = dict.fromkeys(range(len(calls)), text)
        elif isinstance(decision, Nudge):
            skipped = dict.fromkeys(stall.positions, decision.note)
        else:
            return _RUN_ALL
        self._pending += sum(len(text) + _MESSAGE_CHARS for text in skipped.values())
        return Review(decision, skipped)

    # -- after the calls ran ------------------------------------------------------------

    def observe(
        self, call: ToolCall, outcome: ToolOutcome, result: str, *, fatal: bool = False
    ) -> None:
        """Record one call that ran (or was rejected), in call order."""
        self.monitor.observe(call, outcome, result, fatal=fatal)
        self._pending += len(result) + _MESSAGE_CHARS
        if outcome == "ok" and self._handoff is None and call.name in self.terminal_tools:
            self._handoff = HandOff(tool=call.name, result=result)

    def end_step(self) -> Decision:
        """The batch is complete: a hand-off, the tool-error policy, or `CONTINUE`.

        A tool-error `Nudge` carries a note the host adds to the conversation (as a
        user message) before the next request.
        """
        failure = self.monitor.end_step()
        handoff, self._handoff = self._handoff, None
        if failure is None and handoff is None:
            return CONTINUE
        decision = self._decided(decide(Facts(handed_off=handoff, tool_failure=failure)))
        if isinstance(decision, Nudge):
            self._pending += len(decision.note) + _MESSAGE_CHARS
        return decision

    # -- the end ------------------------------------------------------------------------

    def final_prompt(self) -> str | None:
        """The request for a final answer without tools, when the stop calls for one."""
        stop = self.stop
        if stop is None or not self.final_answer or stop.reason not in ANSWER_AFTER_STOP:
            return None
        return FINAL_ANSWER_PROMPT.format(detail=stop.detail)

    def report(self, last_text: str, final: str | None = None) -> StopReport:
        """How the run ended.

        Args:
            last_text: The model's last text in the run (its answer, for ``completed``).
            final: The answer to `final_prompt`, if one was asked for and came back.
        """
        stop = self.stop
        if stop is None:
            raise RuntimeError("the run has not stopped")
        if stop.output is not None:
            return self._report(stop, stop.output, False)
        if final is not None and final.strip():
            return self._report(stop, final, True)
        return self._report(stop, last_text, False)

    def _report(self, stop: Stop, output: str, after: bool) -> StopReport:
        return StopReport(
            reason=stop.reason,
            detail=stop.detail,
            cycles=self.cycles,
            output=output,
            output_after_stop=after,
            usage=self.usage,
        )


_ANSWERED = Facts(answered=True)
