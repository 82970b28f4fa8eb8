"""Per-cycle cost each adapter adds to its host, against the host alone in the same process.

Each host runs the same scripted run of CYCLES distinct reads and an answer with its own
test double, three ways: alone; with a no-op plugged into the same seams the adapter
uses (what the host charges for those seams: for LangChain, its middleware hooks); and
with convergent's adapter. The adapter's cost per cycle splits into the seams' share
and convergent's own (adapter minus no-op), each reported as a share of the host's own
per-cycle cost (target: <= 5 % in all).
Run: ``PYTHONPATH=src python benchmarks/bench_adapters.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import set_tracing_disabled  # noqa: E402
from tests.adapters.hosts import (  # noqa: E402
    hand_built_graph,
    langchain_model,
    langchain_tools,
    pydantic_ai_function,
)
from tests.adapters.trajectories import READ_ONLY, World  # noqa: E402

from convergent import Limits  # noqa: E402

CYCLES = 40
REPEATS = 7
STEPS = [*[(("read_file", {"path": f"part{n}.txt"}),) for n in range(CYCLES - 1)], "done"]
LIMITS = Limits(max_cycles=CYCLES + 5)

Way = Literal["host", "seams", "adapter"]
"""The host alone, with a no-op in the adapter's seams, or with the adapter."""


def _langchain_noop() -> Any:
    from langchain.agents.middleware import AgentMiddleware

    class Noop(AgentMiddleware[Any, Any, Any]):
        """The seams ConvergenceMiddleware uses, doing nothing."""

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    return Noop()


def _langchain_agent(way: Way) -> Any:
    from langchain.agents import create_agent

    from convergent.adapters.langchain import ConvergenceMiddleware

    middleware = {
        "host": [],
        "seams": [_langchain_noop()],
        "adapter": [ConvergenceMiddleware(LIMITS, tools=READ_ONLY)],
    }[way]
    return create_agent(langchain_model(STEPS), langchain_tools(World()), middleware=middleware)


async def langchain(way: Way) -> None:
    """``ainvoke``: each async ``wrap_*`` hook call is traced by LangSmith's ``traceable``,
    which moves its set-up and its end to a worker thread (even with tracing off)."""
    from langchain_core.messages import HumanMessage

    agent = _langchain_agent(way)
    await agent.ainvoke({"messages": [HumanMessage("task")]}, {"recursion_limit": 500})


async def langchain_sync(way: Way) -> None:
    """``invoke`` (the sync hooks; the same scripted run)."""
    from langchain_core.messages import HumanMessage

    agent = _langchain_agent(way)
    agent.invoke({"messages": [HumanMessage("task")]}, {"recursion_limit": 500})


async def langgraph(way: Way) -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.prebuilt import tools_condition

    from convergent.adapters.langgraph import ToolsCondition

    # no seam is added: the routing function replaces LangGraph's own
    route = ToolsCondition(Limits(max_cycles=CYCLES + 5, stall_nudges=0), tools=READ_ONLY)
    condition = route if way == "adapter" else tools_condition
    graph = hand_built_graph(langchain_model(STEPS), langchain_tools(World()), condition)
    await graph.ainvoke({"messages": [HumanMessage("task")]}, {"recursion_limit": 500})


def _pydantic_ai_noop() -> Any:
    from pydantic_ai.capabilities import AbstractCapability

    class Noop(AbstractCapability[Any]):
        """The hooks the Convergence capability uses, doing nothing."""

        async def wrap_node_run(self, ctx: Any, *, node: Any, handler: Any) -> Any:
            return await handler(node)

        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            return request_context

        async def wrap_tool_execute(
            self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
        ) -> Any:
            return await handler(args)

    return Noop()


async def pydantic_ai(way: Way) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from convergent.adapters.pydantic_ai import Convergence

    world = World()
    capabilities = {
        "host": [],
        "seams": [_pydantic_ai_noop()],
        "adapter": [Convergence(LIMITS, tools=READ_ONLY)],
    }[way]
    agent = Agent(
        FunctionModel(pydantic_ai_function(STEPS)),
        tools=[getattr(world, name) for name in READ_ONLY],
        capabilities=capabilities,
    )
    await agent.run("task")


async def openai_agents(way: Way) -> None:
    from agents import Agent, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from convergent.adapters.openai_agents import run

    world = World()
    steps = [
        [assistant_message(step)]
        if isinstance(step, str)
        else [function_call(n, dict(a), call_id=f"c{i}") for n, a in step]
        for i, step in enumerate(STEPS)
    ]
    agent = Agent(
        name="a",
        model=ScriptedModel(steps),
        tools=[function_tool(getattr(world, name)) for name in READ_ONLY],
    )
    if way == "adapter":
        await run(agent, "task", limits=LIMITS, tools=READ_ONLY)
    elif way == "seams":
        await _openai_agents_noop(agent)
    else:
        await Runner.run(agent, "task", max_turns=CYCLES + 5)


async def _openai_agents_noop(agent: Any) -> None:
    """The seams the adapter uses (hooks, a tool guardrail, ``tool_use_behavior``, the
    error formatter and the input filter), doing nothing."""
    import dataclasses

    from agents import (
        RunConfig,
        RunHooks,
        Runner,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolsToFinalOutputResult,
    )

    class Hooks(RunHooks[Any]):
        async def on_llm_start(self, *args: Any) -> None:
            pass

        async def on_llm_end(self, *args: Any) -> None:
            pass

    guardrail: Any = ToolInputGuardrail(
        guardrail_function=lambda data: ToolGuardrailFunctionOutput.allow(), name="noop"
    )

    async def behaviour(context: Any, results: Any) -> ToolsToFinalOutputResult:
        return ToolsToFinalOutputResult(is_final_output=False)

    async def keep(data: Any) -> Any:
        return data.model_data

    tools = [dataclasses.replace(t, tool_input_guardrails=[guardrail]) for t in agent.tools]
    config = RunConfig(tool_error_formatter=lambda args: None, call_model_input_filter=keep)
    await Runner.run(
        agent.clone(tools=tools, tool_use_behavior=behaviour),
        "task",
        hooks=Hooks(),
        run_config=config,
        max_turns=CYCLES + 5,
    )


async def timed(host: Callable[[Way], Awaitable[None]], way: Way) -> float:
    started = time.perf_counter()
    await host(way)
    return (time.perf_counter() - started) / CYCLES


async def measure(host: Callable[[Way], Awaitable[None]]) -> dict[str, float]:
    ways: tuple[Way, ...] = ("host", "seams", "adapter")
    for way in ways:
        await timed(host, way)  # warm every path
    runs: dict[Way, list[float]] = {way: [] for way in ways}
    for _ in range(REPEATS):
        for way in ways:
            runs[way].append(await timed(host, way))
    base, seams, total = (statistics.median(runs[way]) for way in ways)
    return {
        "host_ms_per_cycle": round(base * 1000, 3),
        "seams_ms_per_cycle": round((seams - base) * 1000, 3),
        "convergent_ms_per_cycle": round((total - seams) * 1000, 3),
        "seams_share": round((seams - base) / base, 4),
        "convergent_share": round((total - seams) / base, 4),
        "adapter_share": round((total - base) / base, 4),
    }


async def main() -> None:
    set_tracing_disabled(True)
    report: dict[str, object] = {"load_average": os.getloadavg(), "cycles": CYCLES}
    for name, host in (
        ("langchain", langchain),
        ("langchain_sync", langchain_sync),
        ("langgraph", langgraph),
        ("openai_agents", openai_agents),
        ("pydantic_ai", pydantic_ai),
    ):
        report[name] = await measure(host)
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
