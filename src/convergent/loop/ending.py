"""How a run ends: the request for an answer after a stop, and whether its reply is one.

After a stop in `ANSWER_AFTER_STOP` the run asks the model once more, without tools
(`FINAL_ANSWER_PROMPT`, sized by a `FinalRequest`); a host reports how its run ended in
a `StopReport`. Asked once more for its best answer after a stop, a small model often sends back
something else: the request itself, copied; one sentence over and over until the token
limit; or the tool-call protocol's JSON it saw earlier in the conversation. None of
these is an answer, and a run that returned one as its output would mislead whoever
reads it. `answer_problem` says what is wrong with such a text; `settle_output` picks
the run's output and says, in a few words, what became of the answer.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from convergent.messages import NO_USAGE, Usage
from convergent.stop import StopReason

__all__ = [
    "ANSWER_AFTER_STOP",
    "FINAL_ANSWER_PROMPT",
    "FinalRequest",
    "Settled",
    "StopReport",
    "answer_problem",
    "detail_with_note",
    "settle_output",
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


ECHO_SHARE = 0.6
"""Share of an answer's words that, copied from a prompt, make it an echo."""
REPEATED_SHARE = 0.5
"""Share of an answer's word triples that, seen before in it, make it repetition."""
MIN_TRIPLES = 12
"""Word triples an answer needs before it can count as repetition (a short answer
that says one thing twice is still an answer)."""
HEAD_CHARS = 65_536
"""Characters of an answer (and of each prompt) whose words are compared: the check
stays within milliseconds whatever the size (a model that repeats itself or echoes
the request does so from the start), where a 2 MB reply took a second."""

_PROTOCOL_JSON = re.compile(r'\{\s*"(?:thought|tool_calls|answer)"\s*:')
_WORD = re.compile(r"\w+")


class Settled(NamedTuple):
    """A run's output after a stop that asked for an answer."""

    output: str
    """The answer, or (when there was none worth giving) the model's last text."""
    after_stop: bool
    """``output`` is the answer asked for after the stop."""
    note: str
    """What became of that answer when it is not the output (empty when it is)."""


def answer_problem(text: str, prompts: Sequence[str] = ()) -> str | None:
    """What makes ``text`` no answer, in a few words; None when it is one.

    Args:
        text: What the model replied.
        prompts: Texts the run itself wrote to the model (the request for the answer):
            a reply made mostly of their words is an echo.
    """
    if not text.strip():
        return "it was empty"
    if _PROTOCOL_JSON.search(text):
        return "it was the tool-call protocol's JSON"
    words = _words(text[:HEAD_CHARS])
    if not words:
        return "it had no words"
    for prompt in prompts:
        if _copied_share(words, _triples(_words(prompt[:HEAD_CHARS]))) >= ECHO_SHARE:
            return "it repeated the request"
    if _repeated_share(words) >= REPEATED_SHARE:
        return "it repeated itself"
    return None


def settle_output(last_text: str, answer: str, prompts: Sequence[str] = ()) -> Settled:
    """The output of a run given ``answer`` to the request after its stop.

    A usable answer is the output. Otherwise the output is the model's last text, if
    that is usable itself, else nothing; the note says why the answer was left out.
    """
    problem = answer_problem(answer, prompts)
    if problem is None:
        return Settled(answer, True, "")
    fallback = last_text if answer_problem(last_text, prompts) is None else ""
    return Settled(fallback, False, f"the answer asked for after the stop was not used: {problem}")


def detail_with_note(detail: str, note: str) -> str:
    """A stop's detail followed by what became of the answer after it, if anything."""
    return f"{detail}; {note}" if note and detail else note or detail


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _triples(words: Sequence[str]) -> set[tuple[str, str, str]]:
    return {(a, b, c) for a, b, c in zip(words, words[1:], words[2:], strict=False)}


def _copied_share(words: Sequence[str], source: set[tuple[str, str, str]]) -> float:
    """Share of ``words`` that lie in a word triple also found in ``source``."""
    if len(words) < 3 or not source:
        return 0.0
    copied = [False] * len(words)
    for start in range(len(words) - 2):
        if (words[start], words[start + 1], words[start + 2]) in source:
            copied[start] = copied[start + 1] = copied[start + 2] = True
    return sum(copied) / len(words)


def _repeated_share(words: Sequence[str]) -> float:
    """Share of the word triples of ``words`` that already occurred earlier in them."""
    triples = list(zip(words, words[1:], words[2:], strict=False))
    if len(triples) < MIN_TRIPLES:
        return 0.0
    counts = Counter(triples)
    return sum(count - 1 for count in counts.values()) / len(triples)
