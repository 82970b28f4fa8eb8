"""Loop overhead: convergent's per-cycle cost against a plain hand-written ``while`` loop.

Both loops do the same work per cycle with a zero-cost model and tool: ask the model,
validate the call's arguments against the tool's schema, run the tool, append the
assistant message and the tool result. Run: ``python benchmarks/bench_loop_overhead.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from convergent import (
    Agent,
    AssistantMessage,
    Limits,
    Message,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    tool,
)


@tool(timeout=None)
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


async def convergent_loop(cycles: int) -> None:
    """One run of the library's loop."""
    agent = Agent(
        ScriptedModel(responses(cycles), record_requests=False),
        [echo],
        limits=Limits(max_cycles=cycles + 1, max_repeated_calls=cycles + 1),
    )
    result = await agent.run("benchmark")
    assert result.cycles == cycles


async def plain_loop(cycles: int) -> None:
    """The same work, written by hand with no events, limits or stall detection."""
    script = iter(responses(cycles))

    async def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        return next(script)

    messages: list[Message] = [UserMessage(content="benchmark")]
    specs = [echo.spec]
    done = 0
    while True:
        response = await model(messages, specs)
        done += 1
        messages.append(AssistantMessage(content=response.content, tool_calls=response.tool_calls))
        if not response.tool_calls:
            break
        for call in response.tool_calls:
            text = await echo.call(call.arguments)
            messages.append(ToolResultMessage(tool_call_id=call.id, name=call.name, content=text))
    assert done == cycles


def measure(run: Callable[[int], Coroutine[Any, Any, None]], cycles: int, repeat: int) -> float:
    """Best-of-``repeat`` seconds per cycle."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        asyncio.run(run(cycles))
        samples.append((time.perf_counter() - start) / cycles)
    return min(samples)


def measure_concurrent(
    run: Callable[[int], Coroutine[Any, Any, None]], runs: int, cycles: int, repeat: int
) -> float:
    """Best-of-``repeat`` seconds per cycle with ``runs`` runs on one event loop."""

    async def many() -> None:
        await asyncio.gather(*(run(cycles) for _ in range(runs)))

    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        asyncio.run(many())
        samples.append((time.perf_counter() - start) / (runs * cycles))
    return min(samples)


def main(argv: list[str] | None = None) -> None:
    """Print per-cycle times and ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"{'case':<24}{'plain us/cycle':>16}{'convergent us/cycle':>22}{'ratio':>8}")
    ratios = []
    for cycles in (1, 10, 100, 1000):
        repeat = args.repeat if cycles < 1000 else max(3, args.repeat // 2)
        plain = measure(plain_loop, cycles, repeat)
        ours = measure(convergent_loop, cycles, repeat)
        ratios.append(ours / plain)
        print(
            f"{f'{cycles} cycles':<24}{plain * 1e6:>16.1f}{ours * 1e6:>22.1f}{ours / plain:>8.2f}"
        )
    for runs in (100,):
        plain = measure_concurrent(plain_loop, runs, 100, 3)
        ours = measure_concurrent(convergent_loop, runs, 100, 3)
        label = f"{runs} runs x 100 cycles"
        print(f"{label:<24}{plain * 1e6:>16.1f}{ours * 1e6:>22.1f}{ours / plain:>8.2f}")
    print(f"median ratio over cycle counts: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
