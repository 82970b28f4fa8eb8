"""Per-cycle cost each adapter adds to its host, against the host alone in the same process.

Each host runs the same scripted run of CYCLES distinct reads and an answer with its own
test double, first alone, then with convergent's adapter; the difference per cycle is
the adapter's cost, reported as a share of the host's own per-cycle cost (target <= 5 %).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import set_tracing_disabled  # noqa: E402
from tests.adapters.hosts import (  # noqa: E402
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


async def langchain(adapter: bool) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langchain import ConvergenceMiddleware

    middleware = [ConvergenceMiddleware(LIMITS, tools=READ_ONLY)] if adapter else []
    agent = create_agent(langchain_model(STEPS), langchain_tools(World()), middleware=middleware)
    await agent.ainvoke({"messages": [HumanMessage("task")]}, {"recursion_limit": 500})


async def pydantic_ai(adapter: bool) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from convergent.adapters.pydantic_ai import Convergence

    world = World()
    capabilities = [Convergence(LIMITS, tools=READ_ONLY)] if adapter else []
    agent = Agent(
        FunctionModel(pydantic_ai_function(STEPS)),
        tools=[getattr(world, name) for name in READ_ONLY],
        capabilities=capabilities,
    )
    await agent.run("task")


async def openai_agents(adapter: bool) -> None:
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
    if adapter:
        await run(agent, "task", limits=LIMITS, tools=READ_ONLY)
    else:
        await Runner.run(agent, "task", max_turns=CYCLES + 5)


async def timed(host: Callable[[bool], Awaitable[None]], adapter: bool) -> float:
    started = time.perf_counter()
    await host(adapter)
    return (time.perf_counter() - started) / CYCLES


async def measure(host: Callable[[bool], Awaitable[None]]) -> dict[str, float]:
    await timed(host, False)
    await timed(host, True)  # warm both paths
    alone, with_adapter = [], []
    for _ in range(REPEATS):
        alone.append(await timed(host, False))
        with_adapter.append(await timed(host, True))
    base, total = statistics.median(alone), statistics.median(with_adapter)
    return {
        "host_ms_per_cycle": round(base * 1000, 3),
        "adapter_ms_per_cycle": round((total - base) * 1000, 3),
        "adapter_share": round((total - base) / base, 4),
    }


async def main() -> None:
    set_tracing_disabled(True)
    report: dict[str, object] = {"load_average": os.getloadavg(), "cycles": CYCLES}
    for name, host in (
        ("langchain", langchain),
        ("openai_agents", openai_agents),
        ("pydantic_ai", pydantic_ai),
    ):
        report[name] = await measure(host)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
