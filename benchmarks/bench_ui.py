"""The web console under load: the runs page over 10,000 runs, with and without a live run.

A fresh database gets 10,000 stored runs (rows as the journal writes them, each with
a recipe and usage) plus one real run of 200 cycles. The console is served by uvicorn
on 127.0.0.1 in a thread, and pages are fetched over HTTP with the token:

- the runs page (first page, a later page, a status filter) and the 200-cycle run page;
- the same while another process runs an agent that writes into the same database as
  fast as it can (a cycle with one tool call per iteration, no sleeping).

The target is a runs page under 300 ms. Figures are wall-clock medians and 95th
percentiles of ``--repeat`` fetches each.

Run: ``python benchmarks/bench_ui.py [--runs 10000] [--repeat 30] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from convergent import Agent, Limits, ScriptedModel, calculator
from convergent.store import RunStore
from convergent.ui.server import serve_in_thread

TARGET_MS = 300.0

RECIPE = json.dumps(
    {
        "version": 1,
        "model": "openai:gpt-4o-mini",
        "tools": ["calculator", "read_file", "list_dir", "ask_user"],
        "workspace": "/home/user/project",
        "system_prompt": "You are a careful assistant that solves tasks with tools. " * 3,
        "limits": {"max_cycles": 20, "max_repeated_calls": 3},
        "ask_via": "auto",
        "ask_timeout": 300.0,
    }
)

WRITER = """
import asyncio, sys
from convergent import Agent, Limits, ModelResponse, ScriptedModel, ToolCall, calculator
from convergent.store import RunStore
count = 0
def script(messages, tools):
    global count
    count += 1
    call = ToolCall(id=f"c{count}", name="calculator", arguments={"expression": f"{count}*3"})
    return ModelResponse(content=f"step {count}", tool_calls=(call,))
store = RunStore(sys.argv[1])
agent = Agent(ScriptedModel(script, record_requests=False), [calculator], store=store,
              limits=Limits(max_cycles=1_000_000, max_repeated_calls=10))
asyncio.run(agent.run("write as fast as possible", run_id="live-writer"))
"""


def fill(store: RunStore, runs: int) -> None:
    """Store ``runs`` finished runs, as rows the journal would have written."""
    reasons = ("completed", "completed", "completed", "max_cycles", "stalled", "needs_user")
    start = time.time() - runs * 60
    rows = []
    for n in range(runs):
        reason = reasons[n % len(reasons)]
        usage = json.dumps(
            {
                "input_tokens": 900 + n % 700,
                "output_tokens": 120 + n % 90,
                "requests": 1 + n % 12,
                "cost": 0.0004 * (1 + n % 12),
            }
        )
        rows.append(
            (
                f"run-{n:05d}",
                f"task number {n}: summarise the report and check the totals",
                "openai:gpt-4o-mini",
                reason,
                f"detail of {reason}",
                1 + n % 12,
                usage,
                3.5,
                start + n * 60,
                start + n * 60 + 30,
                RECIPE,
            )
        )
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO runs (run_id, task, model, status, stop_reason, stop_detail, cycles, "
            "usage, elapsed, started_at, updated_at, pid, workspace, recipe, epoch, "
            "message_count, state_version) VALUES (?, ?, ?, 'stopped', ?, ?, ?, ?, ?, ?, ?, "
            "NULL, NULL, ?, 1, 0, 2)",
            [(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10]) for r in rows],
        )


def long_run(store: RunStore, cycles: int) -> None:
    calls = [
        {
            "content": f"cycle {n}",
            "tool_calls": [{"name": "calculator", "arguments": {"expression": f"{n}+1"}}],
        }
        for n in range(cycles - 1)
    ]
    model = ScriptedModel([*calls, "done"])
    agent = Agent(
        model,
        [calculator],
        store=store,
        limits=Limits(max_cycles=cycles, max_repeated_calls=cycles),
    )
    asyncio.run(agent.run("a long run", run_id="long-run"))


def timed(client: httpx.Client, url: str, repeat: int) -> dict[str, float]:
    client.get(url).raise_for_status()  # warm
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    samples.sort()
    return {
        "median_ms": round(statistics.median(samples), 1),
        "p95_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.95))], 1),
        "max_ms": round(samples[-1], 1),
    }


PAGES = {
    "runs page": "/runs",
    "runs page 150": "/runs?page=150",
    "runs filtered (stalled)": "/runs?status=stalled",
    "run page (200 cycles)": "/runs/long-run",
}


def measure(
    base: str, token: str, repeat: int, extra: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        return {name: timed(client, url, repeat) for name, url in [*PAGES.items(), *extra]}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    db = folder / "runs.db"
    report: dict[str, Any] = {"runs": args.runs + 1, "repeat": args.repeat}
    with RunStore(db) as store:
        began = time.perf_counter()
        fill(store, args.runs)
        long_run(store, 200)
        report["fill_seconds"] = round(time.perf_counter() - began, 2)
        with serve_in_thread(store) as console:
            report["idle"] = measure(console.url, console.token, args.repeat)
            writer = subprocess.Popen(
                [sys.executable, "-c", WRITER, str(db)], env={**os.environ}, stderr=subprocess.PIPE
            )
            try:
                deadline = time.monotonic() + 30
                while not store.exists("live-writer"):
                    if time.monotonic() > deadline or writer.poll() is not None:
                        raise SystemExit("the writer did not start")
                    time.sleep(0.05)
                before = store.get_run("live-writer").cycles
                started = time.perf_counter()
                report["while_writing"] = measure(
                    console.url,
                    console.token,
                    args.repeat,
                    [("live run page", "/runs/live-writer")],
                )
                spent = time.perf_counter() - started
                written = store.get_run("live-writer").cycles - before
                report["writer_cycles_per_second"] = round(written / spent, 1)
            finally:
                writer.terminate()
                writer.communicate(timeout=30)
    report["target_ms"] = TARGET_MS
    report["runs_page_within_target"] = all(
        report[phase]["runs page"]["p95_ms"] < TARGET_MS for phase in ("idle", "while_writing")
    )
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['runs']} runs stored (filled in {report['fill_seconds']} s); "
        f"{args.repeat} fetches per page"
    )
    for phase in ("idle", "while_writing"):
        print(f"\n{phase.replace('_', ' ')}:")
        for name, figures in report[phase].items():
            print(
                f"  {name:<26} median {figures['median_ms']:>7.1f} ms   "
                f"p95 {figures['p95_ms']:>7.1f} ms   max {figures['max_ms']:>7.1f} ms"
            )
    print(f"\nthe writer committed {report['writer_cycles_per_second']} cycles/s meanwhile")
    verdict = "within" if report["runs_page_within_target"] else "OVER"
    print(f"runs page p95 {verdict} the {TARGET_MS:.0f} ms target")


if __name__ == "__main__":
    main()
