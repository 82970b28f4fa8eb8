"""How fast ``convergent replay`` goes through many recorded runs, and how its memory grows.

Writes a corpus of synthetic recorded runs (plain message lists, one run per line, ten
files; seeded, so every machine gets the same runs): agent turns of 2 to 24 replies
over a handful of tools whose results mostly change, some runs with a failure streak,
some with a real loop, about half of them labelled successful (``--calls N``: one turn
of N calls each instead). Then each measurement replays it in a fresh process (the
``convergent.replay.replay`` function) and reports the wall time, the CPU time and the
process's peak memory, for 1,000 and 10,000 runs and for one and two worker processes.
``--source DIR`` measures the convergent under ``DIR`` (another checkout's ``src``)
instead of the one this Python imports, on the same corpus.

Run from the repository root:
    python benchmarks/bench_replay.py            # 10,000 runs
    python benchmarks/bench_replay.py --runs 2000 --workers 1
    python benchmarks/bench_replay.py --calls 20 --workers 1 --source src --source ../main/src
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOOLS = ("search", "read", "write", "status", "pay")
FILES = 10


def _call(number: int, tool: str, arguments: dict[str, Any]) -> Any:
    function = {"name": tool, "arguments": json.dumps(arguments)}
    return {"id": f"c{number}", "type": "function", "function": function}


def synthetic_run(rng: random.Random, index: int, calls: int | None = None) -> dict[str, Any]:
    """One recorded run: turns of tool-calling replies and a final answer each.

    With ``calls``, one turn of exactly that many calls.
    """
    messages: list[dict[str, Any]] = []
    number = 0
    looping = rng.random() < 0.05
    failing = rng.random() < 0.05
    for turn in range(1 if calls else rng.randint(1, 3)):
        messages.append({"role": "user", "content": f"task {index} part {turn}"})
        for reply in range(calls or rng.randint(2, 24)):
            number += 1
            if looping and turn == 0 and 2 <= reply < 7:
                tool, arguments, result, failed = "status", {"job": 1}, "pending", False
            elif failing and turn == 0 and reply < 4:
                tool, arguments, result, failed = "pay", {"n": reply}, "Error: declined", True
            else:
                tool = rng.choice(TOOLS)
                arguments = {"q": rng.randint(0, 50), "page": rng.randint(0, 3)}
                result, failed = f"{tool} result {rng.randint(0, 10**6)}", False
            call = _call(number, tool, arguments)
            messages.append({"role": "assistant", "tool_calls": [call]})
            content = {"role": "tool", "tool_call_id": f"c{number}", "content": result}
            messages.append({**content, "is_error": failed})
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    return {"id": f"run-{index}", "messages": messages, "success": rng.random() < 0.5}


def write_corpus(folder: Path, runs: int, seed: int = 0, calls: int | None = None) -> Path:
    """``runs`` synthetic runs in ``FILES`` JSON Lines files under ``folder``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-runs // FILES)
    for part in range(FILES):
        first = part * per_file
        count = max(0, min(per_file, runs - first))
        with (folder / f"runs-{part:02d}.jsonl").open("w", encoding="utf-8") as out:
            for index in range(first, first + count):
                out.write(json.dumps(synthetic_run(rng, index, calls)) + "\n")
    return folder


_MEASURE = """
import resource, sys, time
from convergent.replay import replay
start = time.perf_counter()
report = replay([sys.argv[1]], workers=int(sys.argv[2]))
seconds = time.perf_counter() - start
total = report.total
own = resource.getrusage(resource.RUSAGE_SELF)
children = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
print(sum(total.runs.values()), seconds, own.ru_maxrss, cpu,
      total.successful_cut, total.failed_stopped, len(total.stopped))
"""


def measure(folder: Path, workers: int, source: str | None = None) -> dict[str, Any]:
    """Replay ``folder`` in a fresh process; its time, CPU time and peak memory."""
    env = os.environ.copy()
    if source is not None:
        env["PYTHONPATH"] = str(Path(source).resolve())
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(folder), str(workers)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    wall = time.perf_counter() - started
    runs, seconds, rss, cpu, cut, stopped, kept = done.stdout.split()
    return {
        "source": source or "(installed)",
        "runs": int(runs),
        "workers": workers,
        "replay_seconds": round(float(seconds), 2),
        "cpu_seconds": round(float(cpu), 2),
        "process_seconds": round(wall, 2),
        "peak_rss_mib": round(int(rss) / 1024, 1),
        "successful_cut": int(cut),
        "failed_stopped": int(stopped),
        "stops_kept": int(kept),
    }


def main(argv: list[str] | None = None) -> int:
    """Write the corpora, measure, print one JSON line per measurement."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs of the large corpus")
    parser.add_argument("--workers", type=int, action="append", help="worker counts (1 and 2)")
    parser.add_argument("--calls", type=int, help="one turn of this many calls per run")
    parser.add_argument(
        "--source", action="append", help="a convergent src folder to measure (repeatable)"
    )
    args = parser.parse_args(argv)
    workers = args.workers or [1, 2]
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as scratch:
        for runs in sorted({1_000, args.runs}):
            folder = write_corpus(Path(scratch) / f"runs-{runs}", runs, calls=args.calls)
            for count in workers:
                for source in args.source or [None]:
                    print(json.dumps(measure(folder, count, source)), flush=True)
    print(f"load average after: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
