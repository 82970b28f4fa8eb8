"""Telemetry overhead: the loop's per-cycle cost with and without OpenTelemetry tracing.

The loop of ``bench_loop_overhead.py`` (a zero-cost model, one ``echo`` call per cycle)
in five settings, every one measured in the same process, in turns:

1. ``instrument=False``: no observer at all (the baseline);
2. the default agent before anything imported OpenTelemetry (the check is one lookup);
3. the default agent with ``opentelemetry.trace`` imported but no SDK configured;
4. an explicit `OpenTelemetryObserver` with no SDK (the API's no-op tracer);
5. an SDK tracer provider configured globally, spans kept by an in-memory exporter
   (the agent adds its observer by itself).

Settings 2 and 3 are what every user without an SDK runs: they should be within noise
of the baseline. Run: ``python benchmarks/bench_telemetry_overhead.py [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from bench_loop_overhead import Replies, echo
from convergent import Agent, Limits, ScriptedModel, StopPolicy
from convergent.extensions import RunObserver

Runner = Callable[[], Coroutine[Any, Any, None]]


def runner(cycles: int, **options: Any) -> Runner:
    agent = Agent(
        ScriptedModel(Replies(cycles, False), record_requests=False),
        [echo],
        limits=Limits(max_cycles=cycles + 1),
        policy=StopPolicy(max_repeated_calls=cycles + 1),
        **options,
    )

    async def run() -> None:
        result = await agent.run("benchmark")
        assert result.cycles == cycles, result.stop_detail

    return run


def best_per_cycle(
    runs: dict[str, Runner], cycles: int, repeat: int, before: Callable[[], None] = gc.collect
) -> dict[str, float]:
    """Best-of-``repeat`` seconds per cycle of each runner, measured in turns.

    ``before`` runs untimed before each run (it also drops the spans kept so far, so
    that the collector's work on them is not charged to the next run).
    """
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for label, run in runs.items():
            before()
            started = time.perf_counter()
            asyncio.run(run())
            best[label] = min(best[label], (time.perf_counter() - started) / cycles)
    return best


def main(argv: list[str] | None = None) -> None:
    """Print per-cycle times of each setting and their ratio to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    sizes = (100, 1000)
    results: dict[int, dict[str, float]] = {n: {} for n in sizes}
    assert "opentelemetry.trace" not in sys.modules
    for n in sizes:
        results[n] |= best_per_cycle(
            {
                "no observer (instrument=False)": runner(n, instrument=False),
                "default, OpenTelemetry not imported": runner(n),
            },
            n,
            args.repeat,
        )

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from convergent.telemetry import OpenTelemetryObserver

    explicit: list[RunObserver] = [OpenTelemetryObserver()]
    for n in sizes:
        results[n] |= best_per_cycle(
            {
                "no observer, again": runner(n, instrument=False),
                "default, API imported, no SDK": runner(n),
                "explicit observer, no SDK": runner(n, observers=explicit),
            },
            n,
            args.repeat,
        )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def drop_spans() -> None:
        exporter.clear()
        gc.collect()

    for n in sizes:
        results[n] |= best_per_cycle(
            {
                "no observer, third time": runner(n, instrument=False),
                "SDK + in-memory exporter": runner(n),
            },
            n,
            args.repeat,
            drop_spans,
        )
    print(f"{'per cycle':<40}" + "".join(f"{f'{n} cycles':>14}{'ratio':>8}" for n in sizes))
    for label in results[sizes[0]]:
        row = f"{label:<40}"
        for n in sizes:
            baseline = results[n]["no observer (instrument=False)"]
            value = results[n][label]
            row += f"{value * 1e6:>12.1f}us{value / baseline:>8.2f}"
        print(row)


if __name__ == "__main__":
    main()
