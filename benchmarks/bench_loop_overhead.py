"""Loop overhead: convergent's per-cycle cost and concurrency against a hand-written loop.

Both loops do the same work per cycle with a zero-cost model and an ``echo`` tool: ask
the model, append its message, validate the call's arguments against the tool's schema,
run the tool, append the result. convergent runs with its default settings (events
recorded, tool timeouts on, stall and limit checks), one agent reused for every run.

1. Per cycle: one run of N cycles, N = 10, 100, 1,000; best of several repeats, in
   process CPU time (what the loop costs, whatever else the machine runs) and in wall
   time.
2. Concurrency: 10,000 runs of 10 cycles on one event loop, the model yielding to the
   loop once per request: cycles per CPU-second of the process (and per wall second),
   and memory held per run in flight (traced allocations at the peak, over the runs, in
   a separate pass).

Every figure is printed next to the hand-written loop's, measured in the same process.
``--gc-threshold N`` sets the cyclic garbage collector's first threshold
(``gc.set_threshold(N)``, Python's default 700) for the whole benchmark, as a program
serving thousands of runs at once may: the collector walks every live run's objects.
Run: ``python benchmarks/bench_loop_overhead.py [--repeat 7] [--runs 10000] [--gc-threshold N]``;
``--only convergent`` runs convergent's 10,000 concurrent runs alone and prints nothing
(for a whole-process timer such as ``farm-bench``, one version against another).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
import tracemalloc
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from convergent import Agent, Limits, ModelResponse, ScriptedModel, StopPolicy, ToolCall, tool
from convergent.messages import AssistantMessage, Message, ToolResultMessage, ToolSpec, UserMessage
from convergent.tools import to_text


@tool
async def echo(n: int) -> str:
    """Return the number as text.

    Args:
        n: A number.
    """
    return str(n)


def responses(cycles: int) -> list[ModelResponse]:
    """``cycles - 1`` responses with one distinct tool call each, then a final answer."""
    calls = [
        ModelResponse(tool_calls=(ToolCall(id=f"c{i}", name="echo", arguments={"n": i}),))
        for i in range(cycles - 1)
    ]
    return [*calls, ModelResponse(content="done")]


class Replies:
    """A zero-cost model: the next prepared response for each run (by its task)."""

    def __init__(self, cycles: int, yields: bool) -> None:
        self.script = responses(cycles)
        self.yields = yields

    async def __call__(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        if self.yields:
            await asyncio.sleep(0)
        return self.script[(len(messages) - 1) // 2]


def convergent_runner(cycles: int, yields: bool) -> Callable[[], Coroutine[Any, Any, None]]:
    agent = Agent(
        ScriptedModel(Replies(cycles, yields), record_requests=False),
        [echo],
        limits=Limits(max_cycles=cycles + 1),
        policy=StopPolicy(max_repeated_calls=cycles + 1),
    )

    async def run() -> None:
        result = await agent.run("benchmark")
        assert result.cycles == cycles, result.stop_detail

    return run


def hand_runner(cycles: int, yields: bool) -> Callable[[], Coroutine[Any, Any, None]]:
    model = Replies(cycles, yields)
    specs = [echo.spec]

    async def run() -> None:
        messages: list[Message] = [UserMessage(content="benchmark")]
        while True:
            response = await model(messages, specs)
            messages.append(
                AssistantMessage(content=response.content, tool_calls=response.tool_calls)
            )
            if not response.tool_calls:
                break
            for call in response.tool_calls:
                text = to_text(await echo.function(**echo.validate(call.arguments)))
                messages.append(
                    ToolResultMessage(tool_call_id=call.id, name=call.name, content=text)
                )
        assert len(messages) == 2 * cycles

    return run


Runner = Callable[[int, bool], Callable[[], Coroutine[Any, Any, None]]]


def per_cycle(make: Runner, cycles: int, repeat: int) -> tuple[float, float]:
    """Best-of-``repeat`` process CPU seconds and wall seconds per cycle of one run."""
    run = make(cycles, False)
    cpu = wall = float("inf")
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        asyncio.run(run())
        cpu = min(cpu, (time.process_time() - started_cpu) / cycles)
        wall = min(wall, (time.perf_counter() - started) / cycles)
    return cpu, wall


def concurrent(make: Runner, runs: int, cycles: int) -> tuple[float, float]:
    """Cycles per CPU-second and per wall second with ``runs`` runs in flight on one loop."""
    run = make(cycles, True)

    async def many() -> None:
        await asyncio.gather(*(run() for _ in range(runs)))

    gc.collect()
    started, started_cpu = time.perf_counter(), time.process_time()
    asyncio.run(many())
    total = runs * cycles
    return total / (time.process_time() - started_cpu), total / (time.perf_counter() - started)


def memory_per_run(make: Runner, runs: int, cycles: int) -> float:
    """Peak traced bytes per run while ``runs`` runs are in flight."""
    run = make(cycles, True)

    async def many() -> None:
        await asyncio.gather(*(run() for _ in range(runs)))

    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    asyncio.run(many())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (peak - base) / runs


def main(argv: list[str] | None = None) -> None:
    """Print per-cycle times, throughput, memory and their ratios to the hand loop."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--only", choices=["convergent", "hand"], help="concurrent runs alone")
    parser.add_argument("--gc-threshold", type=int, help="the collector's first threshold")
    args = parser.parse_args(argv)
    if args.gc_threshold is not None:
        gc.set_threshold(args.gc_threshold, *gc.get_threshold()[1:])
    if args.only is not None:
        concurrent(convergent_runner if args.only == "convergent" else hand_runner, args.runs, 10)
        return
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
        f"gc thresholds {gc.get_threshold()}"
    )
    print(f"{'per cycle (CPU; wall)':<34}{'hand loop':>16}{'convergent':>18}{'ratio':>13}")
    for cycles in (10, 100, 1000):
        repeat = args.repeat if cycles < 1000 else max(3, args.repeat // 2)
        hand, hand_wall = per_cycle(hand_runner, cycles, repeat)
        ours, ours_wall = per_cycle(convergent_runner, cycles, repeat)
        label = f"run of {cycles} cycles"
        print(
            f"{label:<34}{hand * 1e6:>7.1f};{hand_wall * 1e6:>6.1f}us"
            f"{ours * 1e6:>9.1f};{ours_wall * 1e6:>6.1f}us"
            f"{ours / hand:>7.2f};{ours_wall / hand_wall:>5.2f}"
        )
    label = f"{args.runs} runs x 10 cycles"
    hand_cpu, hand_rate = concurrent(hand_runner, args.runs, 10)
    ours_cpu, ours_rate = concurrent(convergent_runner, args.runs, 10)
    print(
        f"{label + ', cycles/CPU-s; /s':<34}{hand_cpu:>8,.0f};{hand_rate:>7,.0f}"
        f"{ours_cpu:>10,.0f};{ours_rate:>7,.0f}"
        f"{hand_cpu / ours_cpu:>7.2f};{hand_rate / ours_rate:>5.2f}"
    )
    hand_mem = memory_per_run(hand_runner, args.runs, 10)
    ours_mem = memory_per_run(convergent_runner, args.runs, 10)
    print(
        f"{label + ', KB per run':<34}{hand_mem / 1024:>16.1f}{ours_mem / 1024:>18.1f}"
        f"{ours_mem / hand_mem:>13.2f}"
    )


if __name__ == "__main__":
    main()
