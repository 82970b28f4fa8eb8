"""Convergent's stop decisions for hand-built LangGraph graphs: a drop-in ``tools_condition``.

LangGraph's prebuilt ``tools_condition`` routes a graph's model node to its tool node
while the last model message has tool calls, and to the end otherwise. `ToolsCondition`
is the same routing function, with the same destinations (``"tools"`` and
``"__end__"``), that also ends the run for convergent's reasons: at each routing it
replays the run's conversation (from its last human message) through a `CycleDriver`,
in the loop's order, and routes to the end once the driver has stopped. `report` says
how a run ended. Give the tool node `wrap_tool_call` and `awrap_tool_call` (optional),
so that a tool's exception is a failure the model reads and the tool-error policy
counts (a fatal `ToolError` included), not a crash of the graph.

The answer after a stop needs a node, since a routing function adds nothing to the
state: add `ToolsCondition.final_answer` as a node, and after a stop that calls for
one the route goes there instead of to the end. It makes the one request without
tools and adds the answer to the state as the last message, as LangChain's own limit
middleware ends a run with a message of its own.

A routing function makes no other request and adds no other message, so:

- the policy's notes are turned off (the run stops where the loop would send one),
  said once with a `PolicyAdapted` warning when the policy asked for them;
- a verifier or an output type is refused (`NotExpressible`): its feedback cannot
  reach the model;
- the budget note is not sent (it changes no stop; the model is simply not told);
- ``max_seconds`` is refused: it has no clock of the run;
- a stop that a tool's result calls for (a hand-off, tool errors) comes before the
  next model request: it sees the result when it routes that request's response, and
  stops then;
- a limit reached after the last response's tools would run stops before they run
  (the final answer's request reads "not executed" as their results).

Install with ``pip install convergent[langchain]``.
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Literal, Unpack

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.prebuilt.tool_node import ToolCallRequest

from convergent.adapters import NotExpressible, PolicyAdapted
from convergent.adapters._langchain_common import (
    annotated_tool_effect,
    awrap_tool_call,
    finish_reason_of,
    last_text,
    outcome_of,
    to_tool_calls,
    tool_effects,
    usage_of,
    wrap_tool_call,
)
from convergent.adapters._policy import given_policy, settled
from convergent.limits import Limits
from convergent.loop.driver import CycleDriver, PolicyOptions
from convergent.loop.ending import FinalRequest, StopReport
from convergent.messages import ToolCall
from convergent.models._prices import PriceLike, priced_for_limit
from convergent.stop import Stop

__all__ = ["ToolsCondition", "awrap_tool_call", "tool_effects", "wrap_tool_call"]

_REPLAYS_KEPT = 256
"""Runs whose replay is kept, so that each routing continues where the last stopped."""

_AFTER_STOP = "convergent_after_stop"
"""The key, in the answer after a stop's ``response_metadata``, that marks it."""


class _Replay:
    """One run's driver, and how far into its conversation it has read."""

    __slots__ = (
        "batch",
        "driver",
        "final",
        "first",
        "going_on",
        "held",
        "read",
        "requesting",
        "start",
        "tail",
    )

    def __init__(self, driver: CycleDriver, start: int, first: object) -> None:
        self.driver = driver
        self.start = start
        """Where the run starts in the state's messages (its last human message)."""
        self.first = first
        """That message."""
        self.read = 0
        """Messages of the run read so far."""
        self.tail: object = None
        """The last message read (to tell that the conversation still continues it)."""
        self.batch: dict[str, ToolCall] = {}
        """The calls of the last response read, by id, until their results come."""
        self.held: dict[str, str] = {}
        """Calls of the last response that must not run (past a cap), with their result."""
        self.final: str | None = None
        """The answer after the stop, once the answer node added it."""
        self.requesting = False
        """A model request started (the tools' edge routed back to the model node)."""
        self.going_on = False
        """The last reply was not an answer (empty, cut): the model is asked again."""

    def continued_by(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether ``messages`` go on with this run's conversation as far as it was read.

        Only the messages not read yet are looked at (for a new human message).
        """
        start, read = self.start, self.read
        if len(messages) < start + read or messages[start] is not self.first:
            return False
        if read and messages[start + read - 1] is not self.tail:
            return False
        return not any(isinstance(m, HumanMessage) for m in messages[start + read :])


class ToolsCondition:
    """A routing function for a graph's model node: ``"tools"`` or ``"__end__"``.

    Example:
        ```python
        route = ToolsCondition(Limits(max_cycles=20))
        builder.add_node("tools", ToolNode(tools, wrap_tool_call=wrap_tool_call))
        builder.add_node("final_answer", route.final_answer(model))  # optional
        builder.add_conditional_edges("agent", route)  # instead of tools_condition
        ...
        route.report(graph.invoke(inputs)).reason
        ```

    Args:
        limits: Budgets (default `Limits()`); ``max_seconds`` cannot be expressed.
        messages_key: Where the state keeps its messages (as for ``tools_condition``).
        price: The model's price (`TokenPrice` or ``(input, output)`` in US dollars per
            million tokens): the host reports tokens, not cost, so each response is
            costed at it. Required with ``max_cost``.
        **options: The stop policy and the rest (`convergent.loop.driver.PolicyOptions`):
            the policy's notes are turned off (with a `PolicyAdapted` warning when it
            asked for them); a ``verifier`` and an ``output`` type cannot be expressed,
            and the final answer needs the `final_answer` node.

    Raises:
        NotExpressible: For a verifier, an output type or ``max_seconds``.
        UserError: For ``max_cost`` without a ``price``.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        messages_key: str = "messages",
        price: PriceLike | None = None,
        **options: Unpack[PolicyOptions],
    ) -> None:
        given = given_policy(limits if limits is not None else Limits(), options)
        limits, options = settled(limits, options)
        _refuse(limits, options)
        policy = options["policy"]
        assert policy is not None
        if policy.notes and given:
            warnings.warn(
                "a LangGraph routing function cannot add a note for the model: notes are "
                "off (StopPolicy(notes=0)), and the run stops where convergent's loop "
                "would send one",
                PolicyAdapted,
                stacklevel=2,
            )
        options["policy"] = dataclasses.replace(policy, notes=0)
        self.limits = limits
        self.price = priced_for_limit(price, limits.max_cost, "ToolsCondition")
        """The model's price, which responses are costed at."""
        self.messages_key = messages_key
        self._options = options
        self._answer_node: str | None = None
        self._model_node: str | None = None
        self._wrapped = False
        self._replays: OrderedDict[int, _Replay] = OrderedDict()
        self._last: _Replay | None = None
        """The replay used last (most routings go on with the same run)."""
        self._lock = threading.Lock()

    def __call__(self, state: Any) -> Literal["tools", "__end__"]:
        """``"tools"`` while the last model message has tool calls and nothing stops the run.

        After a stop that calls for an answer, the `final_answer` node's name, if the
        graph has one; after a reply that is not an answer (empty, cut at the token
        limit), the model node's, when `after_tools` named it.
        """
        messages = self._messages(state)
        if not messages:
            raise ValueError(f"no messages found in the state's {self.messages_key!r}")
        with self._lock:
            replay = self._replay(messages)
        driver = replay.driver
        if driver.stop is not None:
            return self._end(driver)  # type: ignore[return-value]  # the answer node, if any
        last = messages[-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            if replay.going_on and self._model_node is not None:
                return self._model_node  # type: ignore[return-value]  # asked again
            return "__end__"
        return "tools"

    def after_tools(self, model_node: str) -> Callable[[Any], str]:
        """A routing function for the tool node's edge back to ``model_node``.

        With it, a stop that a batch's results call for (a hand-off, a tool-error
        streak, a limit) ends the run right after the batch, before the next model
        request, as in convergent's loop (the route alone stops one request later); the
        time of each model request is known, so only time outside them counts between
        polls; and a reply that is not an answer (empty, cut at the token limit) goes
        back to ``model_node`` for more, as the loop asks for it. Use it in place of
        ``builder.add_edge("tools", model_node)``.
        """
        self._model_node = model_node

        def route_results(state: Any) -> str:
            with self._lock:
                replay = self._replay(self._messages(state))
                driver = replay.driver
                if driver.stop is not None:
                    return self._end(driver)
                driver.start_request()
                replay.requesting = True
            return model_node

        return route_results

    @property
    def wrap_tool_call(self) -> Callable[..., Any]:
        """The tool node's ``wrap_tool_call``, for this route's runs.

        Besides turning a tool's exception into a failure the model reads (as the
        module's `wrap_tool_call`), it holds back the calls a tool-call cap refuses:
        they get the loop's "not run" result, and the calls before them run. Without
        it, a batch that a cap cuts does not run at all.
        """
        self._wrapped = True
        return self._wrap_sync

    @property
    def awrap_tool_call(self) -> Callable[..., Any]:
        """The tool node's ``awrap_tool_call``, for this route's runs (see `wrap_tool_call`)."""
        self._wrapped = True
        return self._wrap_async

    def _wrap_sync(self, request: ToolCallRequest, handler: Callable[..., Any]) -> Any:
        held = self._held(request)
        return held if held is not None else wrap_tool_call(request, handler)

    async def _wrap_async(self, request: ToolCallRequest, handler: Callable[..., Any]) -> Any:
        held = self._held(request)
        return held if held is not None else await awrap_tool_call(request, handler)

    def _held(self, request: ToolCallRequest) -> ToolMessage | None:
        """The result of a call the review held back, instead of running it; else None.

        A tool of the tool node that ``tools`` does not name is learned here at its first
        call (a routing function does not see the tool node), with the effect its MCP
        annotations declare (`annotated_tool_effect`), else undeclared.
        """
        call = request.tool_call
        with self._lock:
            replay = self._found(self._messages(request.state))
            if replay is not None and request.tool is not None:
                replay.driver.learns(call["name"], annotated_tool_effect(request.tool))
            text = replay.held.get(call["id"] or "") if replay is not None else None
        if text is None:
            return None
        return ToolMessage(text, tool_call_id=call["id"] or "", name=call["name"], status="error")

    def _end(self, driver: CycleDriver) -> str:
        """Where a stopped run goes: the answer node if one is due and the graph has it."""
        if self._answer_node is not None and driver.calls_for_answer():
            return self._answer_node
        return "__end__"

    def final_answer(self, model: Any, *, name: str = "final_answer") -> RunnableLambda[Any, Any]:
        """The node that makes the request for the answer after a stop; add it as ``name``.

        Once made, the route goes to ``name`` after a stop that calls for an answer
        (`max_cycles`, `stalled`, `budget_exhausted`, `tool_error`, unless
        ``final_answer=False``). The node asks ``model`` (a chat model, without tools)
        once, with ``max_tokens`` capped to what a token or cost budget leaves, and adds
        its answer to the state as the last message; the graph ends there. Calls of the
        last response that did not run get a "not executed" result first, so that the
        request is one a provider accepts.

        Args:
            model: The graph's chat model, unbound to tools.
            name: The node's name in the graph.
        """
        self._answer_node = name

        def answer(state: Any) -> dict[str, Any]:
            asked = self._final_request(state, model)
            if asked is None:
                return {}
            messages, added, final = asked
            try:
                response = _capped(model, final).invoke(messages)
            except Exception:  # no answer is better than a crash: the run keeps its last text
                return {self.messages_key: added}
            return {self.messages_key: [*added, _after_stop(response)]}

        async def aanswer(state: Any) -> dict[str, Any]:
            asked = self._final_request(state, model)
            if asked is None:
                return {}
            messages, added, final = asked
            try:
                response = await _capped(model, final).ainvoke(messages)
            except Exception:  # no answer is better than a crash: the run keeps its last text
                return {self.messages_key: added}
            return {self.messages_key: [*added, _after_stop(response)]}

        return RunnableLambda(answer, afunc=aanswer, name=name)

    def report(self, state: Any) -> StopReport:
        """How the run in ``state`` ended (its state at the end of the graph's run).

        Raises:
            ValueError: If the run in ``state`` has not stopped.
        """
        messages = self._messages(state)
        with self._lock:
            replay = self._replay(messages)
        if replay.driver.stop is None:
            raise ValueError("the run in this state has not stopped")
        run = messages[replay.start :]
        said = [message for message in run if not _is_after_stop(message)]
        return replay.driver.report(last_text(said), replay.final)

    def _driver(self) -> CycleDriver:
        """A run's driver: a final answer is asked for only where the graph has the node."""
        options: PolicyOptions = {**self._options}
        if self._answer_node is None and options["policy"] is not None:
            options["policy"] = dataclasses.replace(options["policy"], final_answer=False)
        return CycleDriver(self.limits, price=self.price, **options)

    def _final_request(
        self, state: Any, model: Any
    ) -> tuple[list[BaseMessage], list[BaseMessage], FinalRequest] | None:
        """The messages of the request after a stop, the results to add first, and its cap."""
        messages = self._messages(state)
        with self._lock:
            driver = self._replay(messages).driver
        stop = driver.stop
        cap = getattr(model, "max_tokens", None)
        final = driver.final_request(wanted_tokens=cap if isinstance(cap, int) else None)
        if stop is None or final is None:
            return None
        last = messages[-1]
        added: list[BaseMessage] = [
            ToolMessage(
                f"not executed: {stop.detail}",
                tool_call_id=call["id"] or "",
                name=call["name"],
                status="error",
            )
            for call in (last.tool_calls if isinstance(last, AIMessage) else [])
        ]
        return [*messages, *added, HumanMessage(final.prompt)], added, final

    def _messages(self, state: Any) -> Sequence[BaseMessage]:
        if isinstance(state, list):
            return state
        if isinstance(state, dict):
            found: Sequence[BaseMessage] = state.get(self.messages_key, [])
            return found
        found = getattr(state, self.messages_key, [])
        return found

    def _found(self, messages: Sequence[BaseMessage]) -> _Replay | None:
        """The replay of the run ``messages`` go on with, if one is kept."""
        last = self._last
        if last is not None and last.continued_by(messages):
            return last
        start = _start_of(messages)
        replay = self._replays.get(id(messages[start])) if messages else None
        return replay if replay is not None and replay.continued_by(messages) else None

    def _replay(self, messages: Sequence[BaseMessage]) -> _Replay:
        """The run's replay, read up to the end of ``messages``."""
        replay = self._found(messages)
        if replay is None:
            start = _start_of(messages)
            first = messages[start] if messages else None
            replay = _Replay(self._driver(), start, first)
            self._replays.pop(id(first), None)
            self._replays[id(first)] = replay
            while len(self._replays) > _REPLAYS_KEPT:
                self._replays.popitem(last=False)
        self._last = replay
        _read(replay, messages, early=self._model_node is None, wrapped=self._wrapped)
        return replay


def _refuse(limits: Limits, options: PolicyOptions) -> None:
    why = (
        "a verifier's feedback cannot be delivered"
        if options.get("verifier") is not None
        else "an output type's feedback cannot be delivered"
        if options.get("output") is not None
        else "it has no clock of the run: max_seconds cannot be checked"
        if limits.max_seconds is not None
        else None
    )
    if why is not None:
        raise NotExpressible(f"a LangGraph routing function adds no message: {why}")


def _capped(model: Any, final: FinalRequest) -> Any:
    return model.bind(max_tokens=final.max_tokens) if final.max_tokens is not None else model


def _after_stop(response: BaseMessage) -> AIMessage:
    """The model's answer after the stop, marked as such (the mark is never sent)."""
    text = response.text if isinstance(response, AIMessage) else str(response.content)
    metadata = {**response.response_metadata, _AFTER_STOP: True}
    usage = response.usage_metadata if isinstance(response, AIMessage) else None
    return AIMessage(text, response_metadata=metadata, usage_metadata=usage, id=response.id)


def _is_after_stop(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and bool(message.response_metadata.get(_AFTER_STOP))


def _start_of(messages: Sequence[BaseMessage]) -> int:
    """Where the run's part of the conversation starts: its last human message (or 0)."""
    for position in range(len(messages) - 1, -1, -1):
        if isinstance(messages[position], HumanMessage):
            return position
    return 0


def _read(
    replay: _Replay, messages: Sequence[BaseMessage], *, early: bool = True, wrapped: bool = False
) -> None:
    """Feed the driver the run's messages it has not read, in the loop's order.

    Every model message counts as a request, also one made after the stop was due:
    the graph made it; one whose start the tools' edge did not see took no time. The
    answer after the stop is not a request of the run's. A batch's step ends once each
    of its calls has a result. With ``early`` (no tools' edge: the model node is not
    known), a limit is checked before the batch runs: the route alone sees no result
    before the next request, and a limit reached now still holds then; and a reply that
    is not an answer ends the run, since the model cannot be asked again. Calls a cap
    refuses are held back by the route's tool wrappers (``wrapped``); without them, a
    batch a cap cuts does not run.
    """
    driver = replay.driver
    for message in messages[replay.start + replay.read :]:
        replay.read += 1
        replay.tail = message
        if isinstance(message, ToolMessage):
            _read_result(replay, message)
            continue
        if not isinstance(message, AIMessage):
            continue
        if _is_after_stop(message):
            driver.add_usage(usage_of(message))
            replay.final = message.text
            continue
        if replay.batch:  # a call without a result: the step ends anyway
            replay.batch = {}
            _end_step(driver)
        elif driver.stop is None and not replay.requesting:
            driver.before_request()
        if not replay.requesting:
            driver.start_request()
        replay.requesting = replay.going_on = False
        driver.responded(usage_of(message))
        if driver.stop is None:
            _read_reply(replay, message, early=early, wrapped=wrapped)


def _read_reply(replay: _Replay, message: AIMessage, *, early: bool, wrapped: bool) -> None:
    """A model reply of a run that goes on: an answer judged, or its calls reviewed."""
    driver = replay.driver
    if not message.tool_calls:
        decision = driver.answered(message.text, finish_reason_of(message), continues=not early)
        replay.going_on = not isinstance(decision, Stop)
        return
    calls = to_tool_calls(message)
    review = driver.review(calls)
    if isinstance(review.decision, Stop):
        return
    replay.held = {calls[n].id: text for n, text in review.skipped.items()}
    if replay.held and not wrapped:  # nothing can hold the refused calls back
        driver.end_step()
        return
    replay.batch = {call.id: call for n, call in enumerate(calls) if n not in review.skipped}
    if not replay.batch:  # every call held back: the step ends without results
        _end_step(driver)
    elif early:
        driver.before_request()


def _read_result(replay: _Replay, message: ToolMessage) -> None:
    """A call's result; the last of its batch ends the step."""
    replay.held.pop(message.tool_call_id, None)
    call = replay.batch.pop(message.tool_call_id, None)
    driver = replay.driver
    if call is None or driver.stop is not None:
        return
    outcome, fatal = outcome_of(message)
    driver.observe(call, outcome, message.text, fatal=fatal)
    if not replay.batch:
        _end_step(driver)


def _end_step(driver: CycleDriver) -> None:
    """A batch is complete: its step, then the limits before the next request."""
    if driver.stop is None:
        driver.end_step()
    if driver.stop is None:
        driver.before_request()
