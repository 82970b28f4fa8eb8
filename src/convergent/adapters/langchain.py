"""Convergent's stop decisions as LangChain v1 ``create_agent`` middleware.

`ConvergenceMiddleware` drives a `CycleDriver` from the agent's own hooks, in the loop's
order: ``before_model`` records the finished tool batch (a hand-off, a tool-error
nudge or stop), adds the budget note and checks the limits; ``wrap_model_call`` counts
the cycle and, once the run has stopped, turns the next request into the one final
request without tools; ``after_model`` runs the verifier on an answer, or reviews the
tool calls before they run (a stalled call gets the nudge as its result instead of
running); ``wrap_tool_call`` turns a tool's exception into an error result for the
model, as convergent's loop does. A stop ends the run the way LangChain's own limit
middleware does (``jump_to="end"``), and the agent's result carries a `StopReport`
under ``"stop_report"``.

Install with ``pip install convergent[langchain]``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import (
    ModelResponse,
    OmitFromInput,
    PrivateStateAttr,
    hook_config,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from convergent.adapters._driver import CycleDriver, StopReport, ToolOutcome, failure
from convergent.extensions import Verifier
from convergent.messages import ToolCall, Usage
from convergent.stop import Interrupted, Limits, Nudge, Stop

__all__ = [
    "ConvergenceMiddleware",
    "ConvergenceState",
    "last_ai_turn",
    "to_tool_calls",
    "usage_of",
]


class _RunBook:
    """One run's driver and what it needs to know between the agent's hooks."""

    __slots__ = ("driver", "final", "outcomes", "skipped")

    def __init__(self, driver: CycleDriver) -> None:
        self.driver = driver
        self.outcomes: dict[str, tuple[ToolOutcome, bool]] = {}
        """Tool call id -> how it ended (for the calls that raised) and whether fatally."""
        self.skipped: set[str] = set()
        """Ids of the calls that did not run (a nudge's note or a stop is their result)."""
        self.final = False
        """The next model request is the final one, without tools."""


class ConvergenceState(AgentState[Any]):
    """The agent state `ConvergenceMiddleware` adds."""

    stop_report: NotRequired[Annotated[StopReport, OmitFromInput]]
    """How the run ended, once it has (in the agent's result)."""
    convergence_run: NotRequired[Annotated[_RunBook, UntrackedValue, PrivateStateAttr]]
    """The run's driver (never checkpointed: each invocation starts afresh)."""


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
            once more, without tools, for its best answer.
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
            "terminal_tools": terminal_tools,
            "max_consecutive_tool_errors": max_consecutive_tool_errors,
            "on_tool_error": on_tool_error,
            "verifier": verifier,
            "final_answer": final_answer,
        }

    # -- the run ------------------------------------------------------------------------

    def before_agent(self, state: ConvergenceState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Start the run's driver."""
        return {"convergence_run": _RunBook(CycleDriver(self.limits, **self._driver_options))}

    async def abefore_agent(
        self, state: ConvergenceState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Start the run's driver."""
        return self.before_agent(state, runtime)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: ConvergenceState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Judge the tool batch that just ran, then the limits, before the next request."""
        book = state["convergence_run"]
        driver = book.driver
        if driver.stop is not None:
            return None  # stopped in after_model: the final request comes next
        messages: list[AnyMessage] = []
        turn = last_ai_turn(state["messages"])
        if turn is not None and turn[0].tool_calls:
            decision = self._record_batch(book, turn)
            if isinstance(decision, Nudge):
                messages.append(HumanMessage(decision.note))
        if isinstance(driver.before_request(), Stop):
            return self._stopped(book, state, messages)
        note = driver.budget_note()
        if note is not None:
            messages.append(HumanMessage(note))
        return {"messages": messages} if messages else None

    async def abefore_model(
        self, state: ConvergenceState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Judge the tool batch that just ran, then the limits, before the next request."""
        return self.before_model(state, runtime)

    def _record_batch(self, book: _RunBook, turn: tuple[AIMessage, list[ToolMessage]]) -> Any:
        """Observe the batch's results in call order, then decide what the step means."""
        ai, results = turn
        by_id = {message.tool_call_id: message for message in results}
        driver = book.driver
        for call in ai.tool_calls:
            call_id = call["id"] or ""
            message = by_id.get(call_id)
            if message is None or call_id in book.skipped:
                continue
            outcome, fatal = book.outcomes.pop(call_id, (_status(message), False))
            driver.observe(_tool_call(call), outcome, message.text, fatal=fatal)
        book.skipped.clear()
        return driver.end_step()

    def _stopped(
        self, book: _RunBook, state: ConvergenceState, messages: list[AnyMessage]
    ) -> dict[str, Any]:
        """The run stopped before a request: ask for the final answer, or end now."""
        driver = book.driver
        stop = driver.stop
        assert stop is not None
        if driver.final_prompt() is not None:
            book.final = True
            return {"messages": messages} if messages else {}
        report = driver.report(_last_text([*state["messages"], *messages]))
        if stop.output is not None:
            messages.append(AIMessage(stop.output))
        return {"messages": messages, "stop_report": report, "jump_to": "end"}

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        """Count the cycle; once stopped, make the request the final one, without tools."""
        book: _RunBook = request.state["convergence_run"]  # type: ignore[typeddict-item]
        if book.final:
            return handler(_final_request(request, book.driver))
        response = handler(request)
        book.driver.requested(_response_usage(response))
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        """Count the cycle; once stopped, make the request the final one, without tools."""
        book: _RunBook = request.state["convergence_run"]  # type: ignore[typeddict-item]
        if book.final:
            return await handler(_final_request(request, book.driver))
        response = await handler(request)
        book.driver.requested(_response_usage(response))
        return response

    @hook_config(can_jump_to=["end", "model"])
    def after_model(self, state: ConvergenceState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """An answer: the verifier, then completion. Tool calls: review them before they run."""
        book = state["convergence_run"]
        ai = _last_ai(state["messages"])
        if book.final:
            return self._final(book, state, ai)
        if ai is None:
            return None
        if not ai.tool_calls:
            return self._answered(book, book.driver.answered(ai.text), ai.text)
        return self._review(book, state, ai)

    @hook_config(can_jump_to=["end", "model"])
    async def aafter_model(
        self, state: ConvergenceState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """An answer: the verifier, then completion. Tool calls: review them before they run."""
        book = state["convergence_run"]
        ai = _last_ai(state["messages"])
        if book.final:
            return self._final(book, state, ai)
        if ai is None:
            return None
        if not ai.tool_calls:
            decision = await book.driver.answered_async(ai.text)
            return self._answered(book, decision, ai.text)
        return self._review(book, state, ai)

    def _final(
        self, book: _RunBook, state: ConvergenceState, ai: AIMessage | None
    ) -> dict[str, Any]:
        book.final = False
        driver = book.driver
        if ai is not None and ai.usage_metadata:
            driver.add_usage(usage_of(ai))
        previous = _last_text(state["messages"][:-1])
        report = driver.report(previous, ai.text if ai is not None else None)
        return {"stop_report": report, "jump_to": "end"}

    def _answered(self, book: _RunBook, decision: Any, text: str) -> dict[str, Any] | None:
        if isinstance(decision, Interrupted):
            return {"messages": [HumanMessage(decision.message)], "jump_to": "model"}
        if isinstance(decision, Stop):
            return {"stop_report": book.driver.report(text)}
        return None

    def _review(
        self, book: _RunBook, state: ConvergenceState, ai: AIMessage
    ) -> dict[str, Any] | None:
        review = book.driver.review(to_tool_calls(ai))
        if not review.skipped:
            return None
        results: list[AnyMessage] = []
        for position, text in review.skipped.items():
            call = ai.tool_calls[position]
            book.skipped.add(call["id"] or "")
            results.append(
                ToolMessage(text, tool_call_id=call["id"] or "", name=call["name"], status="error")
            )
        if isinstance(review.decision, Stop):
            update = self._stopped(book, state, results)
            update.setdefault("jump_to", "model")
            return update
        return {"messages": results}

    # -- tools --------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the call; a tool's exception becomes an error result for the model."""
        try:
            return handler(request)
        except Exception as exc:  # the model sees the failure, as in convergent's loop
            return _failed(request, exc)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run the call; a tool's exception becomes an error result for the model."""
        try:
            return await handler(request)
        except Exception as exc:  # the model sees the failure, as in convergent's loop
            return _failed(request, exc)


def _failed(request: ToolCallRequest, exc: Exception) -> ToolMessage:
    book: _RunBook = request.state["convergence_run"]
    call = request.tool_call
    text, fatal = failure(call["name"], exc)
    book.outcomes[call["id"] or ""] = ("failed", fatal)
    return ToolMessage(text, tool_call_id=call["id"] or "", name=call["name"], status="error")


def _status(message: ToolMessage) -> ToolOutcome:
    """A result the tool node itself marked as an error was rejected before it ran."""
    return "invalid" if message.status == "error" else "ok"


def _final_request(request: ModelRequest[Any], driver: CycleDriver) -> ModelRequest[Any]:
    prompt = driver.final_prompt()
    assert prompt is not None
    return request.override(tools=[], messages=[*request.messages, HumanMessage(prompt)])


def _response_usage(response: ModelResponse[Any] | AIMessage) -> Usage | None:
    messages = [response] if isinstance(response, AIMessage) else response.result
    for message in messages:
        if isinstance(message, AIMessage):
            return usage_of(message)
    return None


def usage_of(message: AIMessage) -> Usage:
    """A LangChain message's ``usage_metadata`` as convergent's `Usage` (one request)."""
    metadata = message.usage_metadata
    if not metadata:
        return Usage(requests=1)
    return Usage(
        input_tokens=metadata.get("input_tokens", 0),
        output_tokens=metadata.get("output_tokens", 0),
        requests=1,
    )


def _tool_call(call: Mapping[str, Any]) -> ToolCall:
    return ToolCall(id=call.get("id") or "", name=call["name"], arguments=dict(call["args"]))


def to_tool_calls(message: AIMessage) -> list[ToolCall]:
    """A LangChain message's tool calls as convergent's `ToolCall`s."""
    return [_tool_call(call) for call in message.tool_calls]


def _last_ai(messages: Sequence[BaseMessage]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


def last_ai_turn(messages: Sequence[BaseMessage]) -> tuple[AIMessage, list[ToolMessage]] | None:
    """The last model message and the tool results after it, if the conversation ends so."""
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            results.append(message)
        elif isinstance(message, AIMessage):
            results.reverse()
            return message, results
        else:
            return None
    return None


def _last_text(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.text.strip():
            return message.text
    return ""
