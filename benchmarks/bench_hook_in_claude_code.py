"""How long Claude Code waits for ``convergent hook stop``, measured inside the real CLI.

The hook is installed as a user installs it (a fresh virtual environment with the
runtime lock and convergent built from this tree, as ``bench_hook_startup.py`` builds
it) in the pinned Claude Code CLI (``.ci/claude-code``), which talks to the loopback fake
of the Messages API from ``tests/claude_code``. The model answers "Done." at every turn
and the hook blocks each stop (three open atoms, ``block_when_active``, Claude Code's
block cap off), so one session makes ``--stops`` Stop hook calls in a row. Claude Code
reports each call in its ``stream-json`` output as a ``hook_started`` and a
``hook_response`` event; the time between the two lines, as they arrive on the CLI's
stdout, is what the CLI waited: the hook's process start, its work, and the CLI's
reading of the answer. Beside it, the same hook started directly
(``subprocess.run``) with the same payload: the figure outside the CLI.

Run: ``python benchmarks/bench_hook_in_claude_code.py [--stops 40] [--sessions 3]
[--venv DIR] [--event stop|pre-tool-use] [--json]``. It needs the CLI from
``npm ci --prefix .ci/claude-code``. The target is a median under 150 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.claude_code.claude_cli import ClaudeCode, find_claude, reap  # noqa: E402
from tests.claude_code.fake_anthropic import (  # noqa: E402
    FakeAnthropic,
    MessagesRequest,
    OutboundTrap,
    Reply,
    text,
    tool_use,
)

from benchmarks.bench_hook_startup import _build_venv  # noqa: E402

TARGET_SECONDS = 0.150

_WRITE_STATE = """
import sys
from pathlib import Path
from convergent.coordinator import Atom, Control, StateStore, WorkflowState

state = WorkflowState(
    goal="ship it",
    atoms=[Atom(id=f"a{n}", title=f"item {n}") for n in range(3)],
    control=Control(max_stall_count=1000, max_iterations=1000),
)
state.control.hook.block_when_active = True
state.control.hook.max_consecutive_blocks = 1000
StateStore(Path(sys.argv[1]) / "workflow-state.yaml").create(state)
"""


def _settings(convergent: Path, event: str) -> dict[str, Any]:
    command = f"{convergent} hook {event}"
    name = "Stop" if event == "stop" else "PreToolUse"
    return {"hooks": {name: [{"hooks": [{"type": "command", "command": command}]}]}}


def _script(event: str, stops: int) -> Any:
    """The model's turns: answers for a Stop hook; one Bash call per turn for PreToolUse."""
    calls = iter(range(stops))

    def model(request: MessagesRequest) -> Reply:
        if event == "stop":
            return text("Done.")
        if next(calls, None) is None:
            return text("Done.")
        return tool_use("Bash", {"command": "true", "description": "nothing"})

    return model


def session(claude: Path, venv: Path, folder: Path, event: str, stops: int) -> list[float]:
    """One ``claude -p`` session: the CLI's wait for each hook call."""
    code = ClaudeCode(claude, folder / "claude-code")
    code.hook_path = [str(venv / "bin")]
    subprocess.run(
        [str(venv / "bin" / "python"), "-c", _WRITE_STATE, str(code.project)], check=True
    )
    code.write_settings(_settings(venv / "bin" / "convergent", event))
    waits: list[float] = []
    with FakeAnthropic(_script(event, stops)) as fake, OutboundTrap() as trap:
        token = uuid.uuid4().hex
        env = code.environment(fake, trap, token)
        env["CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"] = "0"
        env.pop("PYTHONPATH", None)
        args = ["-p", "go", "--output-format", "stream-json", "--verbose"]
        args += ["--include-hook-events", "--max-turns", str(stops + 1)]
        if event != "stop":
            args += ["--allowedTools", "Bash"]
        process = subprocess.Popen(
            [str(claude), *args],
            cwd=code.project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        started: dict[str, float] = {}
        assert process.stdout is not None
        for line in process.stdout:
            now = time.perf_counter()
            if not line.startswith("{"):
                continue
            item = json.loads(line)
            if item.get("subtype") == "hook_started":
                started[item["hook_id"]] = now
            elif item.get("subtype") == "hook_response" and item["hook_id"] in started:
                waits.append(now - started.pop(item["hook_id"]))
        process.wait(timeout=60)
        reap(token, code.root)
    return waits


def outside(venv: Path, folder: Path, event: str, repeat: int) -> list[float]:
    """The same hook started directly, ``repeat`` times, with a payload like the CLI's."""
    project = folder / "claude-code" / "project"
    payload = {
        "session_id": "bench",
        "transcript_path": str(folder / "transcript.jsonl"),
        "cwd": str(project),
        "hook_event_name": "Stop" if event == "stop" else "PreToolUse",
        "stop_hook_active": True,
        "tool_name": "Bash",
        "tool_input": {"command": "true"},
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"] = "0"
    command = [str(venv / "bin" / "convergent"), "hook", event]
    waits = []
    for _ in range(repeat):
        began = time.perf_counter()
        subprocess.run(command, input=json.dumps(payload).encode(), env=env, capture_output=True)
        waits.append(time.perf_counter() - began)
    return waits


def _summary(waits: list[float]) -> dict[str, float]:
    ordered = sorted(waits)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1000,
        "min_ms": ordered[0] * 1000,
        "max_ms": ordered[-1] * 1000,
        "calls": len(ordered),
    }


def main() -> None:
    """Build (or reuse) the environment, run the sessions, print the waits and the load."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=40, help="hook calls per session")
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--event", choices=["stop", "pre-tool-use"], default="stop")
    parser.add_argument("--venv", type=Path, help="Build the environment here and keep it.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    claude = find_claude()
    if claude is None:
        raise SystemExit("the Claude Code CLI is not installed: npm ci --prefix .ci/claude-code")
    load_before = os.getloadavg()
    inside: list[float] = []
    direct: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        venv = args.venv or Path(tmp) / "venv"
        _build_venv(venv)
        for number in range(args.sessions):
            folder = Path(tmp) / f"session{number}"
            inside += session(claude, venv, folder, args.event, args.stops)
            direct += outside(venv, folder, args.event, args.stops)
    load_after = os.getloadavg()
    report = {
        "event": args.event,
        "inside_claude_code": _summary(inside),
        "started_directly": _summary(direct),
        "target_ms": TARGET_SECONDS * 1000,
        "load_before": load_before,
        "load_after": load_after,
    }
    if args.json:
        print(json.dumps(report))
        return
    for name in ("inside_claude_code", "started_directly"):
        figures = report[name]
        assert isinstance(figures, dict)
        print(
            f"{name:20s} median {figures['median_ms']:6.1f} ms, p90 {figures['p90_ms']:6.1f}, "
            f"min {figures['min_ms']:6.1f}, max {figures['max_ms']:6.1f} ({figures['calls']} calls)"
        )
    median = report["inside_claude_code"]["median_ms"]  # type: ignore[index]
    print(f"inside the CLI: {'under' if median < 150 else 'OVER'} the 150 ms target")
    loads = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(load_before, load_after, strict=True))
    print(f"load average 1/5/15 min before/after: {loads}")


if __name__ == "__main__":
    main()
