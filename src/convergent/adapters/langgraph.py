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

A routing function adds nothing to the state and makes no request, so it cannot
express:

- a nudge before a stall or tool-error stop, or the verifier's feedback:
  ``StopPolicy(notes=0)`` is required (and the default), and a verifier is refused
  (`NotExpressible`);
- a final answer after a stop (``final_answer=True`` is refused): the output is the
  model's last text;
- the budget note (it changes no stop; the model is simply not told);
- ``max_seconds``: it has no clock of the run (refused);
- a stop that a tool's result calls for (a hand-off, tool errors) before the next model
  request: it sees the result when it routes that request's response, and stops then;
- a limit reached after the tools of the last response run: it stops before they run.

Install with ``pip install convergent[langchain]``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal, Unpack

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from convergent.adapters import NotExpressible
from convergent.adapters._langchain_common import (
    awrap_tool_call,
    last_text,
    outcome_of,
    to_tool_calls,
    usage_of,
    wrap_tool_call,
)
from convergent.driver import CycleDriver, PolicyOptions, StopReport, resolved_policy
from convergent.limits import Limits, without_legacy
from convergent.messages import ToolCall
from convergent.models._prices import PriceLike, priced_for_limit
from convergent.policy import StopPolicy
from convergent.stop import Stop

__all__ = ["ToolsCondition", "awrap_tool_call", "wrap_tool_call"]

_REPLAYS_KEPT = 256
"""Runs whose replay is kept, so that each routing continues where the last stopped."""


class _Replay:
    """One run's driver, and how far into its conversation it has read."""

    __slots__ = ("batch", "driver", "read", "tail")

    def __init__(self, driver: CycleDriver) -> None:
        self.driver = driver
        self.read = 0
        """Messages of the run read so far."""
        self.tail: object = None
        """The last message read (to tell that the conversation still continues it)."""
        self.batch: dict[str, ToolCall] = {}
        """The calls of the last response read, by id, until their results come."""


class ToolsCondition:
    """A routing function for a graph's model node: ``"tools"`` or ``"__end__"``.

    Example:
        ```python
        route = ToolsCondition(Limits(max_cycles=20))
        builder.add_node("tools", ToolNode(tools, wrap_tool_call=wrap_tool_call))
        builder.add_conditional_edges("agent", route)  # instead of tools_condition
        ...
        route.report(graph.invoke(inputs)).reason
        ```

    Args:
        limits: Budgets; ``max_seconds`` cannot be expressed.
        messages_key: Where the state keeps its messages (as for ``tools_condition``).
        price: The model's price (`TokenPrice` or ``(input, output)`` in US dollars per
            million tokens): the host reports tokens, not cost, so each response is
            costed at it. Required with ``max_cost``.
        **options: The stop policy and the rest (`convergent.driver.PolicyOptions`); a
            ``verifier``, a ``final_answer`` and notes cannot be expressed (the policy
            defaults to ``StopPolicy(notes=0)``).

    Raises:
        NotExpressible: For a verifier, a final answer, nudges or ``max_seconds``.
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
        limits = limits if limits is not None else Limits()
        policy = resolved_policy(options.get("policy") or _NO_NOTES, limits, options)
        _refuse(limits, policy, options.get("verifier"), options.get("final_answer", False))
        limits = without_legacy(limits)
        options = {key: value for key, value in options.items() if key not in _LEGACY}  # type: ignore[assignment]
        options["policy"] = policy
        self.limits = limits
        self.price = priced_for_limit(price, limits.max_cost, "ToolsCondition")
        """The model's price, which responses are costed at."""
        self.messages_key = messages_key
        self._options: PolicyOptions = {**options, "final_answer": False}
        self._replays: OrderedDict[int, _Replay] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, state: Any) -> Literal["tools", "__end__"]:
        """``"tools"`` while the last model message has tool calls and nothing stops the run."""
        messages = self._messages(state)
        if not messages:
            raise ValueError(f"no messages found in the state's {self.messages_key!r}")
        last = messages[-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return "__end__"
        with self._lock:
            replay = self._replay(messages)
        return "__end__" if replay.driver.stop is not None else "tools"

    def report(self, state: Any) -> StopReport:
        """How the run in ``state`` ended (its state at the end of the graph's run)."""
        messages = self._messages(state)
        run = _run_of(messages)
        replay = _Replay(CycleDriver(self.limits, price=self.price, **self._options))
        _read(replay, run)
        if replay.driver.stop is None:
            raise ValueError("the run in this state has not stopped")
        return replay.driver.report(last_text(run))

    def _messages(self, state: Any) -> Sequence[BaseMessage]:
        if isinstance(state, list):
            return state
        if isinstance(state, dict):
            found: Sequence[BaseMessage] = state.get(self.messages_key, [])
            return found
        found = getattr(state, self.messages_key, [])
        return found

    def _replay(self, messages: Sequence[BaseMessage]) -> _Replay:
        """The run's replay, read up to the end of ``messages``."""
        run = _run_of(messages)
        key = id(run[0]) if run else 0
        replay = self._replays.pop(key, None)
        if replay is None or replay.read > len(run) or run[replay.read - 1] is not replay.tail:
            replay = _Replay(CycleDriver(self.limits, price=self.price, **self._options))
        self._replays[key] = replay
        while len(self._replays) > _REPLAYS_KEPT:
            self._replays.popitem(last=False)
        _read(replay, run)
        return replay


_NO_NOTES = StopPolicy(notes=0)
_LEGACY = ("on_tool_error", "max_consecutive_tool_errors")


def _refuse(limits: Limits, policy: StopPolicy, verifier: object, final_answer: bool) -> None:
    why = (
        "a verifier's feedback cannot be delivered"
        if verifier is not None
        else "no request can be made for a final answer"
        if final_answer
        else "a note cannot be delivered: use StopPolicy(notes=0)"
        if policy.notes
        else "it has no clock of the run: max_seconds cannot be checked"
        if limits.max_seconds is not None
        else None
    )
    if why is not None:
        raise NotExpressible(f"a LangGraph routing function adds no message: {why}")


def _run_of(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
    """The run's part of the conversation: from its last human message on."""
    for position in range(len(messages) - 1, -1, -1):
        if isinstance(messages[position], HumanMessage):
            return messages[position:]
    return messages


def _read(replay: _Replay, run: Sequence[BaseMessage]) -> None:
    """Feed the driver the run's messages it has not read, in the loop's order.

    Every model message counts as a request, also one made after the stop was due:
    the graph made it.
    """
    driver = replay.driver
    for message in run[replay.read :]:
        replay.read += 1
        replay.tail = message
        if isinstance(message, ToolMessage):
            call = replay.batch.get(message.tool_call_id)
            if call is not None and driver.stop is None:
                outcome, fatal = outcome_of(message)
                driver.observe(call, outcome, message.text, fatal=fatal)
            continue
        if not isinstance(message, AIMessage):
            continue
        if replay.batch:
            replay.batch = {}
            if driver.stop is None:
                driver.end_step()
        if driver.stop is None:
            driver.before_request()
        driver.requested(usage_of(message))
        if driver.stop is not None:
            continue
        if not message.tool_calls:
            driver.answered(message.text)
            continue
        calls = to_tool_calls(message)
        if isinstance(driver.review(calls).decision, Stop):
            continue
        replay.batch = {call.id: call for call in calls}
        # the loop would run these calls, then check the limits before the next request:
        # without a final answer to keep room for, their results cannot change that
        driver.before_request()
