"""Per-cycle cost each adapter adds to its host, against the host alone in the same process.

Each host runs the same scripted run of CYCLES distinct reads and an answer with its own
test double, three ways: alone; with a no-op plugged into the same seams the adapter
uses (what the host charges for those seams: for LangChain, its middleware hooks); and
with convergent's adapter. Each agent is built before the clock starts: a cycle's cost
is the run's, not the build's. The adapter's cost per cycle splits into the seams' share
and convergent's own (adapter minus no-op), each reported as a share of the host's own
per-cycle cost (target: <= 5 % in all), in wall time and in the process's CPU time (which
other processes on a busy machine disturb less). The three ways run one after the other
in each repeat, and each share is the median of the repeats' own shares, with its
quartiles: on a shared machine whose load moves, pairs compare like with like; the
least run of each way is given too (``least_shares``: seams, convergent, in all), which
other processes' work disturbs least.

LangChain runs three ways (``ainvoke``; ``invoke``; ``ainvoke`` with LangSmith's set-up
of each traced hook call made on the event loop, as docs/adapters.md shows), then three
finer figures: what each middleware seam costs the agent by itself (a no-op with only
that hook, against the agent alone); what one call of a ``wrap_*`` hook costs in itself
(``create_agent`` wraps every such hook in LangSmith's ``traceable``, which does its
work even with tracing off); and convergent's own work per model call, replayed outside
the agent on the requests a run made (no graph around it, so no noise from it).
Run: ``PYTHONPATH=src python benchmarks/bench_adapters.py [--host NAME ...] [--repeats N]
[--no-details]``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.adapters.hosts import (  # noqa: E402
    hand_built_graph,
    langchain_model,
    langchain_tools,
    pydantic_ai_function,
)
from tests.adapters.trajectories import EFFECTS, World  # noqa: E402

from convergent import Limits  # noqa: E402

CYCLES = 40
REPEATS = 11
HOOK_CALLS = 2000
STEPS = [*[(("read_file", {"path": f"part{n}.txt"}),) for n in range(CYCLES - 1)], "done"]
LIMITS = Limits(max_cycles=CYCLES + 5)

Way = Literal["host", "seams", "adapter"]
"""The host alone, with a no-op in the adapter's seams, or with the adapter."""

Run = Callable[[], Awaitable[object]]
"""One scripted run of a host that is already built (what the clock measures)."""


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
        "adapter": [ConvergenceMiddleware(LIMITS, tools=EFFECTS)],
    }[way]
    return create_agent(langchain_model(STEPS), langchain_tools(World()), middleware=middleware)


def _task() -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    return {"messages": [HumanMessage("task")]}


def langchain(way: Way) -> Run:
    """``ainvoke``: each async ``wrap_*`` hook call is traced by LangSmith's ``traceable``,
    which moves its set-up and its end to a worker thread (even with tracing off)."""
    agent = _langchain_agent(way)
    return lambda: agent.ainvoke(_task(), {"recursion_limit": 500})


def langchain_sync(way: Way) -> Run:
    """``invoke`` (the sync hooks; the same scripted run)."""
    agent = _langchain_agent(way)

    async def run() -> None:
        agent.invoke(_task(), {"recursion_limit": 500})

    return run


async def _inline_when_untraced(
    default: Callable[..., Awaitable[Any]], context: Any, func: Any, /, *args: Any, **kwargs: Any
) -> Any:
    """LangSmith's ``aio_to_thread``, run on the event loop while nothing is traced."""
    from langsmith.utils import tracing_is_enabled

    if context.run(tracing_is_enabled):
        return await default(context, func, *args, **kwargs)
    return context.run(func, *args, **kwargs)


def langchain_inline(way: Way) -> Run:
    """``ainvoke`` with LangSmith's set-up and end of each traced hook call made on the
    event loop (``langsmith.set_runtime_overrides``), as docs/adapters.md shows."""
    import langsmith

    run = langchain(way)

    async def inline() -> None:
        langsmith.set_runtime_overrides(aio_to_thread=_inline_when_untraced)
        try:
            await run()
        finally:
            langsmith.set_runtime_overrides()

    return inline


def langgraph(way: Way) -> Run:
    """The tutorial's graph: with ``tools_condition`` and the module's tool wrappers; with
    the shape the adapter needs, every piece a no-op (a routing function in place of
    ``tools_condition``, the tools' edge back to the model, the tool wrappers, the answer
    node); and with the adapter's route and its pieces."""
    from langgraph.prebuilt import tools_condition

    from convergent.adapters.langgraph import ToolsCondition

    model, tools = langchain_model(STEPS), langchain_tools(World())
    if way == "host":
        graph = hand_built_graph(model, tools, tools_condition)
    elif way == "seams":
        graph = hand_built_graph(model, tools, _LangGraphNoop())
    else:
        graph = hand_built_graph(model, tools, ToolsCondition(LIMITS, tools=EFFECTS))
    return lambda: graph.ainvoke(_task(), {"recursion_limit": 500})


class _LangGraphNoop:
    """The pieces of a graph `ToolsCondition` uses, doing only what ``tools_condition`` does."""

    def __call__(self, state: Any) -> str:
        from langgraph.prebuilt import tools_condition

        return tools_condition(state)

    def after_tools(self, model_node: str) -> Callable[[Any], str]:
        return lambda state: model_node

    def final_answer(self, model: Any) -> Any:
        from langchain_core.runnables import RunnableLambda

        return RunnableLambda(lambda state: {}, name="final_answer")

    @property
    def wrap_tool_call(self) -> Callable[..., Any]:
        return lambda request, handler: handler(request)

    @property
    def awrap_tool_call(self) -> Callable[..., Any]:
        async def passing(request: Any, handler: Any) -> Any:
            return await handler(request)

        return passing


def _pydantic_ai_noop() -> Any:
    from pydantic_ai.capabilities import AbstractCapability

    class Noop(AbstractCapability[Any]):
        """The hooks the Convergence capability uses, doing nothing."""

        async def after_node_run(self, ctx: Any, *, node: Any, result: Any) -> Any:
            return result

        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            return request_context

        async def wrap_tool_execute(
            self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
        ) -> Any:
            return await handler(args)

    return Noop()


def pydantic_ai(way: Way) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from convergent.adapters.pydantic_ai import Convergence

    world = World()
    capabilities = {
        "host": [],
        "seams": [_pydantic_ai_noop()],
        "adapter": [Convergence(LIMITS, tools=EFFECTS)],
    }[way]
    agent = Agent(
        FunctionModel(pydantic_ai_function(STEPS)),
        tools=[getattr(world, name) for name in EFFECTS],
        capabilities=capabilities,
    )
    return lambda: agent.run("task")


def openai_agents(way: Way) -> Run:
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
        tools=[function_tool(getattr(world, name)) for name in EFFECTS],
    )
    if way == "adapter":
        return lambda: run(agent, "task", limits=LIMITS, tools=EFFECTS)
    if way == "seams":
        return _openai_agents_noop(agent)
    return lambda: Runner.run(agent, "task", max_turns=CYCLES + 5)


def _openai_agents_noop(agent: Any) -> Run:
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
    clone = agent.clone(tools=tools, tool_use_behavior=behaviour)
    return lambda: Runner.run(clone, "task", hooks=Hooks(), run_config=config, max_turns=CYCLES + 5)


async def timed(host: Callable[[Any], Run], way: Any) -> tuple[float, float]:
    """Seconds per cycle of one run, in wall time and in the process's CPU time."""
    run = host(way)
    wall, cpu = time.perf_counter(), time.process_time()
    await run()
    return (time.perf_counter() - wall) / CYCLES, (time.process_time() - cpu) / CYCLES


def shares(runs: list[tuple[float, float, float]]) -> dict[str, Any]:
    """A host's per-cycle figures from paired runs (host, seams, adapter, in seconds).

    Milliseconds are medians over the runs; each share is the median of the shares of
    the runs made one after the other (so that a load that changes between pairs
    changes less), with its quartiles.
    """
    base = statistics.median(r[0] for r in runs)
    seams = statistics.median(r[1] - r[0] for r in runs)
    own = statistics.median(r[2] - r[1] for r in runs)

    def share(part: Callable[[tuple[float, float, float]], float]) -> list[float]:
        quartiles = statistics.quantiles((part(r) / r[0] for r in runs), n=4)
        middle = statistics.median(part(r) / r[0] for r in runs)
        return [round(middle, 4), round(quartiles[0], 4), round(quartiles[2], 4)]

    least = [min(r[index] for r in runs) for index in range(3)]
    return {
        "host_ms_per_cycle": round(base * 1000, 3),
        "seams_ms_per_cycle": round(seams * 1000, 3),
        "convergent_ms_per_cycle": round(own * 1000, 3),
        "seams_share": share(lambda r: r[1] - r[0]),
        "convergent_share": share(lambda r: r[2] - r[1]),
        "adapter_share": share(lambda r: r[2] - r[0]),
        # the least run of each way: what others' work on a busy machine adds least to
        "least_ms_per_cycle": [round(value * 1000, 3) for value in least],
        "least_shares": [
            round((least[1] - least[0]) / least[0], 4),
            round((least[2] - least[1]) / least[0], 4),
            round((least[2] - least[0]) / least[0], 4),
        ],
    }


async def paired(
    host: Callable[[Any], Run], ways: tuple[Any, ...]
) -> list[list[tuple[float, float]]]:
    """Each repeat's seconds per cycle (wall, CPU) of every way, run one after the other."""
    for way in ways:
        await timed(host, way)  # warm every path
    return [[await timed(host, way) for way in ways] for _ in range(REPEATS)]


async def medians(host: Callable[[Any], Run], ways: tuple[Any, ...]) -> list[tuple[float, float]]:
    """Each way's median seconds per cycle (wall, CPU), the ways' runs interleaved."""
    runs = await paired(host, ways)
    return [
        (
            statistics.median(run[index][0] for run in runs),
            statistics.median(run[index][1] for run in runs),
        )
        for index in range(len(ways))
    ]


async def measure(host: Callable[[Way], Run]) -> dict[str, dict[str, Any]]:
    runs = await paired(host, ("host", "seams", "adapter"))
    wall = [(a[0], b[0], c[0]) for a, b, c in runs]
    cpu = [(a[1], b[1], c[1]) for a, b, c in runs]
    return {"wall": shares(wall), "cpu": shares(cpu)}


Seam = Literal["none", "wrap_model_call", "wrap_tool_call", "both", "after_model", "before_model"]
"""A no-op LangChain middleware with these hooks (``both``: the two ``wrap_*`` hooks)."""


def _langchain_seam(seam: Seam) -> list[Any]:
    from langchain.agents.middleware import AgentMiddleware

    class Model(AgentMiddleware[Any, Any, Any]):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    class Tool(AgentMiddleware[Any, Any, Any]):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    class AfterModel(AgentMiddleware[Any, Any, Any]):
        def after_model(self, state: Any, runtime: Any) -> None:
            return None

        async def aafter_model(self, state: Any, runtime: Any) -> None:
            return None

    class BeforeModel(AgentMiddleware[Any, Any, Any]):
        def before_model(self, state: Any, runtime: Any) -> None:
            return None

        async def abefore_model(self, state: Any, runtime: Any) -> None:
            return None

    return {
        "none": [],
        "wrap_model_call": [Model()],
        "wrap_tool_call": [Tool()],
        "both": [_langchain_noop()],
        "after_model": [AfterModel()],
        "before_model": [BeforeModel()],
    }[seam]


async def langchain_seams(sync: bool) -> dict[str, dict[str, float]]:
    """What each LangChain middleware seam costs by itself, as a no-op, per cycle (a share
    of the agent's own cycle, in wall and CPU time): the hooks an adapter could use."""
    from langchain.agents import create_agent

    def host(seam: Seam) -> Run:
        model, tools = langchain_model(STEPS), langchain_tools(World())
        agent: Any = create_agent(model, tools, middleware=_langchain_seam(seam))
        if not sync:
            return lambda: agent.ainvoke(_task(), {"recursion_limit": 500})

        async def run() -> None:
            agent.invoke(_task(), {"recursion_limit": 500})

        return run

    seams: tuple[Seam, ...] = (
        "none",
        "wrap_model_call",
        "wrap_tool_call",
        "both",
        "after_model",
        "before_model",
    )
    found = dict(zip(seams, await medians(host, seams), strict=True))
    wall, cpu = found.pop("none")
    return {
        seam: {
            "wall_ms_per_cycle": round((w - wall) * 1000, 3),
            "wall_share": round((w - wall) / wall, 4),
            "cpu_ms_per_cycle": round((c - cpu) * 1000, 3),
            "cpu_share": round((c - cpu) / cpu, 4),
        }
        for seam, (w, c) in found.items()
    }


async def _per_call(call: Callable[[], Awaitable[object]], calls: int) -> dict[str, float]:
    """Microseconds per call, wall and CPU: the least of REPEATS batches (what the work
    takes when nothing else on the machine gets in its way)."""
    walls, cpus = [], []
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            await call()
        walls.append((time.perf_counter() - wall) / calls)
        cpus.append((time.process_time() - cpu) / calls)
    return {"wall_us": round(min(walls) * 1e6, 1), "cpu_us": round(min(cpus) * 1e6, 1)}


async def langchain_hook_call() -> dict[str, dict[str, float]]:
    """One call of a no-op ``wrap_*`` hook as ``create_agent`` makes it (wrapped in
    ``traceable``, tracing off), against the same call unwrapped."""
    from langsmith import traceable

    def hook(request: object, handler: Callable[[object], object]) -> object:
        return handler(request)

    async def ahook(request: object, handler: Callable[[object], Awaitable[object]]) -> object:
        return await handler(request)

    async def ahandler(request: object) -> object:
        return request

    def handler(request: object) -> object:
        return request

    def synchronous(hook: Callable[..., object]) -> Callable[[], Awaitable[object]]:
        async def call() -> object:
            return hook(None, handler)

        return call

    import langsmith

    traced = traceable(name="Noop.wrap_model_call")(hook)
    atraced = traceable(name="Noop.awrap_model_call")(ahook)
    calls = HOOK_CALLS // REPEATS
    report = {
        "sync_plain": await _per_call(synchronous(hook), calls),
        "sync_traced": await _per_call(synchronous(traced), calls),
        "async_plain": await _per_call(lambda: ahook(None, ahandler), calls),
        "async_traced": await _per_call(lambda: atraced(None, ahandler), calls),
    }
    langsmith.set_runtime_overrides(aio_to_thread=_inline_when_untraced)
    try:
        report["async_traced_inline"] = await _per_call(lambda: atraced(None, ahandler), calls)
    finally:
        langsmith.set_runtime_overrides()
    return report


def _given(response: Any, request: Any) -> Any:
    """A model handler that answers with a response made earlier."""
    return response


def langchain_own_work() -> dict[str, float]:
    """Convergent's work per model call: the requests of one run, replayed through
    ``ConvergenceMiddleware.wrap_model_call`` and through a pass-through, no agent around
    (CPU time, the least of many replays)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware

    from convergent.adapters.langchain import ConvergenceMiddleware

    made: list[tuple[Any, Any]] = []

    class Recorder(AgentMiddleware[Any, Any, Any]):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            response = handler(request)
            made.append((request, response))
            return response

    agent: Any = create_agent(
        langchain_model(STEPS), langchain_tools(World()), middleware=[Recorder()]
    )
    agent.invoke(_task(), {"recursion_limit": 500})

    def replay(middleware: Any) -> float:
        book = None
        started = time.process_time()
        for request, response in made:
            state = request.state if book is None else {**request.state, "convergence_run": book}
            answer = functools.partial(_given, response)
            result = middleware.wrap_model_call(request.override(state=state), answer)
            update = getattr(getattr(result, "command", None), "update", None) or {}
            book = update.get("convergence_run", book)
        return (time.process_time() - started) / len(made)

    passing = _langchain_noop()
    runs: dict[str, list[float]] = {"pass_through": [], "convergent": []}
    for _ in range(REPEATS * 10):
        runs["pass_through"].append(replay(passing))
        runs["convergent"].append(replay(ConvergenceMiddleware(LIMITS, tools=EFFECTS)))
    through, ours = (min(runs[name]) for name in ("pass_through", "convergent"))
    return {
        "pass_through_cpu_us": round(through * 1e6, 1),
        "convergent_cpu_us": round(ours * 1e6, 1),
        "convergent_work_cpu_us": round((ours - through) * 1e6, 1),
    }


def langgraph_own_work() -> dict[str, float]:
    """Convergent's work per cycle in a LangGraph graph: the states of one run routed
    through `ToolsCondition`, its tools' edge and its tool wrapper's look-up, outside the
    graph (CPU time, the least of many replays: others' work disturbs it least)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from convergent.adapters.langgraph import ToolsCondition

    usage: Any = {"input_tokens": 1000, "output_tokens": 100, "total_tokens": 1100}
    states: list[tuple[str, list[Any]]] = []
    messages: list[Any] = [HumanMessage("task")]
    for n in range(CYCLES - 1):
        call = {"name": "read_file", "args": {"path": f"part{n}.txt"}, "id": f"c{n}"}
        messages = [*messages, AIMessage("", tool_calls=[call], usage_metadata=usage)]
        states.append(("route", messages))
        states.append(("wrapper", messages))
        result = ToolMessage(f"contents of part{n}.txt", tool_call_id=f"c{n}", name="read_file")
        messages = [*messages, result]
        states.append(("after_tools", messages))
    states.append(("route", [*messages, AIMessage("done", usage_metadata=usage)]))

    def replay() -> float:
        route = ToolsCondition(LIMITS, tools=EFFECTS)
        back = route.after_tools("agent")
        wrapper = route.wrap_tool_call
        started = time.process_time()
        for kind, state in states:
            if kind == "route":
                route({"messages": state})
            elif kind == "after_tools":
                back({"messages": state})
            else:
                call = state[-1].tool_calls[0]
                request = ToolCallRequest(call, None, {"messages": state}, None)  # type: ignore[arg-type]
                wrapper(request, lambda request: None)
        return (time.process_time() - started) / CYCLES

    least = min(replay() for _ in range(REPEATS * 10))
    return {"convergent_cpu_us_per_cycle": round(least * 1e6, 1)}


HOSTS: dict[str, Callable[[Way], Run]] = {
    "langchain": langchain,
    "langchain_sync": langchain_sync,
    "langchain_inline": langchain_inline,
    "langgraph": langgraph,
    "openai_agents": openai_agents,
    "pydantic_ai": pydantic_ai,
}


async def main(hosts: list[str], details: bool) -> None:
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    report: dict[str, object] = {
        "load_average": os.getloadavg(),
        "cycles": CYCLES,
        "repeats": REPEATS,
    }
    for name in hosts:
        report[name] = await measure(HOSTS[name])
    if details:
        report["langchain_seams_ainvoke"] = await langchain_seams(sync=False)
        report["langchain_seams_invoke"] = await langchain_seams(sync=True)
        report["langchain_hook_call"] = await langchain_hook_call()
        report["langchain_convergent_per_model_call"] = langchain_own_work()
        report["langgraph_convergent_per_cycle"] = langgraph_own_work()
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", action="append", choices=sorted(HOSTS), help="(repeatable)")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="paired runs per way")
    parser.add_argument(
        "--no-details", action="store_true", help="skip LangChain's per-seam figures"
    )
    arguments = parser.parse_args()
    REPEATS = arguments.repeats
    asyncio.run(main(arguments.host or list(HOSTS), not arguments.no_details))
