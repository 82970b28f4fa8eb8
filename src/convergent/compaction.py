"""Context compression: keep a long run's conversation inside the model's window.

`ContextCompressor` is a `ContextPolicy`. Before every model request it counts the
tokens the request would send. When they reach ``threshold`` (92 % by default) of
the window it compacts the conversation:

1. The system prompt and the task (the leading system messages and the first user
   message) are kept as they are.
2. The rest is cut into turns: an assistant message together with the results of
   its tool calls, or a single user message. A turn is never split, so no tool result
   ever loses the call it answers.
3. The most recent turns, up to ``keep_recent`` of the window, are kept verbatim.
4. The older turns are summarised by one model request (the run's model unless
   ``summary_model`` is given); the summary replaces them as a user message.
5. If summarising fails (model error, empty reply, no saving), the oldest complete
   turns are dropped instead until the conversation fits ``fallback_target`` of the
   window. As a last resort, the longest kept tool results are truncated.

Token counts come from the provider: the previous request's reported input and
output tokens, plus an estimate for what was added since. Without reported usage
(or after the history was rewritten), every message is estimated. The estimate is
``ceil(characters / 4) + 4`` per message (tool-call names and JSON arguments count
as characters); pass ``counter`` to use a real tokenizer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from convergent.events import Event
from convergent.exceptions import ModelBehaviorError, ModelError
from convergent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from convergent.models.base import Model, ModelSettings
from convergent.state import RunState

__all__ = [
    "SUMMARY_HEADER",
    "ContextCompacted",
    "ContextCompressor",
    "TokenCounter",
    "estimate_tokens",
]

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text."""

SUMMARY_HEADER = "[Summary of the earlier part of this conversation]"
"""First line of the user message that replaces summarised turns."""

_SUMMARY_INSTRUCTIONS = (
    "You compress the history of an agent's work so that it can continue the task. "
    "Write a concise summary of the transcript: what was tried, which tool calls were "
    "made and what they returned (keep exact values, names, paths and numbers the agent "
    "may need), what is done and what is still open. Reply with the summary only."
)
_PER_MESSAGE = 4


def estimate_tokens(text: str) -> int:
    """About four characters per token: the documented fallback estimate."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextCompacted(Event):
    """The conversation was compacted to stay inside the context window."""

    type: ClassVar[str] = "context_compacted"
    rewrites_history: ClassVar[bool] = True
    method: str
    """``summary`` (older turns summarised) or ``drop`` (oldest turns removed)."""
    tokens_before: int
    """Tokens the next request would have sent."""
    tokens_after: int
    """Estimated tokens after compaction."""
    messages_before: int
    """Messages before."""
    messages_after: int
    """Messages after."""
    window: int
    """The model's context window in tokens."""
    counted_from: str
    """``usage`` (provider-reported plus an estimate of what was added) or ``estimate``."""
    error: str = ""
    """Why summarising failed, when ``method`` is ``drop``."""


@dataclass(frozen=True, slots=True)
class _Seen:
    input_tokens: int
    output_tokens: int
    count: int
    last: Message


class ContextCompressor:
    """Compacts a run's conversation when it nears the model's context window.

    Args:
        context_window: Window in tokens; default: the model's ``context_window``.
            Without either, nothing is compacted.
        threshold: Fraction of the window at which to compact (0.92).
        keep_recent: Fraction of the window kept verbatim as the most recent turns
            (at least the last turn is always kept).
        fallback_target: Fraction of the window to shrink to when dropping turns.
        summary_model: Model that writes summaries; default: the run's model.
        summary_max_tokens: Upper bound on the summary's length.
        counter: Tokenizer for estimates; default `estimate_tokens`.
        max_chars_per_message: Each message is clipped to this in the transcript that
            is summarised.

    Raises:
        ValueError: If a fraction is outside (0, 1].
    """

    def __init__(
        self,
        *,
        context_window: int | None = None,
        threshold: float = 0.92,
        keep_recent: float = 0.25,
        fallback_target: float = 0.6,
        summary_model: Model | None = None,
        summary_max_tokens: int = 1024,
        counter: TokenCounter | None = None,
        max_chars_per_message: int = 2_000,
    ) -> None:
        for name, value in (
            ("threshold", threshold),
            ("keep_recent", keep_recent),
            ("fallback_target", fallback_target),
        ):
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        self.context_window = context_window
        self.threshold = threshold
        self.keep_recent = keep_recent
        self.fallback_target = fallback_target
        self.summary_model = summary_model
        self.summary_max_tokens = summary_max_tokens
        self.counter: TokenCounter = counter or estimate_tokens
        self.max_chars_per_message = max_chars_per_message
        self._seen: dict[str, _Seen] = {}

    def message_tokens(self, message: Message) -> int:
        """Estimated tokens of one message, overhead included."""
        text = message.content
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                text += call.name + json.dumps(call.arguments, ensure_ascii=False, default=str)
        return self.counter(text) + _PER_MESSAGE

    def estimate(self, messages: Sequence[Message]) -> int:
        """Estimated tokens of a whole conversation."""
        return sum(self.message_tokens(m) for m in messages)

    def count(self, state: RunState) -> tuple[int, str]:
        """Tokens the next request would send, and where the figure came from."""
        messages, usage = state.messages, state.usage
        seen = self._seen.get(state.run_id)
        if (
            seen is not None
            and usage.input_tokens > seen.input_tokens
            and len(messages) > seen.count
            and messages[seen.count - 1] is seen.last
        ):
            reported = (usage.input_tokens - seen.input_tokens) + (
                usage.output_tokens - seen.output_tokens
            )
            return reported + self.estimate(messages[seen.count + 1 :]), "usage"
        return self.estimate(messages), "estimate"

    def _remember(self, state: RunState) -> None:
        if state.messages:
            self._seen[state.run_id] = _Seen(
                state.usage.input_tokens,
                state.usage.output_tokens,
                len(state.messages),
                state.messages[-1],
            )

    async def maybe_compact(
        self, state: RunState, model: Model, emit: Callable[[Event], None]
    ) -> None:
        """Compact ``state.messages`` in place if the next request reaches the threshold."""
        window = self.context_window or model.context_window
        if not window:
            return
        tokens, counted_from = self.count(state)
        if tokens < self.threshold * window:
            self._remember(state)
            return
        before = len(state.messages)
        head, turns = _split(state.messages)
        kept = self._recent(turns, window)
        older = [m for turn in turns[: len(turns) - len(kept)] for m in turn]
        method, error = "summary", ""
        replacement: list[Message] = []
        if older:
            try:
                summary = await self._summarise(older, state, model, window)
                replacement = [UserMessage(content=f"{SUMMARY_HEADER}\n{summary}")]
                if self.estimate(replacement) >= self.estimate(older):
                    raise ModelBehaviorError("the summary is not shorter than what it replaces")
            except (ModelError, ModelBehaviorError) as exc:
                method, error = "drop", str(exc) or type(exc).__name__
                kept = self._fit(head, turns, window)
                dropped = sum(len(t) for t in turns) - sum(len(t) for t in kept)
                replacement = [
                    UserMessage(
                        content=f"[{dropped} earlier messages were removed to fit the context "
                        "window]"
                    )
                ]
        else:
            method = "drop"
        messages = [*head, *replacement, *(m for turn in kept for m in turn)]
        messages = self._truncate_results(messages, window)
        state.messages[:] = messages
        emit(
            ContextCompacted(
                run_id=state.run_id,
                cycle=state.cycles,
                method=method,
                tokens_before=tokens,
                tokens_after=self.estimate(messages),
                messages_before=before,
                messages_after=len(messages),
                window=window,
                counted_from=counted_from,
                error=error,
            )
        )
        self._remember(state)

    def _recent(self, turns: list[list[Message]], window: int) -> list[list[Message]]:
        budget = self.keep_recent * window
        kept: list[list[Message]] = []
        used = 0
        for turn in reversed(turns):
            size = self.estimate(turn)
            if kept and used + size > budget:
                break
            kept.append(turn)
            used += size
        return kept[::-1]

    def _fit(
        self, head: list[Message], turns: list[list[Message]], window: int
    ) -> list[list[Message]]:
        """Drop the oldest turns (never the last) until the rest fits the fallback target."""
        target = self.fallback_target * window
        sizes = [self.estimate(turn) for turn in turns]
        total = self.estimate(head) + sum(sizes) + 16
        start = 0
        while start < len(turns) - 1 and total > target:
            total -= sizes[start]
            start += 1
        return turns[start:]

    async def _summarise(
        self, older: list[Message], state: RunState, model: Model, window: int
    ) -> str:
        summariser = self.summary_model or model
        budget_chars = int(window * 0.6) * 4
        transcript = _transcript(older, self.max_chars_per_message)
        if len(transcript) > budget_chars:
            transcript = "[... earliest part omitted]\n" + transcript[-budget_chars:]
        response = await summariser.request(
            [
                SystemMessage(content=_SUMMARY_INSTRUCTIONS),
                UserMessage(content=f"Task: {state.task}\n\nTranscript:\n{transcript}"),
            ],
            (),
            ModelSettings(max_tokens=self.summary_max_tokens),
        )
        state.usage = state.usage + response.usage
        text = response.content.strip()
        if not text:
            raise ModelBehaviorError("the summary was empty")
        return text

    def _truncate_results(self, messages: list[Message], window: int) -> list[Message]:
        """Shorten the longest tool results until the conversation fits under the threshold."""
        limit = self.threshold * window
        total = self.estimate(messages)
        if total < limit:
            return messages
        order = sorted(
            (i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)),
            key=lambda i: -len(messages[i].content),
        )
        result = list(messages)
        for index in order:
            if total < limit:
                break
            message = result[index]
            assert isinstance(message, ToolResultMessage)
            excess_chars = int((total - limit) * 4) + 200
            keep = max(200, len(message.content) - excess_chars)
            if keep >= len(message.content):
                continue
            cut = len(message.content) - keep
            shorter = ToolResultMessage(
                tool_call_id=message.tool_call_id,
                name=message.name,
                content=f"{message.content[:keep]}\n[... {cut} characters truncated to fit "
                "the context window]",
                is_error=message.is_error,
            )
            total += self.message_tokens(shorter) - self.message_tokens(message)
            result[index] = shorter
        return result


def _split(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """(system prompt + task, turns): a turn is an assistant message and its results."""
    index = 0
    while index < len(messages) and isinstance(messages[index], SystemMessage):
        index += 1
    if index < len(messages) and isinstance(messages[index], UserMessage):
        index += 1
    head = list(messages[:index])
    turns: list[list[Message]] = []
    for message in messages[index:]:
        if isinstance(message, ToolResultMessage) and turns:
            turns[-1].append(message)
        else:
            turns.append([message])
    return head, turns


def _transcript(messages: Sequence[Message], max_chars: int) -> str:
    def clip(text: str) -> str:
        return text if len(text) <= max_chars else text[:max_chars] + " [...]"

    lines: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls = "; ".join(
                f"{c.name}({json.dumps(c.arguments, ensure_ascii=False, default=str)})"
                for c in message.tool_calls
            )
            text = message.content + (f"\ncalls: {calls}" if calls else "")
            lines.append(f"[assistant] {clip(text)}")
        elif isinstance(message, ToolResultMessage):
            status = "error" if message.is_error else "result"
            lines.append(f"[{message.name} {status}] {clip(message.content)}")
        else:
            lines.append(f"[{message.role}] {clip(message.content)}")
    return "\n".join(lines)
