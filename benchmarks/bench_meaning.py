"""What judging a tool's result costs: per result and per KB, and per cycle of a run.

1. Judging: `RunMonitor.observe` of one call polled again, its result of N bytes (100 B,
   10 KB, 1 MB) differing from the previous one only in its time stamp and request id
   (``same``) or also in a count at its end (``moved``). Two kinds of result: API-like
   JSON (a list of records with ids, names, prices, statuses and a fixed ``updated_at``
   each) and prose (log lines with their own time stamps, durations and request ids,
   as ``tail`` of a log that has not moved shows them). CPU time per result, best of
   several repeats, and per KB.
2. A cycle: a run of 200 cycles that polls one status tool with a result of 100 B or
   10 KB (a count moves each time, beside a fresh time stamp and request id), with a
   zero-cost scripted model; CPU seconds per cycle, best of several runs.

It uses only public names that older versions have too, so the same file measures any
checkout: ``PYTHONPATH=OLD/src python benchmarks/bench_meaning.py`` against
``PYTHONPATH=src python benchmarks/bench_meaning.py``.
Run: ``python benchmarks/bench_meaning.py [--repeat 7] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

from convergent import Agent, Limits, ScriptedModel, StopPolicy, ToolCall, tool
from convergent.loop.monitor import RunMonitor
from convergent.messages import CallOutcome, ModelResponse

SIZES = {"100 B": 100, "10 KB": 10 * 1024, "1 MB": 1024 * 1024}
CYCLES = 200


def json_result(size: int, poll: int, count: int) -> str:
    """An API-like JSON result of about ``size`` bytes, as the ``poll``-th read returns it."""
    head = {
        "request_id": f"req_{poll * 7919:08x}",
        "fetched_at": f"2026-11-28T10:{poll // 60 % 60:02d}:{poll % 60:02d}.{poll % 997:03d}Z",
        "items": [],
        "count": count,
    }
    items: list[dict[str, Any]] = head["items"]
    length = len(json.dumps(head))
    while True:
        n = len(items)
        item = {
            "id": f"item-{n:05d}",
            "name": f"widget {n}",
            "price": 10 + n % 90,
            "status": "active" if n % 3 else "paused",
            "updated_at": "2026-11-01T08:00:00Z",
        }
        length += len(json.dumps(item)) + 2
        if length > size:
            return json.dumps(head)
        items.append(item)


def prose_result(size: int, poll: int, count: int) -> str:
    """A log-like text of about ``size`` bytes, as the ``poll``-th read returns it."""
    header = (
        f"tail of worker.log at 2026-11-28 10:{poll // 60 % 60:02d}:{poll % 60:02d},"
        f"{poll % 997:03d} (request_id=r{poll * 7919:x})\n"
    )
    lines = [header]
    length = len(header)
    for n in range(size):
        line = (
            f"2026-11-28 09:{n // 60 % 60:02d}:{n % 60:02d},{n % 1000:03d} INFO worker-{n % 4} "
            f"processed batch {n} of job build-17 in {n % 90 + 5}ms\n"
        )
        length += len(line)
        if length > size:
            break
        lines.append(line)
    return "".join(lines) + f"{count} batches left"


MAKERS: dict[str, Callable[[int, int, int], str]] = {"JSON": json_result, "prose": prose_result}


def judging(
    make: Callable[[int, int, int], str], size: int, moved: bool, repeat: int
) -> tuple[float, bool]:
    """Best-of-``repeat`` CPU seconds of judging one result against the previous one, and
    whether the monitor took every poll for the same result."""
    polls = max(4, min(400, 40_000_000 // max(size, 1) // 10))
    results = [make(size, n, 100 - n if moved else 100) for n in range(polls + 1)]
    status = ToolCall(id="c", name="status", arguments={"job": "j1"})
    best = float("inf")
    for _ in range(repeat):
        # a fresh look at every poll: no stall is found, so every result is judged
        monitor = RunMonitor(StopPolicy(max_repeated_calls=polls + 2), tools={"status": True})
        monitor.observe(status, CallOutcome.OK, results[0])
        monitor.end_step()
        started = time.process_time()
        for result in results[1:]:
            monitor.observe(status, CallOutcome.OK, result)
            monitor.end_step()
        best = min(best, (time.process_time() - started) / polls)
    repeats = next(iter(monitor.state.stretch.values()))[1]
    return best, repeats == polls + 1


def cycle(size: int, repeat: int) -> float:
    """Best-of-``repeat`` CPU seconds per cycle of a run polling a status of ``size`` bytes."""
    results = [json_result(size, n, CYCLES - n) for n in range(CYCLES)]
    served = iter(())

    @tool(read_only=True)
    async def status(job: str) -> str:
        """The job's status.

        Args:
            job: The job.
        """
        return next(served)

    poll = ModelResponse(tool_calls=(ToolCall(id="p", name="status", arguments={"job": "j1"}),))
    best = float("inf")
    for _ in range(repeat):
        served = iter(results)
        model = ScriptedModel([poll] * (CYCLES - 1) + ["done"], record_requests=False)
        agent = Agent(model, [status], limits=Limits(max_cycles=CYCLES + 1))
        started = time.process_time()
        result = asyncio.run(agent.run("Wait for build-17."))
        elapsed = time.process_time() - started
        assert result.cycles == CYCLES, result.stop_detail
        best = min(best, elapsed / CYCLES)
    return best


def main(argv: list[str] | None = None) -> None:
    """Print the cost of judging a result and of a cycle, at each size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    rows: dict[str, Any] = {"load": load, "judging": {}, "cycle": {}}
    for kind, make in MAKERS.items():
        for label, size in SIZES.items():
            for moved in (False, True):
                seconds, same = judging(make, size, moved, args.repeat)
                key = f"{kind} {label} {'moved' if moved else 'same'}"
                rows["judging"][key] = {
                    "us": seconds * 1e6,
                    "us_per_kb": seconds * 1e6 * 1024 / size,
                    "judged_same": same,
                }
    for label in ("100 B", "10 KB"):
        rows["cycle"][label] = {"us": cycle(SIZES[label], args.repeat) * 1e6}
    if args.json:
        print(json.dumps(rows))
        return
    print(f"load average {load:.2f} on {os.cpu_count()} cores")
    print(f"{'judging a result':<28}{'per result':>14}{'per KB':>12}{'judged':>10}")
    for key, row in rows["judging"].items():
        judged = "same" if row["judged_same"] else "new"
        print(f"{key:<28}{row['us']:>12.1f}us{row['us_per_kb']:>10.2f}us{judged:>10}")
    print(f"{'a cycle (200 polls)':<28}{'per cycle':>14}")
    for key, row in rows["cycle"].items():
        print(f"{key:<28}{row['us']:>12.1f}us")
    ratio = rows["cycle"]["10 KB"]["us"] / rows["cycle"]["100 B"]["us"]
    print(f"{'10 KB / 100 B':<28}{ratio:>14.2f}")


if __name__ == "__main__":
    main()
