"""Time to first token: a streamed reply through convergent against the OpenAI SDK alone.

One loopback chat server (``tests/chat_stub.py``, in a process of its own) streams the
same completion as OpenAI's server-sent chunks to both clients:

1. the OpenAI SDK directly: ``chat.completions.create(stream=True)``, timed from the
   call to the first chunk with text;
2. convergent: ``Agent(OpenAIChatModel(...)).run(task, on_event=...)``, timed from the
   call to the first `TextDelta` event (a run listened to streams its requests).

Both read the whole stream before the next request; they take turns in one event loop,
so that load on the machine falls on both alike. The figure that matters is the time
convergent adds: the median and 95th percentile of each turn's difference. Run:
``python benchmarks/bench_streaming.py [--requests 400]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import openai

from convergent import Agent, Event, OpenAIChatModel, TextDelta

TESTS = Path(__file__).resolve().parents[1] / "tests"
TASK = "What is 17 * 23?"
ANSWER = "17 * 23 = 391. " * 8

SERVER = f"""
import json, sys, threading
sys.path.insert(0, {str(TESTS)!r})
from chat_stub import ChatStub
body = json.dumps({{
    "id": "c1", "object": "chat.completion", "created": 0, "model": "stub",
    "choices": [{{"index": 0, "message": {{"role": "assistant", "content": {ANSWER!r}}},
                 "finish_reason": "stop"}}],
    "usage": {{"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52}},
}}).encode()
with ChatStub(lambda n, request: body) as stub:
    print(stub.url, flush=True)
    sys.stdin.read()
"""


async def direct(client: Any) -> float:
    """Seconds from the SDK call to the first chunk with text (then the rest is read)."""
    started = time.perf_counter()
    first = 0.0
    stream = await client.chat.completions.create(
        model="stub",
        messages=[{"role": "user", "content": TASK}],
        stream=True,
        stream_options={"include_usage": True},
    )
    async with stream:
        async for chunk in stream:
            if not first and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
    assert first, "the stream had no text"
    return first


async def through_convergent(agent: Agent) -> float:
    """Seconds from `Agent.run` to its first `TextDelta` (then the run goes to its end)."""
    first = 0.0

    def on_event(event: Event) -> None:
        nonlocal first
        if not first and isinstance(event, TextDelta):
            first = time.perf_counter() - started

    started = time.perf_counter()
    result = await agent.run(TASK, on_event=on_event)
    assert result.output == ANSWER, result.stop_detail
    assert first, "the run streamed no text"
    return first


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(url: str, requests: int, warmup: int) -> dict[str, list[float]]:
    client = openai.AsyncOpenAI(api_key="not-needed", base_url=f"{url}/v1", max_retries=0)
    model = OpenAIChatModel("stub", base_url=f"{url}/v1", max_retries=0)
    agent = Agent(model, instrument=False)
    turns: dict[str, Callable[[], Awaitable[float]]] = {
        "openai SDK": lambda: direct(client),
        "convergent": lambda: through_convergent(agent),
    }
    times: dict[str, list[float]] = {label: [] for label in turns}
    gc.collect()
    for index in range(warmup + requests):
        order = list(turns) if index % 2 == 0 else list(reversed(turns))
        for label in order:
            took = await turns[label]()
            if index >= warmup:
                times[label].append(took)
    await client.close()
    await agent.aclose()
    return times


def main(argv: list[str] | None = None) -> None:
    """Print each client's time to first token and what convergent adds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        load = os.getloadavg()[0]
        times = asyncio.run(measure(url, args.requests, args.warmup))
    finally:
        server.communicate("")
    added = [ours - sdk for ours, sdk in zip(times["convergent"], times["openai SDK"], strict=True)]
    figures = {
        label: {"median_ms": statistics.median(v) * 1e3, "p95_ms": percentile(v, 0.95) * 1e3}
        for label, v in (*times.items(), ("added by convergent", added))
    }
    if args.json:
        print(json.dumps({"load_average": load, "requests": args.requests, **figures}))
        return
    print(f"load average {load:.2f} on {os.cpu_count()} cores; {args.requests} requests each")
    print(f"{'time to first token':<26}{'median':>10}{'p95':>10}")
    for label, figure in figures.items():
        print(f"{label:<26}{figure['median_ms']:>8.2f}ms{figure['p95_ms']:>8.2f}ms")


if __name__ == "__main__":
    main()
