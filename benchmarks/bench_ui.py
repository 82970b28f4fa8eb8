"""The web console under load: the runs page over 10,000 runs, with and without a live run.

A fresh database gets 10,000 stored runs (rows as the journal writes them, each with
a recipe and usage), ``--interrupted`` runs whose process died (status ``running``
with a process id that no longer exists), and one real run of 200 cycles. The console
is served by uvicorn on 127.0.0.1 in a thread, and pages are fetched over HTTP with
the token:

- the runs page (first page, a later page, two status filters: ``stalled``, and
  ``interrupted``, which must ask the system which processes still live; a search of
  the tasks and outputs that one run matches, and one that none matches), the
  200-cycle run page, the overview across runs (the stored runs have three tool calls
  each, the facts of each reply and a note before each stalled stop) and a comparison
  of the 200-cycle run with another;
- the same while another process runs an agent that writes into the same database as
  fast as it can (a cycle with one tool call per iteration, no sleeping).

Then the memory of live streams on a huge run (``--huge-mb``: a run whose tool result
and final output are that many megabytes): a ``convergent ui`` process serves it,
``--streams`` clients open the run page's event stream and read its first update, and
the server's resident memory is read from ``/proc`` before, while the streams are
open, and after they were closed.

The target is a runs page under 300 ms. Figures are wall-clock medians and 95th
percentiles of ``--repeat`` fetches each.

Run: ``python benchmarks/bench_ui.py [--runs 10000] [--interrupted 10000] [--repeat 30]
[--huge-mb 20] [--streams 20] [--json]``.

Measured on the 2-core development machine (``--repeat 10``, load average 5-13 from
other work, so single figures move by tens of milliseconds), before and after the
``interrupted`` filter was paged in SQL and streams were cut and bounded:

=================================  ==================  ==================
                                   before              after
=================================  ==================  ==================
runs filtered (interrupted), idle  731 ms (p95 954)    150 ms (p95 162)
same, while a run writes           935 ms (p95 1650)   111 ms (p95 609)
20 streams on a 20 MB run: RSS     3387 MB open,       120 MB open,
                                   3387 MB after close 120 MB after close
first update of such a stream      40 MB               0.01 MB
=================================  ==================  ==================
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from convergent import Agent, Limits, ScriptedModel, StopPolicy, calculator, tool
from convergent.durability.sqlite import RunStore
from convergent.ui.server import serve_in_thread

TARGET_MS = 300.0

RECIPE = json.dumps(
    {
        "version": 1,
        "model": "openai:gpt-4o-mini",
        "tools": ["calculator", "read_file", "list_dir", "ask_user"],
        "workspace": "/home/user/project",
        "system_prompt": "You are a careful assistant that solves tasks with tools. " * 3,
        "limits": {"max_cycles": 20},
        "ask_via": "auto",
        "ask_timeout": 300.0,
    }
)

WRITER = """
import asyncio, sys
from convergent import Agent, Limits, ModelResponse, ScriptedModel, ToolCall, calculator
from convergent.durability.sqlite import RunStore
count = 0
def script(messages, tools):
    global count
    count += 1
    call = ToolCall(id=f"c{count}", name="calculator", arguments={"expression": f"{count}*3"})
    return ModelResponse(content=f"step {count}", tool_calls=(call,))
store = RunStore(sys.argv[1])
agent = Agent(ScriptedModel(script, record_requests=False), [calculator], store=store,
              limits=Limits(max_cycles=1_000_000))
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


def fill_calls(store: RunStore, runs: int) -> None:
    """Give the runs of `fill` what their journal would have stored beside them: three
    tool calls each, the facts of each reply, and a note before each stalled stop."""
    tools = ("search", "read_file", "calculator", "fetch")
    outcomes = ("ok", "ok", "ok", "ok", "failed", "not_executed")
    calls, events = [], []
    for n in range(runs):
        run_id, cycles = f"run-{n:05d}", 1 + n % 12
        for position in range(3):
            name = tools[(n + position) % len(tools)]
            calls.append(
                (run_id, 1 + position % cycles, f"c{position}", position, name, '{"q": "x"}',
                 outcomes[(n + position) % len(outcomes)], "result", 0.05 * (1 + position),
                 time.time())
            )  # fmt: skip
        for cycle in range(1, cycles + 1):
            reply = {"type": "model_responded", "run_id": run_id, "cycle": cycle, "usage": {
                "input_tokens": 900, "output_tokens": 100, "requests": 1, "cost": 0.0004},
                "duration": 0.8, "finish_reason": "tool_calls", "settings": None}  # fmt: skip
            events.append((run_id, cycle, cycle, "model_responded", time.time(), json.dumps(reply)))
        if n % 6 == 4:  # the stalled ones of `fill` got a note first
            note = {"type": "nudged", "run_id": run_id, "cycle": cycles, "about": "stalled"}
            events.append((run_id, 100, cycles, "nudged", time.time(), json.dumps(note)))
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO finished_calls (run_id, cycle, call_id, position, name, arguments, "
            "outcome, result, duration, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            calls,
        )
        conn.executemany(
            "INSERT INTO events (run_id, seq, cycle, type, time, data) VALUES (?, ?, ?, ?, ?, ?)",
            events,
        )
        if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'tools'").fetchone():
            # schema 8 on: the journal keeps the names of the tools called
            conn.executemany("INSERT OR IGNORE INTO tools (name) VALUES (?)", [(t,) for t in tools])


DEAD_PIDS = 4_194_304
"""Process ids from here up exceed Linux's largest (``pid_max``): no such process lives."""


def fill_interrupted(store: RunStore, runs: int) -> None:
    """Store ``runs`` runs whose process died mid-run (each had a process of its own)."""
    start = time.time() - runs * 30
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO runs (run_id, task, model, status, cycles, usage, elapsed, started_at, "
            "updated_at, pid, recipe, epoch, message_count, state_version) VALUES (?, ?, "
            "'openai:gpt-4o-mini', 'running', 3, '{}', 2.0, ?, ?, ?, ?, 1, 0, 2)",
            [
                (
                    f"killed-{n:05d}",
                    f"task {n} whose process was killed",
                    start + n * 30,
                    start + n * 30 + 10,
                    DEAD_PIDS + n + 1,
                    RECIPE,
                )
                for n in range(runs)
            ],
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
        limits=Limits(max_cycles=cycles),
        policy=StopPolicy(max_repeated_calls=cycles),
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
    "runs filtered (interrupted)": "/runs?status=interrupted",
    "runs searched (one match)": "/runs?q=NUMBER+4321",
    "runs searched (no match)": "/runs?q=zebra",
    "run page (200 cycles)": "/runs/long-run",
    "overview (30 days)": "/overview",
    "overview (all, every run)": "/overview?since=all&scope=all",
    "overview (one tool)": "/overview?since=all&tool=fetch",
    "comparison (200 cycles)": "/compare?a=long-run&b=run-00011",
}


def measure(
    base: str, token: str, repeat: int, extra: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        return {name: timed(client, url, repeat) for name, url in [*PAGES.items(), *extra]}


def huge_run(db: Path, megabytes: int) -> None:
    """A finished run whose one tool result and final output are ``megabytes`` each."""
    size = megabytes * 1_000_000

    @tool
    def dump() -> str:
        """Return a very large text."""
        return "r" * size

    model = ScriptedModel([{"tool_calls": [{"name": "dump", "arguments": {}}]}, "o" * size])
    with RunStore(db) as store:
        asyncio.run(Agent(model, [dump], store=store).run("a huge run", run_id="huge-run"))


def rss_mb(pid: int) -> tuple[float, float]:
    """Resident memory now and at its peak (VmRSS, VmHWM) of a process, in MB."""
    # /proc, not psutil: psutil reports the resident memory now, not its peak
    status = Path(f"/proc/{pid}/status").read_text()
    now = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return round(now / 1024, 1), round(peak / 1024, 1)


def first_update(base: str, token: str, opened: threading.Barrier, done: threading.Event) -> int:
    """Open the huge run's event stream, read its first update, hold it until ``done``."""
    headers = {"authorization": f"Bearer {token}"}
    received = 0
    with (
        httpx.Client(base_url=base, headers=headers, timeout=120) as client,
        client.stream("GET", "/runs/huge-run/stream") as response,
    ):
        for line in response.iter_lines():
            received += len(line)
            if line.startswith("data:"):
                break
        opened.wait()
        done.wait()
    return received


def stream_memory(db: Path, streams: int) -> dict[str, Any]:
    """Server memory with ``streams`` open streams on the huge run, and after they closed."""
    server = subprocess.Popen(
        [sys.executable, "-m", "convergent", "ui", "--db", str(db), "--port", "0", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        found = re.search(r"(http://[^/\s]+)/\?token=([\w-]+)", server.stdout.readline())
        if found is None:
            raise SystemExit("the console did not print its address")
        base, token = found.group(1), found.group(2)
        headers = {"authorization": f"Bearer {token}"}
        httpx.get(f"{base}/runs", headers=headers, timeout=60).raise_for_status()
        before = rss_mb(server.pid)
        opened = threading.Barrier(streams + 1)
        done = threading.Event()
        sizes: list[int] = []
        clients = [
            threading.Thread(
                target=lambda: sizes.append(first_update(base, token, opened, done)),
                daemon=True,
            )
            for _ in range(streams)
        ]
        for client in clients:
            client.start()
        opened.wait(timeout=600)
        time.sleep(2)  # a few polls with every stream open
        during = rss_mb(server.pid)
        done.set()
        for client in clients:
            client.join(timeout=120)
        gc.collect()
        time.sleep(15)  # longer than the streams' refresh: a lingering stream would render again
        after = rss_mb(server.pid)
        return {
            "streams": streams,
            "first_update_mb": round(statistics.mean(sizes) / 1e6, 2) if sizes else None,
            "rss_before_mb": before[0],
            "rss_open_mb": during[0],
            "rss_peak_mb": during[1],
            "rss_after_close_mb": after[0],
        }
    finally:
        server.terminate()
        server.communicate(timeout=30)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--interrupted", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--huge-mb", type=int, default=20)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    db = folder / "runs.db"
    report: dict[str, Any] = {
        "runs": args.runs + args.interrupted + 1,
        "interrupted": args.interrupted,
        "repeat": args.repeat,
    }
    with RunStore(db) as store:
        began = time.perf_counter()
        fill(store, args.runs)
        fill_calls(store, args.runs)
        fill_interrupted(store, args.interrupted)
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
    if args.streams:
        huge = folder / "huge.db"
        huge_run(huge, args.huge_mb)
        report["huge_run"] = {"megabytes": args.huge_mb, **stream_memory(huge, args.streams)}
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
    if "huge_run" in report:
        huge = report["huge_run"]
        print(
            f"\n{huge['streams']} streams on a {huge['megabytes']} MB run (first update "
            f"{huge['first_update_mb']} MB each): server RSS {huge['rss_before_mb']} MB before, "
            f"{huge['rss_open_mb']} MB open (peak {huge['rss_peak_mb']} MB), "
            f"{huge['rss_after_close_mb']} MB after closing them"
        )
    verdict = "within" if report["runs_page_within_target"] else "OVER"
    print(f"runs page p95 {verdict} the {TARGET_MS:.0f} ms target")


if __name__ == "__main__":
    main()
