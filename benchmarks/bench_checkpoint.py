"""Checkpoint cost per cycle, and resume time of a 1,000-cycle run.

A scripted run of ``--cycles`` cycles (one tool call per cycle, a result of
``--result-chars`` characters) is checkpointed into a fresh SQLite database. The time
spent inside `CheckpointObserver.on_event` is measured around every call and summed per
cycle; the same run without checkpoints gives the end-to-end overhead for comparison.
Resume time is the time to load the finished run's state from the database plus the time
until the resumed run sends its first model request.

Run: ``python benchmarks/bench_checkpoint.py [--cycles 1000] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from convergent import (
    Agent,
    Event,
    Limits,
    Message,
    ModelResponse,
    RunState,
    ScriptedModel,
    ToolCall,
    ToolSpec,
    tool,
)
from convergent.store import CheckpointObserver, RunStore

RESULT_CHARS = 400


@tool(timeout=None)
async def lookup(n: int) -> str:
    """Return a fixed-size text for a number.

    Args:
        n: A number.
    """
    return f"{n}:" + "x" * RESULT_CHARS


def script(cycles: int) -> ScriptedModel:
    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        made = sum(m.role == "assistant" for m in messages)
        if made + 1 >= cycles:
            return ModelResponse(content="done")
        call = ToolCall(id=f"c{made}", name="lookup", arguments={"n": made})
        return ModelResponse(content="next", tool_calls=(call,))

    return ScriptedModel(reply, record_requests=False)


class Timed:
    """Wraps an observer and records the seconds it spends per cycle."""

    def __init__(self, inner: CheckpointObserver) -> None:
        self.inner = inner
        self.per_cycle: dict[int, float] = defaultdict(float)

    def on_event(self, event: Event, state: RunState) -> None:
        started = time.perf_counter()
        self.inner.on_event(event, state)
        self.per_cycle[event.cycle] += time.perf_counter() - started


def agent(cycles: int, observers: list[Any]) -> Agent:
    return Agent(
        script(cycles),
        [lookup],
        system_prompt="benchmark",
        limits=Limits(max_cycles=cycles + 1, max_repeated_calls=cycles + 1),
        observers=observers,
        record_events=False,
    )


async def measure(cycles: int, folder: Path) -> dict[str, Any]:
    started = time.perf_counter()
    await agent(cycles, []).run("benchmark", run_id="plain")
    plain = time.perf_counter() - started

    store = RunStore(folder / "runs.db")
    timed = Timed(CheckpointObserver(store, tools=[lookup]))
    started = time.perf_counter()
    result = await agent(cycles, [timed]).run("benchmark", run_id="bench")
    checkpointed = time.perf_counter() - started
    assert result.cycles == cycles, result.stop_detail

    costs = [timed.per_cycle[c] for c in range(1, cycles + 1)]
    ordered = sorted(costs)

    started = time.perf_counter()
    state = RunStore(folder / "runs.db").load("bench")
    loaded = time.perf_counter() - started
    first_request: list[float] = []

    def first(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        first_request.append(time.perf_counter())
        return ModelResponse(content="resumed")

    resumer = Agent(
        ScriptedModel(first, record_requests=False),
        [lookup],
        limits=Limits(max_cycles=cycles + 2, max_repeated_calls=cycles + 1),
        observers=[CheckpointObserver(store, tools=[lookup])],
        record_events=False,
    )
    started = time.perf_counter()
    await resumer.run(state=state)
    to_first_request = first_request[0] - started
    store.close()
    return {
        "cycles": cycles,
        "messages": len(result.messages),
        "checkpoint_ms_per_cycle": {
            "mean": statistics.fmean(costs) * 1e3,
            "median": statistics.median(costs) * 1e3,
            "p95": ordered[int(0.95 * (len(ordered) - 1))] * 1e3,
            "max": ordered[-1] * 1e3,
            "mean_last_100": statistics.fmean(costs[-100:]) * 1e3,
        },
        "end_to_end_overhead_ms_per_cycle": (checkpointed - plain) / cycles * 1e3,
        "resume_ms": {
            "load_state": loaded * 1e3,
            "start_to_first_request": to_first_request * 1e3,
            "total": (loaded + to_first_request) * 1e3,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as folder:
            figures = asyncio.run(measure(args.cycles, Path(folder)))
            figures["database_bytes"] = sum(p.stat().st_size for p in Path(folder).glob("runs.db*"))
            runs.append(figures)
    best = min(runs, key=lambda r: r["checkpoint_ms_per_cycle"]["mean"])
    best["resume_ms"] = min((r["resume_ms"] for r in runs), key=lambda r: r["total"])
    if args.json:
        print(json.dumps(best, indent=2))
        return
    cost = best["checkpoint_ms_per_cycle"]
    resume = best["resume_ms"]
    print(f"{best['cycles']} cycles, {best['messages']} messages, best of {args.repeat}")
    print(
        f"checkpoint per cycle: mean {cost['mean']:.3f} ms, median {cost['median']:.3f} ms, "
        f"p95 {cost['p95']:.3f} ms, max {cost['max']:.3f} ms, "
        f"last 100 cycles {cost['mean_last_100']:.3f} ms (target <= 1 ms)"
    )
    print(f"end-to-end overhead: {best['end_to_end_overhead_ms_per_cycle']:.3f} ms per cycle")
    print(
        f"resume: load {resume['load_state']:.1f} ms + start to first request "
        f"{resume['start_to_first_request']:.1f} ms = {resume['total']:.1f} ms"
    )
    print(f"database size: {best['database_bytes'] / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
