"""Why a run stops, and the one function that decides it: `decide`.

At each decision point of a run (before a model request, after a response, after its
tool calls) what is known is gathered into `Facts`, and `decide` turns them into one
`Decision`: go on (`Continue`), stop for a `StopReason` (`Stop`), deliver a message
(`Interrupted`), wait (`Paused`), tell the model it is going round in circles (`Nudge`)
or hand the run over to a fresh process (`RollOver`). It is pure (no I/O, no clock),
so the local loop, the Temporal workflow, the coordinator and any adapter for another
framework reach the same decision from the same facts.

When several stop conditions hold at once, the first in `STOP_PRIORITY` wins: an
outside stop request, completion, a hand-off, tool error, stall, the limits, model
failure, and a question for the user. The model's self-reported confidence is never a
fact.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

__all__ = [
    "CONTINUE",
    "FACT_RULES",
    "FAILURE_RULES",
    "NO_FACTS",
    "OUTPUT_FEEDBACK",
    "STALL_RULES",
    "STOP_PRIORITY",
    "Continue",
    "Decision",
    "FailureKind",
    "Facts",
    "HandOff",
    "Interrupted",
    "LimitReached",
    "Nudge",
    "Paused",
    "RollOver",
    "Stall",
    "StallKind",
    "Stop",
    "StopReason",
    "ToolFailure",
    "Unfinished",
    "canonical_call_key",
    "decide",
]


class StopReason(StrEnum):
    """The objective reason a run (or a coordinated iteration) ended."""

    STOPPED = "stopped"
    """A stop was requested from outside: API, CLI, steering queue or signal."""
    COMPLETED = "completed"
    """The model answered without tool calls (and any declared verifier passed, and the
    answer validated against any declared output type)."""
    HANDED_OFF = "handed_off"
    """A terminal tool (a hand-off such as a transfer to a human) ran successfully."""
    TOOL_ERROR = "tool_error"
    """Tool failures persisted: a streak of failing steps after a nudge, a failure the
    tool marked fatal, or any failure under the policy ``stop``."""
    STALLED = "stalled"
    """No progress: the same call (or a short cycle of calls) repeated while nothing
    changed, after a nudge; or the unresolved work did not shrink."""
    MAX_CYCLES = "max_cycles"
    """The cycle (or iteration) limit was reached."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """A token, wall-time or cost budget was used up."""
    MODEL_ERROR = "model_error"
    """The model backend failed after its retries."""
    NEEDS_USER = "needs_user"
    """The run is waiting for a user's answer it cannot get here; resumable."""

    @property
    def resumable(self) -> bool:
        """Whether a run that ended this way can be continued from its checkpoint."""
        return self not in (StopReason.COMPLETED,)


STOP_PRIORITY: tuple[StopReason, ...] = (
    StopReason.STOPPED,
    StopReason.COMPLETED,
    StopReason.HANDED_OFF,
    StopReason.TOOL_ERROR,
    StopReason.STALLED,
    StopReason.MAX_CYCLES,
    StopReason.BUDGET_EXHAUSTED,
    StopReason.MODEL_ERROR,
    StopReason.NEEDS_USER,
)
"""The order in which `decide` tries the stop reasons: the first that holds wins."""

LimitName = Literal[
    "max_cycles",
    "max_total_tokens",
    "max_seconds",
    "max_cost",
    "max_tool_calls",
    "max_calls_per_tool",
]
"""A budget of `Limits`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitReached:
    """A budget of `Limits` that forbids another model request, with its numbers."""

    limit: LimitName
    """Which budget."""
    used: float
    """How much of it the run has used (cycles, tokens, seconds or cost)."""
    maximum: float
    """The budget."""
    reserved: float = 0.0
    """Part of the budget kept for what must still fit after this point (the next
    cycle and the final answer); the limit is reached once ``used + reserved``
    reaches ``maximum``."""
    tool: str = ""
    """The tool whose cap was reached (``max_calls_per_tool``)."""
    during: str = ""
    """What the budget ran out during, when it was not between two requests (``a model
    request``, ``the tool calls``)."""


def canonical_call_key(name: str, arguments: Mapping[str, Any]) -> str:
    """A stable key for a tool call: same name and same arguments give the same key."""
    items = sorted(arguments.items()) if len(arguments) > 1 else arguments.items()
    shown = []
    for key, value in items:
        if type(value) not in _SCALARS:
            return (
                name
                + "\x01"
                + json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
            )
        # the repr of the list of (key, value) pairs, written out: repr() of a list of
        # tuples guards against recursion, and costs several times as much
        shown.append(f"({key!r}, {value!r})")
    return f"{name}\x00[{', '.join(shown)}]"


_SCALARS = frozenset({str, int, float, bool, type(None)})


# --- facts ----------------------------------------------------------------------------


StallKind = Literal["repeat", "cycle", "mistakes", "repeated_mistake", "rejected"]
"""What repeats without progress: one call, a cycle of calls, the model's mistakes (a
streak of them, or the same mistaken call again), or answers the verifier or the output
type rejects."""

STALL_RULES: Mapping[StallKind, str] = {
    "repeat": "max_repeated_calls",
    "cycle": "max_cycle_length",
    "mistakes": "max_mistakes",
    "repeated_mistake": "max_repeated_mistakes",
    "rejected": "max_rejected_answers",
}
"""The `StopPolicy` setting behind each kind of stall (a cycle of calls is watched up to
``max_cycle_length`` calls long, and counted as ``max_repeated_calls`` counts)."""

FailureKind = Literal["repeated", "steps"]
"""Which tool-failure streak: the same call failing again within it, or failing steps
whatever their calls."""

FAILURE_RULES: Mapping[FailureKind, str] = {
    "repeated": "max_repeated_failures",
    "steps": "max_failing_steps",
}
"""The `StopPolicy` setting behind each kind of tool-failure streak."""

FACT_RULES = ("stop_requested", "answered", "handed_off", "fatal", "model_error", "needs_user")
"""The rule of a stop no setting gives: the fact that gave it (a fatal failure is
``fatal``; a failure under ``on_tool_error="stop"`` is that setting's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stall:
    """No progress: a call or cycle repeats, mistakes persist, or answers are rejected.

    A call or a cycle of calls repeats while nothing changes, the model keeps making
    calls the run cannot make, or its answers keep being rejected.
    """

    what: str
    """The repeated call (``read_file(path="a.txt")``), cycle, or streak, in words."""
    times: int
    """How often it happened in this stretch, the intercepted request included."""
    nudge: bool = False
    """A note is still available: the model is told instead of the run stopping."""
    positions: tuple[int, ...] = ()
    """Positions, in the response's batch, of the calls that would repeat (not run)."""
    kind: StallKind = "repeat"
    """What repeats."""
    write: bool = False
    """The repeated call is a write: each call does it again, whatever it returns."""
    wait: float | None = None
    """Seconds to wait before the call so that it is a fresh look, if the model is
    waiting for its result to change (None: time never counts, or it is a write)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailure:
    """Tool failures that call for the tool-error policy.

    The failure stops the run when it is ``fatal``, under the policy ``stop``, or when
    the streak reached its limit and no nudge is left.
    """

    error: str
    """Text of the first failure of the step."""
    fatal: bool = False
    """The tool declared the failure unrecoverable."""
    policy: bool = False
    """The tool-error policy is ``stop``: any failure ends the run."""
    streak: int = 0
    """Failing steps in a row, as counted by `convergent.loop.monitor.RunMonitor`."""
    at_limit: bool = False
    """The streak just reached or passed its threshold."""
    nudge: bool = False
    """A note is still available for this streak."""
    kind: FailureKind = "repeated"
    """Which streak: the same call failing again within the streak
    (``max_repeated_failures``), or failing steps whatever their calls
    (``max_failing_steps``)."""
    call: str = ""
    """The call that failed again (``repeated``), in words."""
    times: int = 0
    """How often that call failed in the streak (``repeated``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Unfinished:
    """A reply without tool calls that is not an answer, by the reply's structure."""

    kind: Literal["empty", "cut", "refused"]
    """Empty; cut at the output token limit; refused by the provider (a content filter
    or a refusal)."""
    times: int
    """Such replies in a row, this one included."""
    left: bool
    """The model may still be asked to continue (``max_continuations``)."""
    text: str = ""
    """The best text these replies gave (the parts of a cut reply, joined)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HandOff:
    """A terminal tool ran successfully: the work passed to someone else."""

    tool: str
    """The terminal tool."""
    result: str
    """Its result, which becomes the run's output."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """What is known at one decision point of a run; unknown facts keep their defaults."""

    stop_requested: bool = False
    """A stop was requested from outside (API, CLI, steering queue, signal)."""
    stop_text: str = ""
    """The words of the stop request, if any."""
    redirect: str | None = None
    """New instructions waiting to be delivered (steering messages), joined."""
    paused: bool = False
    """A pause is in force."""
    roll_over: bool = False
    """The run should continue in a fresh process from its state (Temporal's
    continue-as-new, when a workflow's history grows long)."""
    limit: LimitReached | None = None
    """A budget that forbids another model request."""
    model_error: str | None = None
    """The model backend failed after its retries, with this text."""
    answered: bool = False
    """The model's latest response had no tool calls."""
    unfinished: Unfinished | None = None
    """That response is not an answer (empty, cut, refused)."""
    verdict: bool | None = None
    """The verifier's verdict on that answer; None: no verifier, or it was not asked."""
    feedback: str = ""
    """What the verifier found wrong, for the model."""
    output_errors: str | None = None
    """Why that answer does not validate against the run's declared output type;
    None: it does, or no output type is declared."""
    handed_off: HandOff | None = None
    """A terminal tool ran successfully."""
    tool_failure: ToolFailure | None = None
    """Tool failures that call for the tool-error policy."""
    stall: Stall | None = None
    """No progress: the calls about to run (or that ran) repeat, the model's mistakes
    persist, or (with ``answered``) its answers keep being rejected."""
    needs_user: str | None = None
    """A question for the user that no channel can answer now."""


NO_FACTS = Facts()
"""Nothing is known: `decide` returns `CONTINUE`."""

CONTINUE_PROMPTS = {
    "cut": "Your reply was cut off at the output token limit. Continue exactly where it "
    "stopped, without repeating what you wrote.",
    "empty": "Your reply was empty. Answer the task, or call a tool if you need one.",
    "refused": "Your reply was withheld by the provider. Answer the task within its rules, "
    "or say briefly why you cannot.",
}
"""What the model is told after a reply that is not an answer, by kind."""

OUTPUT_FEEDBACK = (
    "Your final answer does not match the required output schema: {errors}. Reply with "
    "only a JSON value valid under the schema (or call tools if you need more information)."
)
"""What the model is told when its answer does not validate against the output type."""


# --- decisions --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Continue:
    """Nothing stops the run: it goes on."""


@dataclass(frozen=True, slots=True)
class Stop:
    """The run ends for ``reason``, by ``rule``."""

    reason: StopReason
    """The objective reason."""
    detail: str
    """The reason in words, with the numbers that triggered it."""
    output: str | None = None
    """The run's output when it is not the model's last text (a hand-off's result)."""
    rule: str = ""
    """The rule that gave the stop, from the facts: the name of the `StopPolicy` or
    `Limits` setting (``max_repeated_calls``, ``max_failing_steps``, ``max_tool_calls``...:
    `STALL_RULES`, `FAILURE_RULES`, `LimitName`), or for a stop no setting gives, the
    fact that gave it (`FACT_RULES`: ``stop_requested``, ``answered``, ``handed_off``,
    ``fatal``, ``model_error``, ``needs_user``). Every stop `decide` returns names one."""


@dataclass(frozen=True, slots=True)
class Interrupted:
    """A message for the model (a redirect, or the verifier's feedback); the run goes on."""

    message: str
    """What the model is told, as a user message."""


@dataclass(frozen=True, slots=True)
class Paused:
    """A pause is in force: wait for its end, then decide again."""


@dataclass(frozen=True, slots=True)
class Nudge:
    """A stall or a streak reached its threshold, and a note is still available.

    The model gets ``note`` (for a call that would repeat: as that call's result; else
    as a message) and the run goes on; it stops only if the pattern goes on.
    """

    reason: Literal[StopReason.STALLED, StopReason.TOOL_ERROR]
    """The stop this note stands in for."""
    note: str
    """What was repeated, how often, and that the model must change approach or answer."""
    kind: str = "repeat"
    """What it is about: a `StallKind`, or for tool errors ``repeated`` or ``steps``."""


@dataclass(frozen=True, slots=True)
class RollOver:
    """Continue the run in a fresh process from its state; not a stop."""


Decision = Continue | Stop | Interrupted | Paused | Nudge | RollOver
"""What `decide` returns."""

CONTINUE = Continue()
"""The one `Continue` (it carries nothing)."""
PAUSED = Paused()
"""The one `Paused`."""
ROLL_OVER = RollOver()
"""The one `RollOver`."""


def decide(facts: Facts) -> Decision:
    """The one decision the facts call for.

    In order: a stop request; a roll-over, then waiting messages (neither is a stop,
    and both come before any other stop: messages change what the run is for); the
    other stops, first in `STOP_PRIORITY` first (a stall or tool-error streak with a
    nudge available does not stop); an answer that does not validate against the
    output type, then the verifier's feedback; a pause; a nudge;
    otherwise `CONTINUE`.
    """
    if facts is NO_FACTS:
        return CONTINUE
    stop = _first_stop(facts)
    if stop is not None and stop.reason is StopReason.STOPPED:
        return stop
    if facts.roll_over:
        return ROLL_OVER
    if facts.redirect is not None:
        return Interrupted(facts.redirect)
    if stop is not None:
        return stop
    failure, stall = facts.tool_failure, facts.stall
    if facts.answered:
        told = _answer_feedback(facts)
        if told is not None:
            return told
    if facts.paused:
        return PAUSED
    if failure is not None and failure.at_limit and failure.nudge:
        return Nudge(StopReason.TOOL_ERROR, _tool_error_note(failure), failure.kind)
    if stall is not None and stall.nudge:
        return Nudge(StopReason.STALLED, _stall_note(stall), stall.kind)
    return CONTINUE


def _answer_feedback(facts: Facts) -> Interrupted | Nudge | None:
    """What the model is told of a reply that was not accepted: continue, or why not."""
    unfinished, stall = facts.unfinished, facts.stall
    if unfinished is not None:
        return Interrupted(CONTINUE_PROMPTS[unfinished.kind])
    rejection = _rejection(facts)
    if rejection is None:
        return None
    if stall is not None and stall.nudge:
        return Nudge(StopReason.STALLED, f"{rejection} {_stall_note(stall)}", stall.kind)
    return Interrupted(rejection)


def _rejection(facts: Facts) -> str | None:
    """What the model is told of an answer the output type or the verifier rejected."""
    if facts.output_errors is not None:
        return OUTPUT_FEEDBACK.format(errors=facts.output_errors)
    if facts.verdict is False:
        feedback = facts.feedback or "the answer failed verification"
        return f"Verification failed: {feedback}. Continue working on the task."
    return None


def _first_stop(facts: Facts) -> Stop | None:
    for reason in STOP_PRIORITY:
        stop = _RULES[reason](facts)
        if stop is not None:
            return stop
    return None


def _stopped(facts: Facts) -> Stop | None:
    if not facts.stop_requested:
        return None
    return Stop(StopReason.STOPPED, facts.stop_text or "stop requested", rule="stop_requested")


def _completed(facts: Facts) -> Stop | None:
    if (
        not facts.answered
        or facts.unfinished is not None
        or facts.verdict is False
        or facts.output_errors is not None
    ):
        return None
    if facts.verdict is None:
        return Stop(StopReason.COMPLETED, "the model answered without tool calls", rule="answered")
    return Stop(
        StopReason.COMPLETED, "answered without tool calls; verifier passed", rule="answered"
    )


def _handed_off(facts: Facts) -> Stop | None:
    handoff = facts.handed_off
    if handoff is None:
        return None
    detail = f"{handoff.tool} handed the run off: {handoff.result}"
    return Stop(StopReason.HANDED_OFF, detail, handoff.result, rule="handed_off")


def _tool_error(facts: Facts) -> Stop | None:
    failure = facts.tool_failure
    if failure is None:
        return None
    if failure.fatal:
        return Stop(StopReason.TOOL_ERROR, failure.error, rule="fatal")
    if failure.policy:
        return Stop(StopReason.TOOL_ERROR, failure.error, rule="on_tool_error")
    if not failure.at_limit or failure.nudge:
        return None
    rule = FAILURE_RULES[failure.kind]
    if failure.kind == "repeated" and failure.call:
        return Stop(
            StopReason.TOOL_ERROR,
            f"{failure.call} failed {failure.times} times in {_steps(failure.streak)} in a "
            f"row; the last error: {failure.error}",
            rule=rule,
        )
    if failure.streak <= 1:
        return Stop(StopReason.TOOL_ERROR, failure.error, rule=rule)
    return Stop(
        StopReason.TOOL_ERROR,
        f"tool calls failed in {failure.streak} steps in a row; the last: {failure.error}",
        rule=rule,
    )


def _steps(count: int) -> str:
    return "1 failing step" if count == 1 else f"{count} failing steps"


def _stalled(facts: Facts) -> Stop | None:
    stall = facts.stall
    if stall is None or stall.nudge:
        return None
    match stall.kind:
        case "mistakes":
            detail = f"the model made {stall.what} in {stall.times} steps in a row"
        case "repeated_mistake":
            detail = (
                f"the model made {stall.what}, a call the run cannot make, {stall.times} "
                "times in one streak of mistakes"
            )
        case "rejected":
            detail = f"{stall.what} was rejected {stall.times} times in a row"
        case _ if stall.write:
            detail = (
                f"{stall.what} was requested {stall.times} times with the same arguments "
                "and nothing else changed in between (each call does it again)"
            )
        case _:
            detail = (
                f"{stall.what} was requested {stall.times} times with the same result and "
                "nothing changed in between"
            )
    return Stop(StopReason.STALLED, detail, rule=STALL_RULES[stall.kind])


def _max_cycles(facts: Facts) -> Stop | None:
    limit = facts.limit
    if limit is None or limit.limit != "max_cycles":
        return None
    return Stop(StopReason.MAX_CYCLES, f"reached max_cycles={limit.maximum}", rule=limit.limit)


def _budget_exhausted(facts: Facts) -> Stop | None:
    limit = facts.limit
    if limit is None or limit.limit == "max_cycles":
        return None
    match limit.limit:
        case "max_total_tokens":
            detail = f"used {limit.used} tokens of max_total_tokens={limit.maximum}"
            kept = f"{limit.reserved} tokens"
        case "max_seconds":
            detail = f"ran {limit.used:.1f}s of max_seconds={limit.maximum}"
            kept = f"{limit.reserved:.1f}s"
        case "max_tool_calls":
            detail = f"made {limit.used:g} tool calls of max_tool_calls={limit.maximum:g}"
            kept = ""
        case "max_calls_per_tool":
            detail = (
                f"made {limit.used:g} calls of {limit.tool} of max_calls_per_tool={limit.maximum:g}"
            )
            kept = ""
        case _:
            detail = f"cost {limit.used:.4f} reached max_cost={limit.maximum}"
            kept = f"{limit.reserved:.4f}"
    if limit.during:
        detail += f", during {limit.during}"
    elif limit.reserved and kept:
        detail += f" ({kept} kept for the next request and the final answer)"
    return Stop(StopReason.BUDGET_EXHAUSTED, detail, rule=limit.limit)


def _model_error(facts: Facts) -> Stop | None:
    if facts.model_error is not None:
        return Stop(StopReason.MODEL_ERROR, facts.model_error, rule="model_error")
    unfinished = facts.unfinished
    if facts.answered and unfinished is not None and not unfinished.left:
        what = {
            "empty": "was empty",
            "cut": "was cut at the output token limit",
            "refused": "was withheld by the provider",
        }[unfinished.kind]
        detail = f"the model's reply {what} {unfinished.times} times in a row"
        return Stop(
            StopReason.MODEL_ERROR, detail, unfinished.text or None, rule="max_continuations"
        )
    return None


def _needs_user(facts: Facts) -> Stop | None:
    if facts.needs_user is None:
        return None
    return Stop(StopReason.NEEDS_USER, facts.needs_user, rule="needs_user")


_RULES: dict[StopReason, Callable[[Facts], Stop | None]] = {
    StopReason.STOPPED: _stopped,
    StopReason.COMPLETED: _completed,
    StopReason.HANDED_OFF: _handed_off,
    StopReason.TOOL_ERROR: _tool_error,
    StopReason.STALLED: _stalled,
    StopReason.MAX_CYCLES: _max_cycles,
    StopReason.BUDGET_EXHAUSTED: _budget_exhausted,
    StopReason.MODEL_ERROR: _model_error,
    StopReason.NEEDS_USER: _needs_user,
}
"""When each stop reason holds, and its detail."""


def _stall_note(stall: Stall) -> str:
    match stall.kind:
        case "mistakes":
            return (
                f"Note: {stall.times} steps in a row were {stall.what}. Use only the tools "
                "listed, with arguments that match their schema, or answer with what you have."
            )
        case "repeated_mistake":
            return (
                f"Note: you have made {stall.what} {stall.times} times, and the run cannot "
                "make it (no such tool, arguments that do not parse or validate, or past a "
                "tool-call cap). Use only the tools listed, with arguments that match their "
                "schema, or answer with what you have."
            )
        case "rejected":
            return (
                f"Your answer has been rejected {stall.times} times in a row. Change your "
                "approach; another rejected answer ends the run."
            )
    ran = "Not run: you" if stall.positions else "Note: you"
    if stall.write:
        return (
            f"{ran} have requested {stall.what} {stall.times} times with the same "
            "arguments while nothing else changed, and each call does it again (a second "
            "payment, a second booking). If you mean to do it once more, do it another way "
            "(other arguments, another tool); otherwise answer with what you have."
        )
    waiting = (
        ""
        if stall.wait is None
        else f" If you are waiting for it to change, wait at least {stall.wait:g} seconds "
        "before you call it again (for instance with a sleep or wait tool): a call made that "
        "long after the last one is a fresh look."
    )
    return (
        f"{ran} have requested {stall.what} {stall.times} times, and it returned "
        "the same result each time while nothing changed. Repeating it will not help: "
        f"change your approach, or answer with what you have.{waiting}"
    )


def _tool_error_note(failure: ToolFailure) -> str:
    if failure.kind == "repeated" and failure.call:
        return (
            f"Note: tool calls have failed in {failure.streak} steps in a row, and "
            f"{failure.call} failed {failure.times} times (last error: {failure.error}). "
            "Retrying it the same way will not help: change your approach (other arguments "
            "or another tool), or answer with what you have."
        )
    return (
        f"Note: tool calls have failed in {failure.streak} steps in a row "
        f"(last error: {failure.error}). Retrying like this will not help: change your "
        "approach (other arguments or another tool), or answer with what you have."
    )
