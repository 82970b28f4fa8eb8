"""Start-up time of ``convergent hook stop``, the command Claude Code runs at every stop.

Each measurement starts a fresh process that answers a real Stop payload against a
real state file (three open atoms, so the answer is a block). Beside it: the bare
interpreter (``python -c pass``, the floor) and a process that only imports the full
command line (what every hook call paid when it loaded the whole agent stack). The
figure that matters is the hook's median; the floor shows how much of it is Python.

Run: ``python benchmarks/bench_hook_startup.py [--repeat 20] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from convergent.coordinator import Atom, BaseCase, CommandCheck, StateStore, WorkflowState


def _state(folder: Path) -> None:
    state = WorkflowState(
        goal="ship it",
        atoms=[Atom(id=f"a{n}", title=f"item {n}") for n in range(3)],
        base_case=BaseCase(checks=[CommandCheck(name="tests", command=["true"])]),
    )
    StateStore(folder / "workflow-state.yaml").create(state)


def _time(command: list[str], stdin: bytes, cwd: Path, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, input=stdin, cwd=cwd, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    beside = Path(sys.executable).with_name("convergent")  # this environment's own script
    exe = str(beside) if beside.exists() else shutil.which("convergent") or "convergent"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _state(folder)
        payload = json.dumps(
            {"session_id": "s", "cwd": str(folder), "hook_event_name": "Stop"}
        ).encode()
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "convergent hook stop": [exe, "hook", "stop"],
            "import the full command line": [
                sys.executable,
                "-c",
                "import convergent.cli._app, convergent.agent",
            ],
        }
        _time(cases["convergent hook stop"], payload, folder, 2)  # warm the file cache
        results = {
            name: statistics.median(_time(command, payload, folder, args.repeat))
            for name, command in cases.items()
        }
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"median_seconds": results, "load_1min": load}))
        return
    for name, seconds in results.items():
        print(f"{name:32s} {seconds * 1000:7.1f} ms (median of {args.repeat})")
    hook = results["convergent hook stop"] - results["python -c pass"]
    print(f"hook above the bare interpreter: {hook * 1000:.1f} ms; load {load:.2f}")


if __name__ == "__main__":
    main()
