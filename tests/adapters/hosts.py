"""Run a `Trajectory` through convergent's loop or a host framework with its own test double.

Each host records what its test double received (`Seen`), so that an ending says which
notes reached the model and what output cap the final request carried.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from convergent import Agent, Effect, ScriptedModel, tool
from convergent.clock import use_clock
from convergent.messages import ModelResponse, ToolCall, Usage
from convergent.output import OutputSpec

from .trajectories import (
    EFFECTS,
    TERMINAL,
    USAGE,
    Cut,
    Ending,
    Report,
    Seen,
    Step,
    TestClock,
    Trajectory,
    World,
    ending,
    needs_citation,
)


def _verifier(trajectory: Trajectory) -> Any:
    return needs_citation if trajectory.verifier else None


def _policy(trajectory: Trajectory) -> dict[str, Any]:
    """The trajectory's limits and stop policy, as every adapter takes them."""
    return {
        "limits": trajectory.limits,
        "policy": trajectory.policy,
        "tools": trajectory.declarations(),
        "terminal_tools": TERMINAL,
        "verifier": _verifier(trajectory),
        "price": trajectory.price,
        **({"output": OutputSpec.of_type(Report)} if trajectory.typed else {}),
    }


def _ending(report: Any, seen: list[Seen], world: World) -> Ending:
    return ending(
        report.reason, report.cycles, report.output, report.output_after_stop, seen, world.ran
    )


# -- convergent's own loop ----------------------------------------------------------------


def timed(run: Callable[[Trajectory, World], Awaitable[Ending]]) -> Callable[..., Any]:
    """``run`` on a `TestClock` that its driver reads and its tools wait on."""

    async def on_the_clock(trajectory: Trajectory) -> Ending:
        clock = TestClock()
        with use_clock(clock):
            return await run(trajectory, World(clock))

    return on_the_clock


_FLAGS: dict[Effect, tuple[bool | None, bool]] = {
    Effect.READ: (True, False),
    Effect.IDEMPOTENT: (False, True),
    Effect.WRITE: (False, False),
    Effect.UNDECLARED: (None, False),
}
"""Each effect as ``@tool``'s flags (``read_only``, ``idempotent``)."""


def _loop_tool(function: Callable[..., str], name: str, effect: Effect) -> Any:
    """A world's method as convergent's tool, with its declared effect."""
    read_only, idempotent = _FLAGS[effect]
    return tool(read_only=read_only, idempotent=idempotent, terminal=name in TERMINAL)(function)


@timed
async def run_loop(trajectory: Trajectory, world: World) -> Ending:
    tools = [
        _loop_tool(getattr(world, name), name, effect)
        for name, effect in trajectory.effects().items()
    ]
    ids = (f"call_{n}" for n in itertools.count())

    def response(n: int, step: Step) -> ModelResponse:
        tokens = trajectory.usage_at(n)
        usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1], requests=1)
        if isinstance(step, str):
            finish = "length" if isinstance(step, Cut) else "stop"
            return ModelResponse(content=str(step), usage=usage, finish_reason=finish)
        calls = tuple(ToolCall(id=next(ids), name=n, arguments=dict(a)) for n, a in step)
        return ModelResponse(tool_calls=calls, usage=usage)

    model = ScriptedModel(
        [response(n, step) for n, step in enumerate(trajectory.steps)], price=trajectory.price
    )
    agent = Agent(
        model,
        tools,
        limits=trajectory.limits,
        policy=trajectory.policy,
        verifier=_verifier(trajectory),
        output_type=Report if trajectory.typed else None,
    )
    result = await agent.run("the task")
    seen = [
        (repr(request.messages), request.settings.max_tokens if request.settings else None)
        for request in model.requests
    ]
    return ending(
        result.stop_reason,
        result.cycles,
        result.output,
        result.output_after_stop,
        seen,
        world.ran,
    )


# -- LangChain create_agent and hand-built LangGraph graphs ---------------------------------


def langchain_model(
    steps: list[Step],
    seen: list[Seen] | None = None,
    max_tokens: int | None = None,
    usage: tuple[int, int] = USAGE,
    growth: int = 0,
) -> Any:
    """LangChain's list fake, able to take tools as its tool-calling models do, and failing
    on a request past the end of its script."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    class ToolCallingFake(FakeMessagesListChatModel):
        served: int = 0
        max_tokens: int | None = None
        """The model's own output cap, as chat models keep it."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.bind(**kwargs) if kwargs else self

        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            if seen is not None:
                seen.append((repr(messages), kwargs.get("max_tokens")))
            if self.served == len(self.responses):  # the list fake would start over
                raise RuntimeError(f"request {self.served + 1} is past the end of the script")
            self.served += 1
            return super()._generate(messages, *args, **kwargs)

    ids = (f"call_{n}" for n in itertools.count())

    def counts(n: int) -> Any:
        tokens = (usage[0] + growth * n, usage[1])
        return {"input_tokens": tokens[0], "output_tokens": tokens[1], "total_tokens": sum(tokens)}

    messages = [
        AIMessage(
            str(step),
            usage_metadata=counts(n),
            response_metadata={"finish_reason": "length" if isinstance(step, Cut) else "stop"},
        )
        if isinstance(step, str)
        else AIMessage(
            "",
            tool_calls=[{"name": c, "args": dict(a), "id": next(ids)} for c, a in step],
            usage_metadata=counts(n),
        )
        for n, step in enumerate(steps)
    ]
    return ToolCallingFake(responses=messages, max_tokens=max_tokens)


def langchain_tools(world: World) -> list[Any]:
    from langchain_core.tools import StructuredTool

    return [StructuredTool.from_function(getattr(world, name)) for name in EFFECTS]


MCP_HINTS = pytest.mark.parametrize(
    ("hint", "runs"),
    [
        ({"readOnlyHint": True}, 3),
        ({"idempotentHint": True}, 3),
        ({"destructiveHint": True}, 2),
        (None, 3),
    ],
    ids=["read-only", "idempotent", "destructive", "unknown"],
)
"""A tool's MCP annotations (None: none), and how many of three identical calls of it run:
a read's, an idempotent one's and an undeclared one's each time (judged on their result),
a write's third is held back before it runs."""


def annotated_lookup(hint: dict[str, bool] | None, looked: list[str]) -> Any:
    """A LangChain tool that records each key it looks up, with ``hint`` (MCP annotations)
    in its metadata as ``langchain-mcp-adapters`` puts them there: the protocol's keys,
    beside the ``title`` and ``openWorldHint`` it copies too."""
    from langchain_core.tools import StructuredTool

    def lookup(key: str) -> str:
        """Look a key up."""
        looked.append(key)
        return "found"

    metadata = {"title": None, "openWorldHint": None, **hint} if hint else None
    return StructuredTool.from_function(lookup, metadata=metadata)


@timed
async def run_langchain(trajectory: Trajectory, world: World) -> Ending:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langchain import ConvergenceMiddleware

    middleware = ConvergenceMiddleware(**_policy(trajectory))
    seen: list[Seen] = []
    model = langchain_model(
        trajectory.steps, seen, usage=trajectory.usage, growth=trajectory.growth
    )
    agent = create_agent(model, langchain_tools(world), middleware=[middleware])
    result = await agent.ainvoke({"messages": [HumanMessage("the task")]}, {"recursion_limit": 200})
    return _ending(result["stop_report"], seen, world)


def hand_built_graph(model: Any, tools: list[Any], route: Any) -> Any:
    """The graph of LangGraph's own agent tutorial, with ``route`` as its condition (and,
    for convergent's route, its node for the answer after a stop, its tools' edge and
    its tool wrappers)."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from convergent.adapters.langgraph import awrap_tool_call as awrap
    from convergent.adapters.langgraph import wrap_tool_call as wrap

    bound = model.bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    ours = hasattr(route, "final_answer")
    wrapped = (route.wrap_tool_call, route.awrap_tool_call) if ours else (wrap, awrap)
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node(
        "tools", ToolNode(tools, wrap_tool_call=wrapped[0], awrap_tool_call=wrapped[1])
    )
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route)
    if ours:
        builder.add_node("final_answer", route.final_answer(model))
        builder.add_conditional_edges("tools", route.after_tools("agent"))
    else:
        builder.add_edge("tools", "agent")
    return builder.compile()


@timed
async def run_langgraph(trajectory: Trajectory, world: World) -> Ending:
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langgraph import ToolsCondition

    route = ToolsCondition(**_policy(trajectory))
    seen: list[Seen] = []
    model = langchain_model(
        trajectory.steps, seen, usage=trajectory.usage, growth=trajectory.growth
    )
    graph = hand_built_graph(model, langchain_tools(world), route)
    state = await graph.ainvoke({"messages": [HumanMessage("the task")]}, {"recursion_limit": 200})
    return _ending(route.report(state), seen, world)


# -- OpenAI Agents SDK ----------------------------------------------------------------------


@timed
async def run_openai_agents(trajectory: Trajectory, world: World) -> Ending:
    from agents import Agent as SdkAgent
    from agents import function_tool
    from agents.testing import ModelStep, assistant_message, function_call
    from agents.testing import ScriptedModel as SdkScriptedModel
    from agents.usage import Usage as SdkUsage

    from convergent.adapters.openai_agents import run

    ids = (f"call_{n}" for n in itertools.count())

    def step_of(n: int, step: Step) -> ModelStep:
        tokens = trajectory.usage_at(n)
        usage = SdkUsage(requests=1, input_tokens=tokens[0], output_tokens=tokens[1])
        if isinstance(step, str):
            message = assistant_message(str(step))
            if isinstance(step, Cut):  # the Responses API's mark of a reply cut short
                message = message.model_copy(update={"status": "incomplete"})
            return ModelStep(output=[message], usage=usage)
        calls = [function_call(n, dict(a), call_id=next(ids)) for n, a in step]
        return ModelStep(output=calls, usage=usage)

    tools = [function_tool(getattr(world, name)) for name in EFFECTS]
    model = SdkScriptedModel([step_of(n, step) for n, step in enumerate(trajectory.steps)])
    agent = SdkAgent(name="agent", model=model, tools=tools)
    ran = await run(agent, "the task", **_policy(trajectory))
    assert ran.final_output == ran.report.output
    seen = [
        (json.dumps(call.input, default=str), call.model_settings.max_tokens)
        for call in model.calls
    ]
    return _ending(ran.report, seen, world)


# -- PydanticAI ----------------------------------------------------------------------------


def pydantic_ai_function(
    steps: list[Step],
    seen: list[Seen] | None = None,
    usage: tuple[int, int] = USAGE,
    growth: int = 0,
) -> Callable[..., Any]:
    from pydantic_ai.messages import ModelResponse as PaiResponse
    from pydantic_ai.messages import TextPart, ToolCallPart
    from pydantic_ai.usage import RequestUsage

    ids = (f"call_{n}" for n in itertools.count())

    def counts(n: int) -> RequestUsage:
        return RequestUsage(input_tokens=usage[0] + growth * n, output_tokens=usage[1])

    responses = iter(
        [
            PaiResponse(
                parts=[TextPart(str(step))] if step else [],
                usage=counts(n),
                finish_reason="length" if isinstance(step, Cut) else "stop",
            )
            if isinstance(step, str)
            else PaiResponse(
                parts=[ToolCallPart(c, dict(a), tool_call_id=next(ids)) for c, a in step],
                usage=counts(n),
                finish_reason="tool_call",
            )
            for n, step in enumerate(steps)
        ]
    )

    def respond(messages: Any, info: Any) -> PaiResponse:
        if seen is not None:
            seen.append((repr(messages), (info.model_settings or {}).get("max_tokens")))
        return next(responses)

    return respond


@timed
async def run_pydantic_ai(trajectory: Trajectory, world: World) -> Ending:
    from pydantic_ai import Agent as PaiAgent
    from pydantic_ai.models.function import FunctionModel

    from convergent.adapters.pydantic_ai import Convergence

    convergence = Convergence(**_policy(trajectory))
    seen: list[Seen] = []
    agent = PaiAgent(
        FunctionModel(
            pydantic_ai_function(trajectory.steps, seen, trajectory.usage, trajectory.growth)
        ),
        tools=[getattr(world, name) for name in EFFECTS],
        capabilities=[convergence],
    )
    result = await agent.run("the task")
    report = convergence.report_for(result)
    assert result.output == report.output
    return _ending(report, seen, world)


HOSTS: dict[str, Callable[[Trajectory], Awaitable[Ending]]] = {
    "loop": run_loop,
    "langchain": run_langchain,
    "langgraph": run_langgraph,
    "openai_agents": run_openai_agents,
    "pydantic_ai": run_pydantic_ai,
}
