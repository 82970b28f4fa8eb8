"""What a provider's SDK client costs a run: CPU per ``run_sync`` against a loopback server.

Each ``Agent.run_sync`` runs its own event loop, and an HTTP connection pool belongs to
the loop that opened it, so each builds a new SDK client (``AsyncOpenAI``,
``AsyncAnthropic``); a program that builds its model per request (a web handler) does
too. One run of one cycle (the server answers "done") is timed in process CPU, for
each provider, in two ways: a model reused across ``run_sync`` calls, and a model built
for each. The server is `convergent.testing.ChatServer` on the loopback interface,
answering in its own thread (its CPU counts too, the same for every version).

Compare two trees of convergent's sources by running it under each:
``PYTHONPATH=OLD/src python benchmarks/bench_sdk_clients.py``.

Run: ``python benchmarks/bench_sdk_clients.py [--runs 30]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from convergent import Agent, AnthropicModel, Model, OpenAIChatModel
from convergent.testing.chat_server import ChatServer, Request, anthropic_message, completion


def _reply(n: int, body: dict[str, Any]) -> bytes:
    return completion("done")


def _anthropic(request: Request) -> bytes:
    return json.dumps(anthropic_message("done")).encode()


def models(url: str) -> dict[str, Callable[[], Model]]:
    """A factory of each provider's model, pointed at the loopback server."""
    return {
        "openai": lambda: OpenAIChatModel("gpt-5-mini", base_url=f"{url}/v1", api_key="key"),
        "anthropic": lambda: AnthropicModel("claude-sonnet-5-5", base_url=url, api_key="key"),
    }


def cpu_per_run(make: Callable[[], Model], runs: int, *, rebuild: bool) -> float:
    """Median process CPU seconds of one ``run_sync`` (after one untimed run)."""
    model = make()
    Agent(model, []).run_sync("benchmark")
    spent = []
    for _ in range(runs):
        started = time.process_time()
        Agent(make() if rebuild else model, []).run_sync("benchmark")
        spent.append(time.process_time() - started)
    return statistics.median(spent)


def main(argv: list[str] | None = None) -> None:
    """Print CPU per run for each provider, model reused and model built per run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    with ChatServer(_reply, routes={"POST /v1/messages": _anthropic}) as server:
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print(f"{'provider':<12}{'model reused':>16}{'model per run':>16}  (CPU ms per run_sync)")
        for name, make in models(server.url).items():
            reused = cpu_per_run(make, args.runs, rebuild=False)
            built = cpu_per_run(make, args.runs, rebuild=True)
            print(f"{name:<12}{reused * 1e3:>16.2f}{built * 1e3:>16.2f}")


if __name__ == "__main__":
    main()
