"""What a `convergent.loop.driver.CycleDriver` takes and gives, and the words the model reads.

The options of a run's stop decisions besides its budgets and rules (`PolicyOptions`),
what the driver makes of a batch of calls (`Review`), the request it asks for after a
stop (`FinalRequest`) and the report of how a host's run ended (`StopReport`); and the
wording every host gives the model after a tool's exception (`failure_result`) and after
a stop (`FINAL_ANSWER_PROMPT`), defined once for all of them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TypedDict

from convergent.effects import Declared
from convergent.exceptions import ToolError
from convergent.extensions import Verification, Verifier
from convergent.loop.budget import CHARS_PER_MESSAGE
from convergent.messages import NO_USAGE, AssistantMessage, Message, Usage
from convergent.output import OutputSpec
from convergent.policy import StopPolicy, ToolErrorPolicy
from convergent.stop import CONTINUE, Decision, LimitReached, StopReason

__all__ = [
    "ANSWER_AFTER_STOP",
    "FINAL_ANSWER_PROMPT",
    "MAX_CALLS_PER_RESPONSE",
    "RUN_ALL",
    "FinalRequest",
    "PolicyOptions",
    "Review",
    "StopReport",
    "cap_note",
    "failure_result",
    "message_chars",
    "verdict_feedback",
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

MAX_CALLS_PER_RESPONSE = 256
"""A response with more tool calls than this runs none of them: the run stops
``model_error`` (no task needs them in one step, and each costs bookkeeping)."""


def failure_result(tool: str, error: BaseException) -> tuple[str, bool]:
    """A tool's exception as the model reads it, and whether the tool declared it fatal.

    An exception whose text cannot be made (its ``__str__`` raises) is named by its type.
    """
    try:
        text = str(error)
    except Exception:  # the tool's own exception class is broken: name it
        text = f"<{type(error).__name__} whose message could not be read>"
    if isinstance(error, ToolError):
        return f"{tool} failed: {text}", error.fatal
    return f"{tool} raised {type(error).__name__}: {text}", False


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


@dataclass(frozen=True, slots=True)
class FinalRequest:
    """The one request without tools after a stop, for the best answer so far."""

    prompt: str
    """What the model is asked, appended to the conversation as a user message."""
    max_tokens: int | None
    """The output cap that keeps the answer within the token and cost budgets; None
    when no such budget is set (the host's own setting applies)."""
    seconds: float | None = None
    """The time the request may take within ``max_seconds``; None: no time budget."""


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
