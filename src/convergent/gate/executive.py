"""The executive function: ask the user before acting on an uncertain or ambiguous step.

`ExecutiveGate` is an optional `convergent.agent.ActionGate`. After the model proposes
tool calls it makes a second, focused model request that scores the clarity of the
thought and the certainty of the action (structured output, 0.0-1.0). At or above the
threshold the calls run; below it they are discarded and ``ask_user`` runs instead,
with a question derived from the uncertain thought. After tools run, objective triggers
ask without any score: a tool result that declares an ambiguity, or a tool whose
arguments failed validation repeatedly.

The score only decides *whether to ask before acting*. It never decides that a run is
finished: the gate always returns calls to execute, so a response with tool calls is
never turned into ``completed``. Every decision is a `GateDecided` event and every
question's end a `UserAnswered` event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from convergent._json import UnusableJson, load_json
from convergent.clock import current_clock
from convergent.events import Event
from convergent.exceptions import ModelError, UserError
from convergent.gate.ask import AskUser
from convergent.gate.events import GateDecided, GateTrigger, UserAnswered
from convergent.messages import (
    AssistantMessage,
    CallOutcome,
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
from convergent.tools import Tool

__all__ = [
    "AmbiguityDetector",
    "DEFAULT_THRESHOLD",
    "ExecutiveGate",
    "SCORE_SCHEMA",
    "Score",
    "ambiguous",
    "declared_ambiguity",
    "parse_score",
    "question_from_thought",
    "scoring_messages",
]

DEFAULT_THRESHOLD = 0.85
"""Score at or above which a proposed action runs without asking (seed 003)."""

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "clarity": {"type": "number", "minimum": 0, "maximum": 1},
        "certainty": {"type": "number", "minimum": 0, "maximum": 1},
        "question": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["clarity", "certainty", "question", "reason"],
    "additionalProperties": False,
}
"""JSON schema of the scorer's reply."""

_SCORER_PROMPT = """You review one step of an AI agent before it acts. Judge only from \
the conversation shown. Reply with JSON only:
{"clarity": <0.0-1.0>, "certainty": <0.0-1.0>, "question": "<one question>", \
"reason": "<one sentence>"}
- clarity: how clear and well-grounded the agent's thought is (1.0: fully grounded in \
what the user said and what tools returned; low: it guesses, assumes or contradicts).
- certainty: how certain it is that the proposed action, with these exact arguments, is \
what the user wants (low when several targets could match, a person, file or value is \
not defined, or the request is ambiguous).
- question: the one question to the user that would remove the uncertainty.
- reason: why."""

_CLIP = 600

ScorerErrorPolicy = Literal["ask", "execute"]
AmbiguityDetector = Callable[[ToolCallRecord], "str | None"]
"""Reads one tool result; returns the question to ask when it declares an ambiguity."""


class Score(BaseModel):
    """The scorer's verdict on one proposed step."""

    clarity: float = Field(ge=0.0, le=1.0)
    """Clarity of the thought."""
    certainty: float = Field(ge=0.0, le=1.0)
    """Certainty that the action is the right one."""
    question: str = ""
    """The question that would remove the uncertainty."""
    reason: str = ""
    """The scorer's rationale."""

    @property
    def value(self) -> float:
        """The gated score: the weaker of clarity and certainty."""
        return min(self.clarity, self.certainty)


def parse_score(content: str) -> Score:
    """Read the scorer's JSON reply (tolerating a code fence or text around it).

    A single ``score`` or ``confidence`` field is accepted for both ratings.

    Raises:
        ValueError: If no valid verdict can be read.
    """
    start, end = content.find("{"), content.rfind("}")
    if start < 0 or end < start:
        raise ValueError("the scorer's reply holds no JSON object")
    try:
        data = load_json(content[start : end + 1])
    except UnusableJson as exc:
        raise ValueError(f"the scorer's reply is {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("the scorer's reply is not a JSON object")
    single = data.get("score", data.get("confidence"))
    if single is not None:
        data.setdefault("clarity", single)
        data.setdefault("certainty", single)
    try:
        return Score.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
        raise ValueError(f"invalid scorer reply: {problems}") from None


def _clip(text: str, limit: int = _CLIP) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe_call(call: ToolCall) -> str:
    return f"{call.name}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})"


def _describe_message(message: Message) -> str:
    if isinstance(message, AssistantMessage):
        calls = ", ".join(_describe_call(c) for c in message.tool_calls)
        text = _clip(message.content)
        return f"agent: {text}" + (f" [called {calls}]" if calls else "")
    if isinstance(message, ToolResultMessage):
        status = "error" if message.is_error else "result"
        return f"{message.name} {status}: {_clip(message.content)}"
    if isinstance(message, UserMessage):
        return f"user: {_clip(message.content)}"
    return f"system: {_clip(message.content)}"


def scoring_messages(
    response: ModelResponse, state: RunState, *, context_messages: int = 6
) -> list[Message]:
    """The focused request sent to the scorer: task, recent context, thought and action."""
    history = [m for m in state.messages if not isinstance(m, SystemMessage)]
    # The last message is the proposal under review; it is shown separately below.
    recent = history[:-1][-context_messages:] if context_messages > 0 else []
    lines = [f"Task: {_clip(state.task, 2000)}", ""]
    if recent:
        lines += ["Recent conversation:", *(f"- {_describe_message(m)}" for m in recent), ""]
    lines += [
        f"Agent's thought: {_clip(response.content) or '(none)'}",
        "Proposed action(s):",
        *(f"- {_describe_call(c)}" for c in response.tool_calls),
    ]
    return [SystemMessage(content=_SCORER_PROMPT), UserMessage(content="\n".join(lines))]


def question_from_thought(thought: str, calls: Sequence[ToolCall]) -> str:
    """A question built from the uncertain thought, when the scorer gave none."""
    actions = "; ".join(_describe_call(c) for c in calls)
    reasoning = _clip(thought, 300)
    prefix = f"I am not sure how to proceed. My reasoning: {reasoning} " if reasoning else ""
    return f"{prefix}I was about to run {actions}. Is that right, or what should I do instead?"


def ambiguous(
    candidates: Iterable[str], *, question: str | None = None, detail: str | None = None
) -> str:
    """The result a tool returns to declare an ambiguity (several matching targets).

    Example:
        >>> @tool
        ... def click(label: str) -> str:
        ...     matches = find_buttons(label)
        ...     if len(matches) > 1:
        ...         return ambiguous(matches, question="Which Submit button?")

    Args:
        candidates: The targets that match.
        question: The question to put to the user (default: built from the candidates).
        detail: What was ambiguous, for the model.
    """
    data: dict[str, Any] = {"ambiguous": True, "candidates": list(candidates)}
    if question:
        data["question"] = question
    if detail:
        data["detail"] = detail
    return json.dumps(data, ensure_ascii=False)


def declared_ambiguity(record: ToolCallRecord) -> str | None:
    """The default `AmbiguityDetector`: a JSON result with ``"ambiguous": true``.

    Tools declare it by returning `ambiguous`. Returns the question to ask, or None.
    """
    if not record.ok or not record.result.lstrip().startswith("{"):
        return None
    try:
        data = load_json(record.result)
    except UnusableJson:
        return None
    if not isinstance(data, dict) or data.get("ambiguous") is not True:
        return None
    question = data.get("question")
    if isinstance(question, str) and question.strip():
        return question.strip()
    candidates = data.get("candidates")
    if isinstance(candidates, list) and candidates:
        options = [str(c) for c in candidates]
        listed = ", ".join(options[:-1]) + f" or {options[-1]}" if len(options) > 1 else options[0]
        return f"{record.name} found several matches. Which one did you mean: {listed}?"
    detail = data.get("detail") or record.result
    return f"{record.name} reported an ambiguity: {_clip(str(detail), 300)} How should I proceed?"


@dataclass(frozen=True, slots=True)
class _Review:
    score: Score | None
    error: str
    usage: Usage


class ExecutiveGate:
    """Scores each proposed step and asks the user instead of acting when it is uncertain.

    Example:
        >>> asker = AskUser(TerminalChannel())
        >>> gate = ExecutiveGate(scorer=model, asker=asker)
        >>> agent = Agent(model, tools, gate=gate)  # the agent also offers ask_user

    Args:
        scorer: Model used for the scoring request (may be the agent's own model).
        asker: The ``ask_user`` tool and its channel.
        threshold: At or above this score the action runs; below it the user is asked.
        exempt: Tool names whose calls run without a score (read-only look-ups).
        max_invalid: Ask after a tool's arguments failed validation this many times in a
            row (since the last question).
        detect_ambiguity: Reads each successful tool result for a declared ambiguity.
        on_scorer_error: When the scorer fails or replies unusably: ``ask`` (the safe
            default: an unreviewed action is not run) or ``execute``.
        context_messages: Recent messages shown to the scorer.

    Raises:
        UserError: For a threshold outside 0.0-1.0 or other invalid options.
    """

    def __init__(
        self,
        scorer: Model,
        asker: AskUser,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        exempt: Iterable[str] = (),
        max_invalid: int = 2,
        detect_ambiguity: AmbiguityDetector = declared_ambiguity,
        on_scorer_error: ScorerErrorPolicy = "ask",
        context_messages: int = 6,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise UserError(f"the gate threshold must be between 0 and 1, got {threshold}")
        if max_invalid < 1:
            raise UserError(f"max_invalid must be >= 1, got {max_invalid}")
        if on_scorer_error not in ("ask", "execute"):
            raise UserError(f"on_scorer_error must be 'ask' or 'execute', got {on_scorer_error!r}")
        self.scorer = scorer
        self.asker = asker
        self.threshold = threshold
        self.exempt = frozenset(exempt)
        self.max_invalid = max_invalid
        self.detect_ambiguity = detect_ambiguity
        self.on_scorer_error: ScorerErrorPolicy = on_scorer_error
        self.context_messages = context_messages
        self.settings = ModelSettings(
            json_schema=SCORE_SCHEMA,
            json_schema_name="action_review",
            temperature=0.0,
            max_tokens=400,
        )

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Tools the agent must offer: the ``ask_user`` tool."""
        return (self.asker.tool,)

    @property
    def ask_name(self) -> str:
        """Name of the ``ask_user`` tool."""
        return self.asker.tool.name

    async def review(
        self, response: ModelResponse, state: RunState, emit: Callable[[Event], None]
    ) -> tuple[ToolCall, ...]:
        """Score the proposed calls; return them, or an ``ask_user`` call in their place."""
        started = current_clock().monotonic()
        calls = response.tool_calls
        own = [c for c in calls if c.name == self.ask_name]
        if all(c.name == self.ask_name or c.name in self.exempt for c in calls):
            trigger: GateTrigger = "model_asked" if own else "exempt"
            emit(self._decided(state, "executed", trigger, calls, started))
            return calls
        review = await self._score(response, state)
        state.usage = state.usage + review.usage
        score = review.score
        if score is not None and score.value >= self.threshold:
            emit(self._decided(state, "executed", "score", calls, started, review))
            return calls
        if score is None and self.on_scorer_error == "execute":
            emit(self._decided(state, "executed", "scorer_error", calls, started, review))
            return calls
        if own:
            ask = own[0]
        else:
            question = (score.question.strip() if score else "") or question_from_thought(
                response.content, calls
            )
            ask = self._ask_call(state, question)
        trigger = "score" if score is not None else "scorer_error"
        emit(self._decided(state, "asked", trigger, calls, started, review, ask))
        return (ask,)

    async def after_tools(
        self,
        records: Sequence[ToolCallRecord],
        state: RunState,
        emit: Callable[[Event], None],
    ) -> ToolCall | None:
        """Record answers; return an ``ask_user`` call when a result calls for one.

        Objective triggers, no score: a result that declares an ambiguity, or a tool
        whose arguments failed validation ``max_invalid`` times in a row.
        """
        started = current_clock().monotonic()
        questions: list[str] = []
        causes: list[ToolCall] = []
        triggers: list[GateTrigger] = []
        asked_about: set[str] = set()
        for record in records:
            if record.name == self.ask_name:
                self._report_answer(record, state, emit)
                continue
            question = self.detect_ambiguity(record) if record.ok else None
            trigger: GateTrigger = "ambiguity"
            if (
                question is None
                and record.outcome == CallOutcome.INVALID
                and record.name not in asked_about
            ):
                streak = _invalid_streak(state.tool_calls, record.name, self.ask_name)
                if streak >= self.max_invalid:
                    asked_about.add(record.name)
                    trigger = "invalid_arguments"
                    question = (
                        f"I tried to call {record.name} {streak} times but its arguments were "
                        f"rejected; the last error was: {_clip(record.result, 300)} "
                        "What should I use?"
                    )
            if question is not None:
                questions.append(question)
                causes.append(ToolCall(id=record.id, name=record.name, arguments=record.arguments))
                triggers.append(trigger)
        if not questions:
            return None
        text = (
            questions[0]
            if len(questions) == 1
            else "\n".join(f"{n}. {q}" for n, q in enumerate(questions, 1))
        )
        ask = self._ask_call(state, text)
        reason = "; ".join(f"{c.name}: {t}" for c, t in zip(causes, triggers, strict=True))
        emit(
            self._decided(
                state, "asked", triggers[0], tuple(causes), started, ask=ask, reason=reason
            )
        )
        return ask

    async def _score(self, response: ModelResponse, state: RunState) -> _Review:
        messages = scoring_messages(response, state, context_messages=self.context_messages)
        try:
            reply = await self.scorer.request(messages, (), self.settings)
        except ModelError as exc:
            return _Review(None, f"scorer failed: {exc}", Usage())
        try:
            return _Review(parse_score(reply.content), "", reply.usage)
        except ValueError as exc:
            return _Review(None, str(exc), reply.usage)

    def _ask_call(self, state: RunState, question: str) -> ToolCall:
        call_id = f"gate_{state.cycles}_{len(state.messages)}"
        return ToolCall(id=call_id, name=self.ask_name, arguments={"question": question})

    def _decided(
        self,
        state: RunState,
        decision: Literal["executed", "asked"],
        trigger: GateTrigger,
        proposed: tuple[ToolCall, ...],
        started: float,
        review: _Review | None = None,
        ask: ToolCall | None = None,
        reason: str = "",
    ) -> GateDecided:
        score = review.score if review else None
        return GateDecided(
            run_id=state.run_id,
            cycle=state.cycles,
            decision=decision,
            trigger=trigger,
            score=score.value if score else None,
            clarity=score.clarity if score else None,
            certainty=score.certainty if score else None,
            threshold=self.threshold,
            proposed=proposed,
            question=str(ask.arguments.get("question", "")) if ask else "",
            ask_call_id=ask.id if ask else None,
            reason=reason or (score.reason if score else (review.error if review else "")),
            usage=review.usage if review else Usage(),
            duration=current_clock().monotonic() - started,
        )

    def _report_answer(
        self, record: ToolCallRecord, state: RunState, emit: Callable[[Event], None]
    ) -> None:
        if record.outcome == CallOutcome.INVALID:
            return
        question = str(record.arguments.get("question", ""))
        exchange = self.asker.find_exchange(question)
        if exchange is None:
            return
        emit(
            UserAnswered(
                run_id=state.run_id,
                cycle=state.cycles,
                call_id=record.id,
                question=exchange.question,
                answer=exchange.answer,
                status=exchange.status,
                channel=exchange.channel,
                waited=exchange.waited,
            )
        )


def _invalid_streak(records: Sequence[ToolCallRecord], name: str, ask_name: str) -> int:
    """Trailing run of invalid calls of ``name`` since the user was last asked."""
    streak = 0
    for record in reversed(records):
        if record.name == ask_name:
            break
        if record.name != name:
            continue
        if record.outcome != CallOutcome.INVALID:
            break
        streak += 1
    return streak
