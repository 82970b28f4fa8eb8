"""`ToolsCondition` as a drop-in for LangGraph's ``tools_condition`` in hand-built graphs."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.prebuilt import tools_condition
from pydantic import BaseModel

from convergent import Limits, StopPolicy, StopReason
from convergent.adapters import NotExpressible
from convergent.adapters.langgraph import ToolsCondition

from .hosts import langchain_model, langchain_tools
from .trajectories import World, needs_citation


def _calls(*paths: str) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            {"name": "read_file", "args": {"path": path}, "id": f"c{n}"}
            for n, path in enumerate(paths)
        ],
    )


@pytest.mark.parametrize(
    "options",
    [
        {"policy": StopPolicy()},  # one note by default
        {"verifier": needs_citation},
        {"final_answer": True},
        {"limits": Limits(max_seconds=60)},
    ],
    ids=["nudges", "verifier", "final_answer", "max_seconds"],
)
def test_what_a_routing_function_cannot_express_is_refused(options: dict[str, object]) -> None:
    with pytest.raises(NotExpressible, match="a LangGraph routing function adds no message"):
        ToolsCondition(**options)  # type: ignore[arg-type]


class Conversation(BaseModel):
    chat: list[AnyMessage]


@pytest.mark.parametrize(
    "messages",
    [
        [HumanMessage("go"), _calls("a.txt")],
        [HumanMessage("go"), _calls("a.txt", "b.txt")],
        [HumanMessage("go"), AIMessage("done")],
        [HumanMessage("go")],
    ],
    ids=["one call", "two calls", "an answer", "no answer yet"],
)
def test_it_routes_as_tools_condition_does_while_nothing_stops_the_run(
    messages: list[AIMessage | HumanMessage],
) -> None:
    route = ToolsCondition(messages_key="chat")
    assert route({"chat": messages}) == tools_condition({"chat": messages}, messages_key="chat")
    assert route(Conversation(chat=messages)) == tools_condition(messages)  # type: ignore[arg-type]
    assert route(messages) == tools_condition(messages)  # type: ignore[arg-type]


def test_a_repeated_read_ends_the_run_at_the_next_route() -> None:
    route = ToolsCondition(tools={"read_file": True})
    messages: list[AIMessage | HumanMessage | ToolMessage] = [HumanMessage("what is in a.txt?")]
    routes = []
    for _ in range(3):
        messages.append(_calls("a.txt"))
        routes.append(route({"messages": messages}))
        messages.append(ToolMessage("contents of a.txt", tool_call_id="c0", name="read_file"))
    assert routes == ["tools", "tools", "tools"]
    # a read runs and is judged on its result: the next response routes to the end
    messages.append(_calls("a.txt"))
    assert route({"messages": messages}) == "__end__"
    report = route.report({"messages": messages})
    assert (report.reason, report.cycles) == (StopReason.STALLED, 4)


def test_a_new_question_on_the_same_thread_is_a_new_run() -> None:
    route = ToolsCondition(Limits(max_cycles=2))
    first = [HumanMessage("one"), _calls("a.txt")]
    assert route(first) == "tools"
    first += [ToolMessage("x", tool_call_id="c0"), _calls("b.txt")]
    assert route(first) == "__end__"  # two requests: no third
    second = [*first, HumanMessage("two"), _calls("c.txt")]
    assert route(second) == "tools"  # counted afresh from the new question


def test_a_replay_continued_from_the_cache_matches_a_fresh_one() -> None:
    """Each routing reads only what is new; the report replays the whole run: they agree."""
    route = ToolsCondition(Limits(max_cycles=5), tools={"read_file": True})
    messages: list[AIMessage | HumanMessage | ToolMessage] = [HumanMessage("read them")]
    routes = []
    for n in range(5):
        messages.append(_calls(f"part{n}.txt"))
        routes.append(route({"messages": messages}))
        messages.append(ToolMessage(f"part {n}", tool_call_id="c0", name="read_file"))
    assert routes == ["tools"] * 4 + ["__end__"]
    report = ToolsCondition(Limits(max_cycles=5)).report(messages[:-1])
    assert (report.reason, report.cycles) == (StopReason.MAX_CYCLES, 5)


async def test_a_graph_without_the_tool_wrappers_counts_error_results_as_rejected_calls() -> None:
    """LangGraph's own ToolNode turns invalid arguments into an error result: the model's
    mistake, which counts toward a stall, never toward the tool-error streak."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    steps = [(("read_file", {"file": "a.txt"}),)] * 3 + ["never asked"]
    model = langchain_model(steps)
    tools = langchain_tools(World())
    route = ToolsCondition(policy=StopPolicy(notes=0, max_repeated_failures=1))
    builder = StateGraph(MessagesState)
    bound = model.bind_tools(tools)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route)
    builder.add_edge("tools", "agent")
    state = await builder.compile().ainvoke({"messages": [HumanMessage("read a.txt")]})
    errors = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in errors] == ["error", "error"]
    report = route.report(state)
    assert (report.reason, report.cycles) == (StopReason.STALLED, 3)
