"""Convergent's stop decisions as LangChain v1 ``create_agent`` middleware.

`ConvergenceMiddleware` drives a `CycleDriver` from two of the agent's hooks, in the
loop's order. ``wrap_model_call`` is the cycle: it judges the tool batch that just ran
(a hand-off, a tool-error nudge or stop), adds the budget note, checks the limits,
makes the request, then checks an answer (the output type, then the verifier; the
feedback goes back to the model within the same call) or reviews the tool calls before
they run (a stalled call gets the nudge as its result instead of running). A typed
answer (``response_format``) is judged once LangChain has validated it; one it rejects
is LangChain's to ask again for. After a stop it makes the one final
request without tools (capped to what the token and cost budgets leave) and ends the
run as LangChain's own limit middleware does (``jump_to`` the end); the agent's
result carries a `StopReport` under ``"stop_report"``. ``wrap_tool_call`` turns a
tool's exception into an error result for the model, as convergent's loop does.

Every other hook would add a node to the agent's graph, and a node costs more than
everything the adapter does (see ``benchmarks/bench_adapters.py``), so there are none.

Install with ``pip install convergent[langchain]``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, Unpack

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import (
    ExtendedModelResponse,
    ModelResponse,
    OmitFromInput,
    PrivateStateAttr,
)
from langchain.agents.structured_output import StructuredOutputError, ToolStrategy
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from convergent.adapters._langchain_common import (
    awrap_tool_call,
    finish_reason_of,
    last_text,
    outcome_of,
    to_tool_call,
    tool_effects,
    tool_name,
    usage_of,
    usage_of_any,
    wrap_tool_call,
)
from convergent.adapters._policy import settled, told
from convergent.effects import Declared
from convergent.extensions import Verification
from convergent.limits import Limits
from convergent.loop.driver import CycleDriver, PolicyOptions
from convergent.loop.ending import StopReport
from convergent.messages import ToolCall
from convergent.models._prices import PriceLike, priced_for_limit
from convergent.stop import Decision, Nudge, Stop, StopReason

__all__ = ["ConvergenceMiddleware", "ConvergenceState"]


class _RunBook:
    """One run's driver and the tool calls it let run, between model calls."""

    __slots__ = ("batch", "driver", "offered", "reviewed")

    def __init__(self, driver: CycleDriver) -> None:
        self.driver = driver
        self.batch: list[ToolCall] = []
        """The calls of the last response that ran (their results come next)."""
        self.reviewed = False
        """A batch was reviewed and its step has not ended (even one whose calls were
        all held back: a cap's stop is decided when the step ends)."""
        self.offered: tuple[str, ...] | None = None
        """The names of the tools the driver was last told of."""

    def offer(self, tools: Sequence[Any], declared: Mapping[str, Declared] | None) -> None:
        """Tell the driver the agent's tools when they change, each with its effect.

        A tool's effect is the caller's (``tools``), else what the MCP annotations in
        its ``metadata`` declare (`annotated_tool_effect`), else undeclared.
        """
        names = tuple(tool_name(tool) for tool in tools)
        if names == self.offered:
            return
        self.offered = names
        given = declared or {}
        self.driver.offers(
            {name: given.get(name, effect) for name, effect in tool_effects(tools).items()}
        )


class ConvergenceState(AgentState[Any]):
    """The agent state `ConvergenceMiddleware` adds."""

    stop_report: NotRequired[Annotated[StopReport, OmitFromInput]]
    """How the run ended, once it has (in the agent's result)."""
    convergence_run: NotRequired[Annotated[_RunBook, UntrackedValue, PrivateStateAttr]]
    """The run's driver (never checkpointed: each invocation starts afresh)."""


@dataclass(frozen=True, slots=True)
class _Check:
    """The verifier's verdict on an answer is needed (asked for by `_cycle`)."""

    driver: CycleDriver
    text: str


_Cycle = Generator[ModelRequest[Any] | _Check | ExtendedModelResponse[Any], Any, None]
"""One model call's work, written once for both paths: it yields the requests to make
and the verdicts it needs (and is sent the responses and verdicts back, or a request's
exception thrown in), then its result."""


class ConvergenceMiddleware(AgentMiddleware[ConvergenceState, Any, Any]):
    """Stops a ``create_agent`` run for convergent's objective reasons.

    Example:
        ```python
        agent = create_agent(model, tools, middleware=[ConvergenceMiddleware(Limits(max_cycles=8))])
        result = agent.invoke({"messages": [HumanMessage("...")]})
        result["stop_report"].reason  # StopReason.COMPLETED, STALLED, ...
        ```

    Args:
        limits: Budgets and thresholds; ``max_cycles`` counts model requests.
        price: The model's price (`TokenPrice` or ``(input, output)`` in US dollars per
            million tokens): the host reports tokens, not cost, so each response is
            costed at it. Required with ``max_cost``.
        **options: The rest of the stop policy (`convergent.loop.driver.PolicyOptions`). A
            ``verifier`` must be synchronous under ``invoke`` (either kind under
            ``ainvoke``); the final answer's request gets ``max_tokens`` set to what a
            token or cost budget leaves.

    Raises:
        UserError: For ``max_cost`` without a ``price``.
    """

    state_schema = ConvergenceState

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        price: PriceLike | None = None,
        **options: Unpack[PolicyOptions],
    ) -> None:
        super().__init__()
        self.limits, self._options = settled(limits, options)
        self.price = priced_for_limit(price, self.limits.max_cost, "ConvergenceMiddleware")
        """The model's price, which responses are costed at."""

    # -- the model call -----------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """One cycle (or several, while the verifier sends the model back to work)."""
        cycle = self._cycle(request)
        asked = next(cycle)
        while not isinstance(asked, ExtendedModelResponse):
            try:
                if isinstance(asked, _Check):
                    answer: Any = asked.driver.verify(asked.text)
                else:
                    answer = handler(asked)
            except Exception as exc:  # the cycle decides what a failed request means
                asked = cycle.throw(exc)
            else:
                asked = cycle.send(answer)
        return asked

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """One cycle (or several, while the verifier sends the model back to work)."""
        cycle = self._cycle(request)
        asked = next(cycle)
        while not isinstance(asked, ExtendedModelResponse):
            try:
                if isinstance(asked, _Check):
                    answer: Any = await asked.driver.verify_async(asked.text)
                else:
                    answer = await handler(asked)
            except Exception as exc:  # the cycle decides what a failed request means
                asked = cycle.throw(exc)
            else:
                asked = cycle.send(answer)
        return asked

    # -- tools --------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the call; a tool's exception becomes an error result for the model."""
        return wrap_tool_call(request, handler)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run the call; a tool's exception becomes an error result for the model."""
        return await awrap_tool_call(request, handler)

    # -- the cycle ----------------------------------------------------------------------

    def _cycle(self, request: ModelRequest[Any]) -> _Cycle:
        """The batch that ran, the limits, the request, and what its response means."""
        book: _RunBook | None = request.state.get("convergence_run")  # type: ignore[assignment]
        update: dict[str, Any] = {}
        if book is None:
            book = _RunBook(CycleDriver(self.limits, price=self.price, **self._options))
            update["convergence_run"] = book
        driver = book.driver
        added = _record_batch(book, request.messages)
        book.offer(request.tools, self._options.get("tools"))
        """Messages for the conversation, in order: notes, responses, skipped results."""
        while driver.stop is None and not isinstance(driver.before_request(), Stop):
            note = driver.budget_note()
            if note is not None:
                added.append(HumanMessage(note))
            driver.start_request()
            try:
                response: ModelResponse[Any] = yield (
                    request.override(messages=[*request.messages, *added]) if added else request
                )
            except StructuredOutputError as error:
                if not _sent_back_by_us(request, error):
                    raise
                _rejected(driver, error, added)
                continue
            ai = _ai_of(response.result)
            driver.responded(usage_of_any(ai))
            added.extend(response.result)  # type: ignore[arg-type]
            if ai is None:
                yield _respond(added, update, response)
                return
            answered = {m.tool_call_id for m in response.result if isinstance(m, ToolMessage)}
            calls = [to_tool_call(call) for call in ai.tool_calls if call["id"] not in answered]
            if calls:
                if _reviewed(book, calls, added):
                    break
                yield _respond(added, update, response)
                return
            decision = yield from _judged(driver, ai, answered, response, typed=_typed(request))
            hosts_turn = bool(answered) and response.structured_response is None
            if _tell(decision, added, hosts_turn=hosts_turn) and not hosts_turn:
                continue
            if not isinstance(decision, Stop):  # the host asks again, its own way
                yield _respond(added, update, response)
                return
            if decision.reason is not StopReason.COMPLETED:
                break
            update["stop_report"] = driver.report(driver.answer or _answer_text(ai, answered))
            yield _respond(added, update, response)
            return
        yield from _finish(driver, request, added, update)


def _reviewed(book: _RunBook, calls: list[ToolCall], added: list[AnyMessage]) -> bool:
    """Review a batch before it runs: skipped calls get their text; True if the run stopped."""
    driver = book.driver
    review = driver.review(calls)
    for position, text in review.skipped.items():
        call = calls[position]
        added.append(ToolMessage(text, tool_call_id=call.id, name=call.name, status="error"))
    book.batch = [c for n, c in enumerate(calls) if n not in review.skipped]
    book.reviewed = True
    return driver.stop is not None


def _judged(
    driver: CycleDriver,
    message: AIMessage,
    answered: set[str],
    response: ModelResponse[Any],
    *,
    typed: str | None,
) -> Generator[_Check, Any, Decision]:
    """An answer's decision: the host's verdict, the output type, then the verifier.

    The verifier's verdict is asked for with a `_Check`. ``typed`` says how a typed
    agent's answer must come (None: the agent is not typed).
    """
    if answered and response.structured_response is None:
        errors = "; ".join(m.text for m in response.result if isinstance(m, ToolMessage))
        return driver.judge_answer(None, output_errors=errors)
    text = _answer_text(message, answered)
    if not answered:
        unfinished = driver.unfinished(text, finish_reason_of(message))
        if unfinished is not None:  # empty, cut or refused: the model is asked to go on
            return unfinished
        text = driver.answer or text
        if typed is not None and response.structured_response is None:
            # a provider that ignored the forced call: an answer in words is not typed
            return driver.judge_answer(None, output_errors=typed)
    check = driver.check_output(text)
    if check is not None and check.errors is not None:
        return driver.judge_answer(None, output_errors=check.errors)
    verdict: Verification | None = (
        (yield _Check(driver, text)) if driver.verifier is not None else None
    )
    return driver.judge_answer(verdict)


def _typed(request: ModelRequest[Any]) -> str | None:
    """Why an answer in words is not a typed agent's answer; None for an agent without a type."""
    strategy = request.response_format
    if strategy is None:
        return None
    if isinstance(strategy, ToolStrategy):
        names = ", ".join(spec.name for spec in strategy.schema_specs)
        return f"it came as text, not as a call of the output tool ({names})"
    return "it came as text without the structured output"


def _tell(decision: Decision, added: list[AnyMessage], *, hosts_turn: bool) -> bool:
    """Add what the model is told of a reply that was not accepted; whether it was not.

    When the host asks again its own way (a typed answer it rejected, with its own
    why), only a note is added.
    """
    feedback = told(decision)
    if feedback is None:
        return False
    if not hosts_turn or isinstance(decision, Nudge):
        added.append(HumanMessage(feedback))
    return True


def _rejected(driver: CycleDriver, error: StructuredOutputError, added: list[AnyMessage]) -> None:
    """A provider's typed answer that did not validate: counted, and sent back with why."""
    driver.responded(usage_of(error.ai_message))
    added.append(error.ai_message)
    feedback = told(driver.judge_answer(None, output_errors=str(error)))
    if feedback is not None:
        added.append(HumanMessage(feedback))


def _sent_back_by_us(request: ModelRequest[Any], error: StructuredOutputError) -> bool:
    """Whether a typed answer that failed goes back to the model by convergent's hand.

    A `ToolStrategy` that raised was told to (``handle_errors``); a provider's own typed
    answer has no retry in LangChain, so convergent's loop gives it one.
    """
    return not isinstance(request.response_format, ToolStrategy)


def _answer_text(message: AIMessage, answered: set[str]) -> str:
    """An answer's text: a typed answer's JSON when it came as a structured-output call."""
    for call in message.tool_calls:
        if call["id"] in answered:
            return json.dumps(call["args"], ensure_ascii=False)
    return message.text


def _finish(
    driver: CycleDriver,
    request: ModelRequest[Any],
    added: list[AnyMessage],
    update: dict[str, Any],
) -> _Cycle:
    """After a stop: the final request without tools, if one is due, then the end."""
    stop = driver.stop
    assert stop is not None
    settings = request.model_settings
    # the model's own cap, as a chat model keeps it (ChatOpenAI, ChatAnthropic...)
    wanted = settings.get("max_tokens") or getattr(request.model, "max_tokens", None)
    final = driver.final_request(wanted_tokens=wanted if isinstance(wanted, int) else None)
    last = last_text([*request.messages, *added])
    answer = None
    if final is not None:
        if final.max_tokens is not None:
            settings = {**settings, "max_tokens": final.max_tokens}
        messages = [*request.messages, *added, HumanMessage(final.prompt)]
        try:
            response: ModelResponse[Any] = yield request.override(
                messages=messages, tools=[], response_format=None, model_settings=settings
            )
        except Exception:  # no answer is better than a crash: the run keeps its last text
            response = ModelResponse(result=[])
        ai = _ai_of(response.result)
        if ai is not None:
            driver.add_usage(usage_of(ai))
            answer = ai.text
            added.append(ai)
    if stop.output is not None:
        added.append(AIMessage(stop.output))
    update["stop_report"] = driver.report(last, answer)
    update["jump_to"] = "end"
    yield _respond(added, update)


def _record_batch(book: _RunBook, messages: list[AnyMessage]) -> list[AnyMessage]:
    """Observe the results of the calls that ran, in call order; then judge the step.

    Returns the messages it adds to the conversation: a tool-error nudge, if any.
    """
    if not book.reviewed:
        return []
    book.reviewed = False
    results: dict[str, ToolMessage] = {}
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results[message.tool_call_id] = message
    driver = book.driver
    for call in book.batch:
        result = results.get(call.id)
        if result is not None:
            outcome, fatal = outcome_of(result)
            driver.observe(call, outcome, result.text, fatal=fatal)
    book.batch = []
    decision = driver.end_step()
    return [HumanMessage(decision.note)] if isinstance(decision, Nudge) else []


def _respond(
    messages: list[AnyMessage],
    update: dict[str, Any],
    response: ModelResponse[Any] | None = None,
) -> ExtendedModelResponse[Any]:
    structured = response.structured_response if response is not None else None
    return ExtendedModelResponse(
        ModelResponse(result=list(messages), structured_response=structured),
        Command(update=update) if update else None,
    )


def _ai_of(messages: list[BaseMessage]) -> AIMessage | None:
    for message in messages:
        if isinstance(message, AIMessage):
            return message
    return None
