"""How ``convergent hook stop`` scales with the state file: chains of N dependent atoms.

Each measurement starts a fresh hook process, as Claude Code does, against a state file
whose atoms form one chain (atom i depends on atom i-1, every one still open), so that
reading, validating (duplicate ids, unknown dependencies, cycles), deciding and writing
the file back all see every atom. The figure that matters is the time per atom above a
one-atom file (the process's start-up): it should stay flat as N grows. CPU time (the
hook's user + system time) is shown beside the wall time because it moves less with
the machine's load.

Run: ``python benchmarks/bench_hook_scale.py [--atoms 1000 5000 10000 20000] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def _chain(folder: Path, atoms: int) -> None:
    data = {
        "goal": "a long chain of dependent work items",
        "atoms": [
            {"id": f"a{n}", **({"depends_on": [f"a{n - 1}"]} if n else {})} for n in range(atoms)
        ],
        "base_case": {"checks": [{"name": "tests", "kind": "command", "command": ["true"]}]},
    }
    text = yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False)
    (folder / "workflow-state.yaml").write_text(text, encoding="utf-8")


def _once(command: list[str], stdin: bytes, folder: Path, atoms: int) -> tuple[float, float]:
    _chain(folder, atoms)  # afresh: the hook writes its counters back
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, cwd=folder, capture_output=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if b'"decision": "block"' not in done.stdout:
        raise SystemExit(f"the hook did not block for {atoms} atoms: {done.stdout[:300]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atoms", type=int, nargs="+", default=[1000, 5000, 10000, 20000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    beside = Path(sys.executable).with_name("convergent")  # this environment's own script
    exe = str(beside) if beside.exists() else shutil.which("convergent") or "convergent"
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        stdin = json.dumps({"session_id": "s", "cwd": tmp, "hook_event_name": "Stop"}).encode()
        for atoms in [1, *args.atoms]:
            runs = [_once([exe, "hook", "stop"], stdin, folder, atoms) for _ in range(args.repeat)]
            wall = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            base = results[1]["cpu_seconds"] if atoms > 1 else cpu
            above = (cpu - base) * 1000 / max(1, atoms - 1)
            results[atoms] = {"wall_seconds": wall, "cpu_seconds": cpu, "cpu_ms_per_atom": above}
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"by_atoms": results, "load_1min": load}))
        return
    for atoms, row in results.items():
        print(
            f"{atoms:7d} atoms  wall {row['wall_seconds']:6.2f} s  cpu {row['cpu_seconds']:6.2f} s"
            f"  {row['cpu_ms_per_atom']:.3f} ms cpu per atom above one atom"
        )
    print(f"median of {args.repeat} runs each; load {load:.2f}")


if __name__ == "__main__":
    main()
