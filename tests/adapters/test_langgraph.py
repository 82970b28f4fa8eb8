"""`ToolsCondition` as a drop-in for LangGraph's ``tools_condition`` in hand-built graphs."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import create_model

from convergent import Limits, StopPolicy, StopReason
from convergent.adapters import NotExpressible, PolicyAdapted
from convergent.exceptions import UserError
from convergent.output import OutputSpec

from .hosts import annotated_lookup, hand_built_graph, langchain_model, langchain_tools
from .trajectories import NOTES, Report, World, needs_citation

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, AnyMessage

    from convergent.adapters.langgraph import ToolsCondition

PLAIN = StopPolicy(notes=0)
"""A policy a routing function delivers as it is."""


def _calls(*paths: str) -> AIMessage:
    from langchain_core.messages import AIMessage

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
        {"verifier": needs_citation},
        {"output": OutputSpec.of_type(Report)},
        {"limits": Limits(max_seconds=60)},
    ],
    ids=["verifier", "output", "max_seconds"],
)
def test_what_a_routing_function_cannot_express_is_refused(options: dict[str, object]) -> None:
    from convergent.adapters.langgraph import ToolsCondition

    with pytest.raises(NotExpressible, match="a LangGraph routing function adds no message"):
        ToolsCondition(**options)  # type: ignore[arg-type]


def _three_reads(route: ToolsCondition) -> tuple[list[str], list[AnyMessage]]:
    """Route three reads of the same file; the routes, and the conversation (with the
    last read's result)."""
    from langchain_core.messages import HumanMessage, ToolMessage

    messages: list[AnyMessage] = [HumanMessage("what is in a.txt?")]
    routes = []
    for _ in range(3):
        messages.append(_calls("a.txt"))
        routes.append(route({"messages": messages}))
        messages.append(ToolMessage("contents of a.txt", tool_call_id="c0", name="read_file"))
    return routes, messages


def test_the_first_limits_a_user_writes_work_as_they_are() -> None:
    from convergent.adapters.langgraph import ToolsCondition

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        route = ToolsCondition(Limits(max_cycles=20), tools={"read_file": True})
    routes, messages = _three_reads(route)
    assert routes == ["tools", "tools", "tools"]  # a read runs, and is judged on its result
    messages.append(_calls("a.txt"))
    assert route({"messages": messages}) == "__end__"


def test_a_policy_that_asks_for_notes_runs_without_them_and_says_so_once() -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    from convergent.adapters.langgraph import ToolsCondition

    with pytest.warns(PolicyAdapted, match="notes are off") as warned:
        route = ToolsCondition(policy=StopPolicy(max_repeated_calls=2))
    assert len(warned) == 1
    messages: list[AnyMessage] = [HumanMessage("what is in a.txt?"), _calls("a.txt")]
    assert route({"messages": messages}) == "tools"
    messages += [ToolMessage("same", tool_call_id="c0"), _calls("a.txt")]
    # an undeclared call runs and is judged on its result, as in the loop
    assert route({"messages": messages}) == "tools"
    messages += [ToolMessage("same", tool_call_id="c0"), _calls("a.txt")]
    # the loop would send a note after the repeat's result; here the next routing stops
    assert route({"messages": messages}) == "__end__"
    report = route.report({"messages": messages})
    assert (report.reason, report.cycles) == (StopReason.STALLED, 3)


def test_a_bad_rule_is_refused_when_the_route_is_built() -> None:
    from convergent.adapters.langgraph import ToolsCondition

    with pytest.raises(UserError, match="on_tool_error"):
        ToolsCondition(policy=StopPolicy(on_tool_error="bogus"))  # type: ignore[arg-type]


async def test_the_answer_node_adds_the_answer_after_a_stop_to_the_state() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from convergent.adapters.langgraph import ToolsCondition

    seen: list[tuple[str, int | None]] = []
    steps = [(("read_file", {"path": f"part{n}.txt"}),) for n in range(3)]
    model = langchain_model([*steps, "parts 0-2 read; part 3 is missing"], seen, max_tokens=300)
    route = ToolsCondition(Limits(max_cycles=3, max_total_tokens=50_000), tools={"read_file": True})
    graph = hand_built_graph(model, langchain_tools(World()), route)
    state = await graph.ainvoke({"messages": [HumanMessage("read the parts")]})
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and last.text == "parts 0-2 read; part 3 is missing"
    assert [m.text for m in state["messages"] if isinstance(m, ToolMessage)] == [
        f"contents of part{n}.txt"
        for n in range(3)  # the third batch ran before the stop
    ]
    report = route.report(state)
    assert (report.reason, report.cycles) == (StopReason.MAX_CYCLES, 3)
    assert (report.output, report.output_after_stop) == (last.text, True)
    assert report.usage.requests == 4  # the answer's request counts, as a request
    final_request, cap = seen[-1]
    assert NOTES["final"] in final_request and cap == 300  # the model's own cap fits


async def test_without_the_tool_edge_the_answer_follows_not_executed_results() -> None:
    """A route alone stops at a limit before the last batch runs; the answer's request
    still gives each of its calls a result, as providers require."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from convergent.adapters.langgraph import ToolsCondition

    steps = [(("read_file", {"path": f"part{n}.txt"}),) for n in range(2)]
    seen: list[tuple[str, int | None]] = []
    model = langchain_model([*steps, "part 0 read"], seen)
    tools = langchain_tools(World())
    route = ToolsCondition(Limits(max_cycles=2))
    builder = StateGraph(MessagesState)
    bound = model.bind_tools(tools)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode(tools))
    builder.add_node("final_answer", route.final_answer(model))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route)
    builder.add_edge("tools", "agent")
    state = builder.compile().invoke({"messages": [HumanMessage("read the parts")]})
    results = [m.text for m in state["messages"] if isinstance(m, ToolMessage)]
    assert results == ["contents of part0.txt", "not executed: reached max_cycles=2"]
    report = route.report(state)
    assert (report.reason, report.cycles, report.output) == (
        StopReason.MAX_CYCLES,
        2,
        "part 0 read",
    )


@pytest.mark.parametrize(
    "last",
    [("a.txt",), ("a.txt", "b.txt"), "done", None],
    ids=["one call", "two calls", "an answer", "no answer yet"],
)
def test_it_routes_as_tools_condition_does_while_nothing_stops_the_run(
    last: tuple[str, ...] | str | None,
) -> None:
    """``last`` is the reply after the question: the paths it reads, or its answer."""
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.prebuilt import tools_condition

    from convergent.adapters.langgraph import ToolsCondition

    conversation = create_model("Conversation", chat=(list[AnyMessage], ...))
    messages: list[AIMessage | HumanMessage] = [HumanMessage("go")]
    if isinstance(last, tuple):
        messages.append(_calls(*last))
    elif last is not None:
        messages.append(AIMessage(last))
    route = ToolsCondition(policy=PLAIN, messages_key="chat")
    assert route({"chat": messages}) == tools_condition({"chat": messages}, messages_key="chat")
    assert route(conversation(chat=messages)) == tools_condition(messages)  # type: ignore[arg-type]
    assert route(messages) == tools_condition(messages)  # type: ignore[arg-type]


def test_a_repeated_read_ends_the_run_at_the_next_route() -> None:
    from convergent.adapters.langgraph import ToolsCondition

    route = ToolsCondition(policy=PLAIN, tools={"read_file": True})
    routes, messages = _three_reads(route)
    assert routes == ["tools", "tools", "tools"]
    # a read runs and is judged on its result: the next response routes to the end
    messages.append(_calls("a.txt"))
    assert route({"messages": messages}) == "__end__"
    report = route.report({"messages": messages})
    assert (report.reason, report.cycles) == (StopReason.STALLED, 4)


def test_a_new_question_on_the_same_thread_is_a_new_run() -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    from convergent.adapters.langgraph import ToolsCondition

    route = ToolsCondition(Limits(max_cycles=2))
    first = [HumanMessage("one"), _calls("a.txt")]
    assert route(first) == "tools"
    first += [ToolMessage("x", tool_call_id="c0"), _calls("b.txt")]
    assert route(first) == "__end__"  # two requests: no third
    second = [*first, HumanMessage("two"), _calls("c.txt")]
    assert route(second) == "tools"  # counted afresh from the new question


def test_a_replay_continued_from_the_cache_matches_a_fresh_one() -> None:
    """Each routing reads only what is new; the report replays the whole run: they agree."""
    from langchain_core.messages import HumanMessage, ToolMessage

    from convergent.adapters.langgraph import ToolsCondition

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
    from langchain_core.messages import HumanMessage, ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from convergent.adapters.langgraph import ToolsCondition

    steps = [(("read_file", {"file": "a.txt"}),)] * 3 + ["never asked"]
    model = langchain_model(steps)
    tools = langchain_tools(World())
    route = ToolsCondition(
        policy=StopPolicy(notes=0, max_repeated_failures=1, max_repeated_mistakes=2)
    )
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


def _plain_graph(route: ToolsCondition, model: object, tools: list[object]) -> object:
    """The tutorial's graph with the module's tool wrappers and no tools' edge."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from convergent.adapters.langgraph import awrap_tool_call, wrap_tool_call

    bound = model.bind_tools(tools)  # type: ignore[attr-defined]
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    builder.add_node(
        "tools", ToolNode(tools, wrap_tool_call=wrap_tool_call, awrap_tool_call=awrap_tool_call)
    )
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route)
    builder.add_edge("tools", "agent")
    return builder.compile()


@pytest.mark.parametrize("wired", [True, False], ids=["route's wrappers", "module's wrappers"])
async def test_no_call_past_a_cap_runs(wired: bool) -> None:
    """With the route's tool wrappers the calls before the cap run, as in the loop; with
    the module's, the batch a cap cuts does not run at all."""
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langgraph import ToolsCondition

    world = World()
    reads = [(("read_file", {"path": f"part{n}.txt"}),) for n in range(2)]
    cut = (("read_file", {"path": "part2.txt"}), ("read_file", {"path": "part3.txt"}))
    model = langchain_model([*reads, cut, "never asked"])
    route = ToolsCondition(Limits(max_calls_per_tool={"read_file": 3}), policy=PLAIN)
    tools = langchain_tools(world)
    graph = hand_built_graph(model, tools, route) if wired else _plain_graph(route, model, tools)
    state = await graph.ainvoke({"messages": [HumanMessage("read the parts")]})  # type: ignore[attr-defined]
    report = route.report(state)
    assert (report.reason, report.cycles) == (StopReason.BUDGET_EXHAUSTED, 3)
    assert "max_calls_per_tool=3" in report.detail
    assert world.ran == (3 if wired else 2)


@pytest.mark.parametrize(
    "reply",
    [
        {"content": ""},
        {"content": "The answer is", "response_metadata": {"finish_reason": "length"}},
    ],
)
def test_without_the_tool_edge_a_reply_that_is_no_answer_ends_the_run(
    reply: dict[str, Any],
) -> None:
    """The route cannot send the model back for more: the run ends as the loop ends once
    it asked often enough, and the report says so (``reply`` holds the reply's fields)."""
    from langchain_core.messages import AIMessage, HumanMessage

    from convergent.adapters.langgraph import ToolsCondition

    message = AIMessage(**reply)
    route = ToolsCondition(policy=PLAIN)
    messages: list[AnyMessage] = [HumanMessage("what is the answer?"), message]
    assert route({"messages": messages}) == "__end__"
    report = route.report({"messages": messages})
    assert (report.reason, report.cycles) == (StopReason.MODEL_ERROR, 1)
    assert report.output == message.text


def test_with_the_tool_edge_a_reply_that_is_no_answer_goes_back_to_the_model() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from convergent.adapters.langgraph import ToolsCondition

    route = ToolsCondition(policy=PLAIN)
    route.after_tools("agent")
    cut = AIMessage("The answer is", response_metadata={"finish_reason": "length"})
    messages: list[AnyMessage] = [HumanMessage("what is the answer?"), cut]
    assert route({"messages": messages}) == "agent"
    with pytest.raises(ValueError, match="has not stopped"):
        route.report({"messages": messages})
    messages.append(AIMessage(" forty-two."))
    assert route({"messages": messages}) == "__end__"
    report = route.report({"messages": messages})
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 2)
    assert report.output == "The answer is forty-two."


@pytest.mark.parametrize("named", [False, True], ids=["tools-unnamed", "other-tools-named"])
@pytest.mark.parametrize(
    ("hint", "runs", "why"),
    [
        ({"readOnlyHint": True}, 3, "with the same result"),
        ({"destructiveHint": True}, 2, "with the same arguments"),
        (None, 3, "with the same result"),
    ],
    ids=["read", "write", "none"],
)
async def test_the_tool_node_learns_a_tools_effect_from_its_mcp_annotations(
    hint: dict[str, bool] | None, runs: int, why: str, named: bool
) -> None:
    """The route does not see the tool node: a tool is learned at its first call, with the
    effect the MCP annotations in its metadata declare, whether or not the caller named
    other tools. A write's third identical call stops the run before it runs; a read's
    and an undeclared tool's run and are judged on their result."""
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langgraph import ToolsCondition

    looked: list[str] = []
    route = ToolsCondition(policy=PLAIN, **({"tools": {"other": True}} if named else {}))
    model = langchain_model([(("lookup", {"key": "k"}),)] * 4 + ["k is found"])
    graph = hand_built_graph(model, [annotated_lookup(hint, looked)], route)
    report = route.report(await graph.ainvoke({"messages": [HumanMessage("find k")]}))
    assert report.reason is StopReason.STALLED
    assert why in report.detail
    assert len(looked) == runs


def test_tool_effects_reads_each_tools_mcp_annotations_by_name() -> None:
    from convergent import Effect
    from convergent.adapters.langgraph import tool_effects

    looked: list[str] = []
    provider_tool = {"type": "function", "function": {"name": "search", "parameters": {}}}
    effects = tool_effects([annotated_lookup({"readOnlyHint": True}, looked), provider_tool])
    assert effects == {"lookup": Effect.READ, "search": Effect.UNDECLARED}


@pytest.mark.parametrize(("told", "ran"), [(True, 0), (False, 3)], ids=["told", "learned"])
async def test_a_route_told_the_tool_nodes_effects_knows_a_write_before_its_first_call(
    told: bool, ran: int
) -> None:
    """Three identical writes in the first response: a route given the tool node's effects
    stops before any runs, as convergent's loop does with a declared write; one that only
    learns the tool at its first call judges that batch as undeclared, and all three run."""
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langgraph import ToolsCondition, tool_effects

    looked: list[str] = []
    lookup = annotated_lookup({"destructiveHint": True}, looked)
    route = ToolsCondition(policy=PLAIN, **({"tools": tool_effects([lookup])} if told else {}))
    model = langchain_model([(("lookup", {"key": "k"}),) * 3, "k is found"])
    graph = hand_built_graph(model, [lookup], route)
    report = route.report(await graph.ainvoke({"messages": [HumanMessage("find k")]}))
    assert report.reason is StopReason.STALLED
    assert "with the same arguments" in report.detail
    assert len(looked) == ran
