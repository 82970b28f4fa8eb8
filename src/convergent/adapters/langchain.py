"""Convergent's stop decisions as LangChain v1 ``create_agent`` middleware.

`ConvergenceMiddleware` drives a `CycleDriver` from two of the agent's hooks, in the
loop's order. ``wrap_model_call`` is the cycle: it judges the tool batch that just ran
(a hand-off, a tool-error nudge or stop), adds the budget note, checks the limits,
makes the request, then runs the verifier on an answer (its feedback goes back to the
model within the same call) or reviews the tool calls before they run (a stalled call
gets the nudge as its result instead of running). After a stop it makes the one final
request without tools (capped to what the token and cost budgets leave) and ends the
run as LangChain's own limit middleware does (``jump_to`` the end); the agent's
result carries a `StopReport` under ``"stop_report"``. ``wrap_tool_call`` turns a
tool's exception into an error result for the model, as convergent's loop does.

Every other hook would add a node to the agent's graph, and a node costs more than
everything the adapter does (see ``benchmarks/bench_adapters.py``), so there are none.

Install with ``pip install convergent[langchain]``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Generator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import (
    ExtendedModelResponse,
    ModelResponse,
    OmitFromInput,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from convergent.adapters._langchain_common import (
    awrap_tool_call,
    last_text,
    outcome_of,
    to_tool_calls,
    usage_of,
    usage_of_any,
    wrap_tool_call,
)
from convergent.driver import CycleDriver, StopReport
from convergent.extensions import Verification, Verifier
from convergent.messages import ToolCall
from convergent.stop import Interrupted, Limits, Nudge, Stop

__all__ = ["ConvergenceMiddleware", "ConvergenceState"]


class _RunBook:
    """One run's driver and the tool calls it let run, between model calls."""

    __slots__ = ("batch", "driver")

    def __init__(self, driver: CycleDriver) -> None:
        self.driver = driver
        self.batch: list[ToolCall] = []
        """The calls of the last response that ran (their results come next)."""


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


_Cycle = Generator[ModelRequest[Any] | _Check, Any, ExtendedModelResponse[Any]]
"""One model call's work, written once for both paths: it yields the requests to make
and the verdicts it needs, and is sent the responses and verdicts back."""


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
        tools: Tool names with their ``read_only`` flag, when known (see `CycleDriver`).
        terminal_tools: Tools whose successful call hands the run off.
        max_consecutive_tool_errors: Failing steps in a row that stop the run.
        on_tool_error: ``stop``: any tool failure ends the run.
        verifier: Checks an answer without tool calls (synchronous with ``invoke``,
            either kind with ``ainvoke``); its feedback goes back to the model.
        final_answer: After a stop for a limit, a stall or tool errors, ask the model
            once more, without tools, for its best answer (with ``max_tokens`` set to
            what a token or cost budget leaves).
    """

    state_schema = ConvergenceState

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
    ) -> None:
        super().__init__()
        self.limits = limits or Limits()
        self._driver_options: dict[str, Any] = {
            "tools": tools,
            "terminal_tools": frozenset(terminal_tools),
            "max_consecutive_tool_errors": max_consecutive_tool_errors,
            "on_tool_error": on_tool_error,
            "verifier": verifier,
            "final_answer": final_answer,
        }

    # -- the model call -----------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """One cycle (or several, while the verifier sends the model back to work)."""
        cycle = self._cycle(request)
        try:
            asked = next(cycle)
            while True:
                if isinstance(asked, _Check):
                    asked = cycle.send(asked.driver.verify(asked.text))
                    continue
                try:
                    response = handler(asked)
                except Exception as exc:  # the cycle decides what a failed request means
                    asked = cycle.throw(exc)
                else:
                    asked = cycle.send(response)
        except StopIteration as done:
            result: ExtendedModelResponse[Any] = done.value
            return result
        finally:
            cycle.close()

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """One cycle (or several, while the verifier sends the model back to work)."""
        cycle = self._cycle(request)
        try:
            asked = next(cycle)
            while True:
                if isinstance(asked, _Check):
                    asked = cycle.send(await asked.driver.verify_async(asked.text))
                    continue
                try:
                    response = await handler(asked)
                except Exception as exc:  # the cycle decides what a failed request means
                    asked = cycle.throw(exc)
                else:
                    asked = cycle.send(response)
        except StopIteration as done:
            result: ExtendedModelResponse[Any] = done.value
            return result
        finally:
            cycle.close()

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
            book = _RunBook(CycleDriver(self.limits, **self._driver_options))
            update["convergence_run"] = book
        driver = book.driver
        added: list[AnyMessage] = []
        """Messages for the conversation, in order: notes, responses, skipped results."""
        if book.batch:
            decision = _record_batch(book, request.messages)
            if isinstance(decision, Nudge):
                added.append(HumanMessage(decision.note))
        while driver.stop is None and not isinstance(driver.before_request(), Stop):
            note = driver.budget_note()
            if note is not None:
                added.append(HumanMessage(note))
            response: ModelResponse[Any] = yield (
                request.override(messages=[*request.messages, *added]) if added else request
            )
            ai = _ai_of(response.result)
            driver.requested(usage_of_any(ai))
            added.extend(response.result)  # type: ignore[arg-type]
            if ai is None:
                return _respond(added, update, response)
            if ai.tool_calls:
                calls = to_tool_calls(ai)
                review = driver.review(calls)
                for position, text in review.skipped.items():
                    call = calls[position]
                    added.append(
                        ToolMessage(text, tool_call_id=call.id, name=call.name, status="error")
                    )
                book.batch = [c for n, c in enumerate(calls) if n not in review.skipped]
                if driver.stop is not None:
                    break
                return _respond(added, update, response)
            verdict: Verification | None = (
                (yield _Check(driver, ai.text)) if driver.verifier is not None else None
            )
            decision = driver.judge_answer(verdict)
            if isinstance(decision, Interrupted):
                added.append(HumanMessage(decision.message))
                continue
            update["stop_report"] = driver.report(ai.text)
            return _respond(added, update, response)
        return (yield from _finish(driver, request, added, update))


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
    final = driver.final_request(wanted_tokens=settings.get("max_tokens"))
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
    return _respond(added, update)


def _record_batch(book: _RunBook, messages: list[AnyMessage]) -> Any:
    """Observe the results of the calls that ran, in call order; then judge the step."""
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
    return driver.end_step()


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
