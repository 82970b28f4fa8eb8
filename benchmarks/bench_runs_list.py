"""``convergent runs`` over a large database: time and peak memory of listing every run.

A fresh database gets ``--runs`` stored runs (rows as the journal writes them, each
with a recipe and usage; see ``bench_ui.py``). Then ``convergent runs --limit N`` runs
as a separate process, as a table and with ``--json``, for each N of ``--limits``;
its wall time and its peak resident memory (``ru_maxrss`` of the child) are reported.

Run: ``python benchmarks/bench_runs_list.py [--runs 100000] [--limits 20 1000 100000] [--json]``.

Measured on the 2-core development machine, 100,000 runs, ``--limit 100000``: as a
table 122 s and 694 MB peak before rows were read and printed a page at a time (load
average 4), 8.8 s and 56 MB after (load average 12-15); with ``--json`` 7.5 s and 461 MB
before, 6.2 s and 55 MB after. ``--limit 20`` and ``--limit 1000`` take 1.2-1.6 s, mostly
start-up, before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_ui import fill
from convergent.durability.sqlite import RunStore


def listing(db: Path, limit: int, *, as_json: bool) -> dict[str, Any]:
    """Run ``convergent runs`` once; its time, peak memory and output size."""
    command = [sys.executable, "-m", "convergent", "runs", "--db", str(db), "--limit", str(limit)]
    if as_json:
        command.append("--json")
    script = (
        "import resource, subprocess, sys, time\n"
        "started = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
        "spent = time.perf_counter() - started\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(done.returncode, spent, peak, len(done.stdout), done.stderr[-300:])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, *command], capture_output=True, text=True, check=True
    ).stdout
    code, spent, peak, size, *_ = out.split(" ", 4)
    if code != "0":
        raise SystemExit(f"convergent runs failed: {out}")
    return {
        "seconds": round(float(spent), 2),
        "peak_rss_mb": round(int(peak) / 1024, 1),
        "output_mb": round(int(size) / 1e6, 2),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--limits", type=int, nargs="+", default=[20, 1_000, 100_000])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    db = Path(tempfile.mkdtemp(prefix="bench-runs-")) / "runs.db"
    began = time.perf_counter()
    with RunStore(db) as store:
        fill(store, args.runs)
    report: dict[str, Any] = {
        "runs": args.runs,
        "fill_seconds": round(time.perf_counter() - began, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "table": {str(n): listing(db, n, as_json=False) for n in args.limits},
        "json": {str(n): listing(db, n, as_json=True) for n in args.limits},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.runs} runs stored (filled in {report['fill_seconds']} s)")
    for form in ("table", "json"):
        for limit, figures in report[form].items():
            print(
                f"  runs --limit {limit:>7}{' --json' if form == 'json' else '       '}  "
                f"{figures['seconds']:>7.2f} s   peak {figures['peak_rss_mb']:>7.1f} MB   "
                f"output {figures['output_mb']:>6.2f} MB"
            )


if __name__ == "__main__":
    main()
