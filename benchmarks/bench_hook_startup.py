"""Start-up time of ``convergent hook stop``, the command Claude Code runs at every stop.

The hook runs where a user installed convergent, so the measurement does too: a fresh
virtual environment (no system site packages) with exactly the runtime dependencies of
``requirements-runtime.lock`` and convergent built from this source tree, both installed
with ``pip install --no-deps``. Each measurement starts a fresh process that answers a
real Stop payload against a real state file (three open atoms, so the answer is a
block). Beside it: the bare interpreter (``python -c pass``, the floor) and a process
that only imports the full command line and agent stack (what every hook call would pay
if the hook loaded them). The figure that matters is the hook's median; the target is
under 150 ms.

Run: ``python benchmarks/bench_hook_startup.py [--repeat 30] [--venv DIR] [--json]``.
Without ``--venv`` the environment is built in a temporary folder and removed after;
with it, the folder is built once and reused by later runs (delete it to rebuild).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements-runtime.lock"
TARGET_SECONDS = 0.150

_WRITE_STATE = """
import sys
from pathlib import Path
from convergent.coordinator import Atom, BaseCase, CommandCheck, StateStore, WorkflowState

state = WorkflowState(
    goal="ship it",
    atoms=[Atom(id=f"a{n}", title=f"item {n}") for n in range(3)],
    base_case=BaseCase(checks=[CommandCheck(name="tests", command=["true"])]),
)
StateStore(Path(sys.argv[1]) / "workflow-state.yaml").create(state)
"""


def _build_venv(venv: Path) -> None:
    """A virtual environment with the runtime lock and convergent from this tree."""
    if (venv / "bin" / "convergent").exists():
        return
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps"]
    subprocess.run([*pip, "-r", str(LOCK)], check=True)
    subprocess.run([*pip, str(ROOT)], check=True)


def _payload(folder: Path) -> bytes:
    """What Claude Code sends a Stop hook on stdin."""
    return json.dumps(
        {
            "session_id": "3f2a9c1e-bench",
            "transcript_path": str(folder / "transcript.jsonl"),
            "cwd": str(folder),
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
    ).encode()


def _time(
    command: list[str], stdin: bytes, cwd: Path, env: dict[str, str], repeat: int
) -> tuple[float, float]:
    """Median wall time and median CPU time of ``repeat`` fresh processes running ``command``.

    CPU time (user + system, of the process and its children) is what the machine's load
    changes least; wall time is what Claude Code waits for.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, input=stdin, cwd=cwd, env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def measure(venv: Path, repeat: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of the hook and its two reference processes, in ``venv``."""
    python = str(venv / "bin" / "python")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        subprocess.run([python, "-c", _WRITE_STATE, str(folder)], env=env, check=True)
        payload = _payload(folder)
        hook = [str(venv / "bin" / "convergent"), "hook", "stop"]
        answer = subprocess.run(hook, input=payload, cwd=folder, env=env, capture_output=True)
        if json.loads(answer.stdout).get("decision") != "block":
            raise SystemExit(f"the hook did not block: {answer.stdout!r} {answer.stderr!r}")
        _time(hook, payload, folder, env, 2)  # warm the file cache
        cases = {
            "python -c pass": [python, "-c", "pass"],
            "convergent hook stop": hook,
            "import the full command line": [
                python,
                "-c",
                "import convergent.cli._app, convergent.agent",
            ],
        }
        return {
            name: _time(command, payload, folder, env, repeat) for name, command in cases.items()
        }


def main() -> None:
    """Build (or reuse) the environment, measure, and print the medians with the load."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--venv", type=Path, help="Build the environment here and keep it.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        venv = args.venv or Path(tmp) / "venv"
        _build_venv(venv)
        load_before = os.getloadavg()
        results = measure(venv, args.repeat)
        load_after = os.getloadavg()
    if args.json:
        report = {
            "median_wall_seconds": {name: wall for name, (wall, _) in results.items()},
            "median_cpu_seconds": {name: cpu for name, (_, cpu) in results.items()},
            "repeat": args.repeat,
            "target_seconds": TARGET_SECONDS,
            "load_before": load_before,
            "load_after": load_after,
        }
        print(json.dumps(report))
        return
    for name, (wall, cpu) in results.items():
        print(f"{name:32s} {wall * 1000:7.1f} ms wall, {cpu * 1000:7.1f} ms CPU (medians)")
    hook = results["convergent hook stop"][0]
    verdict = "under" if hook < TARGET_SECONDS else "OVER"
    print(f"hook: {verdict} the {TARGET_SECONDS * 1000:.0f} ms target; {args.repeat} runs each")
    loads = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(load_before, load_after, strict=True))
    print(f"load average 1/5/15 min before/after: {loads}")


if __name__ == "__main__":
    main()
