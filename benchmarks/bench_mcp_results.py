"""How long a run takes to read an MCP tool result, by its size (stdio transport).

A hand-written stdio server (``tests/mcp/raw_server.py``) answers one call with a text
of N bytes; the figure is the median time of that call as the run records it, from the
request to the result in the run. Reading should grow linearly with the size; past the
16 MiB limit the call fails at once with a tool error instead.

Run: ``python benchmarks/bench_mcp_results.py [--mib 1 4 8 15 20] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from convergent import Agent, ScriptedModel
from convergent.mcp import MCPServer

RAW = Path(__file__).parents[1] / "tests" / "mcp" / "raw_server.py"


async def _call_seconds(folder: Path, size: int) -> tuple[float, str]:
    plan = folder / "plan.json"
    tool = {"name": "big", "description": "a big answer", "inputSchema": {"type": "object"}}
    plan.write_text(json.dumps({"tools": [tool], "results": {"big": {"text": size}}}))
    server = MCPServer.stdio("raw", sys.executable, [str(RAW), str(plan)])
    model = ScriptedModel([{"tool_calls": [{"name": "big", "arguments": {}}]}, "done"])
    result = await Agent(model, mcp_servers=[server]).run("x")
    (call,) = result.tool_calls
    return call.duration, call.outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, nargs="+", default=[1, 4, 8, 15, 20])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mib in args.mib:
            size = int(mib * 2**20)
            runs = [asyncio.run(_call_seconds(Path(tmp), size)) for _ in range(args.repeat)]
            seconds = statistics.median(run[0] for run in runs)
            rows[f"{mib:g}"] = {"seconds": seconds, "outcome": runs[0][1]}
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"by_mib": rows, "load_1min": load}))
        return
    for mib, row in rows.items():
        print(f"{mib:>6} MiB  {row['seconds']:6.2f} s  {row['outcome']}")
    print(f"median of {args.repeat} calls each; load {load:.2f}")


if __name__ == "__main__":
    main()
