"""Does the embedded model's final answer agree with the calculator's result?

Runs the README's first command, ``convergent run "What is 17 * 23? Use the calculator
tool."``, N times on the embedded model (SmolLM2-135M) with the agent the command line
builds (its system prompt and built-in tools), each run with its own sampling seed, and
five other one-step arithmetic tasks of the same kind a few times each. Each run is
sorted into exactly one of:

- ``agrees``: completed, the calculator returned the right value, and the answer states
  it with no other number than the task's own;
- ``contradicts``: completed after the calculator's right value, but the answer states a
  number that is neither that value nor one of the task's;
- ``omits``: completed after the calculator's right value, with no result in the answer;
- ``no tool result``: completed without the calculator ever returning the right value
  (no call, or a call with an empty or malformed expression);
- ``other stop``: any stop but ``completed`` (``stalled``, ``max_cycles``...).

Temperature 0 (the command line's default) gives one answer per task whatever the
seed, so the runs sample at ``--temperature`` (0.7 by default) to see the spread of
answers; ``--temperature 0`` shows the default's one answer per task.

``--source LABEL=SRC`` (repeatable) runs the same seeds under another tree of
convergent's sources in a child process, to compare before and after a change:

    python benchmarks/bench_embedded_demo.py --source before=../main/src --source after=src

Run: python benchmarks/bench_embedded_demo.py [--runs 50] [--other-runs 10]
         [--temperature 0.7] [--source LABEL=SRC ...] [--json]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks._sources import add_source_arguments, runs_by_source

ROOT = Path(__file__).resolve().parent.parent

DEMO_TASK = "What is 17 * 23? Use the calculator tool."
"""The task of the README's first command."""

OTHER_TASKS = (
    "What is 48 * 12? Use the calculator tool.",
    "What is 29 * 31? Use the calculator tool.",
    "What is 56 * 78? Use the calculator tool.",
    "What is 365 + 287? Use the calculator tool.",
    "What is 1024 - 389? Use the calculator tool.",
)
"""Arithmetic tasks of the same kind, to see whether a change holds beyond the demo."""

OUTCOMES = ("agrees", "contradicts", "omits", "no tool result", "other stop")

_EXPRESSION = re.compile(r"\d+ [-+*] \d+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """One run of one task and how its answer relates to the calculator's result."""

    task: str
    """The task given to the agent."""
    seed: int
    """Sampling seed of every request in the run."""
    outcome: str
    """One of `OUTCOMES`."""
    stop_reason: str
    """The run's stop reason."""
    cycles: int
    """Cycles the run took."""
    calls: list[str]
    """Each tool call as ``name(arguments) -> result``."""
    answer: str
    """The run's final output."""
    seconds: float
    """Wall time of the run."""


def expected_value(task: str) -> float:
    """The value of the arithmetic expression in ``task``, computed here, not by the tool."""
    match = _EXPRESSION.search(task)
    assert match is not None, task
    tree = ast.parse(match.group(0), mode="eval").body
    assert isinstance(tree, ast.BinOp)
    assert isinstance(tree.left, ast.Constant) and isinstance(tree.right, ast.Constant)
    left, right = float(tree.left.value), float(tree.right.value)
    match tree.op:
        case ast.Add():
            return left + right
        case ast.Sub():
            return left - right
        case ast.Mult():
            return left * right
    raise AssertionError(task)


def numbers(text: str) -> list[float]:
    """Every number written in ``text`` (thousands separators removed)."""
    return [float(n) for n in _NUMBER.findall(re.sub(r"(?<=\d),(?=\d{3})", "", text))]


def classify(task: str, stop_reason: str, results: Sequence[str], answer: str) -> str:
    """Sort one run into one of `OUTCOMES` (``results``: the calculator's OK results)."""
    if stop_reason != "completed":
        return "other stop"
    value = expected_value(task)
    if not any(value in numbers(result) for result in results):
        return "no tool result"
    stated = set(numbers(answer)) - set(numbers(task))
    if stated - {value}:
        return "contradicts"
    return "agrees" if value in stated else "omits"


def cli_agent(workspace: str, **overrides: Any) -> Any:
    """The agent `convergent run` builds for the embedded model, in ``workspace``."""
    from convergent.builder import build_agent
    from convergent.cli._app import app  # noqa: F401  (loads the command modules in order)
    from convergent.cli.run import DEFAULT_SYSTEM_PROMPT
    from convergent.spec import AgentSpec

    spec = AgentSpec(model="local", system_prompt=DEFAULT_SYSTEM_PROMPT, workspace=workspace)
    return build_agent(spec, **overrides)


async def run_all(plan: Sequence[tuple[str, int]], temperature: float) -> list[RunOutcome]:
    """Run each ``(task, seed)`` of ``plan`` with one agent on one embedded-model server."""
    from convergent import ModelSettings

    outcomes: list[RunOutcome] = []
    with tempfile.TemporaryDirectory() as workspace:
        model = cli_agent(workspace).model
        try:
            for task, seed in plan:
                settings = ModelSettings(temperature=temperature, extra={"seed": seed})
                agent = cli_agent(workspace, model=model, settings=settings)
                started = time.perf_counter()
                result = await agent.run(task)
                seconds = time.perf_counter() - started
                ok = [r.result for r in result.tool_calls if r.name == "calculator" and r.ok]
                outcomes.append(
                    RunOutcome(
                        task=task,
                        seed=seed,
                        outcome=classify(task, result.stop_reason.value, ok, result.output),
                        stop_reason=result.stop_reason.value,
                        cycles=result.cycles,
                        calls=[
                            f"{r.name}({json.dumps(r.arguments)}) -> {r.result}"
                            for r in result.tool_calls
                        ],
                        answer=result.output,
                        seconds=seconds,
                    )
                )
                print(_progress(outcomes[-1]), file=sys.stderr, flush=True)
        finally:
            await model.aclose()
    return outcomes


def _progress(run: RunOutcome) -> str:
    answer = run.answer.replace("\n", " ")[:80]
    where = f"{run.task[:24]:<24} seed {run.seed:>3}"
    return f"  {where}  {run.outcome:<14} {run.seconds:5.1f} s  {answer!r}"


def plan_runs(runs: int, other_runs: int) -> list[tuple[str, int]]:
    """The demo task with seeds 0..runs-1, then each other task with seeds 0..other_runs-1."""
    plan = [(DEMO_TASK, seed) for seed in range(runs)]
    plan += [(task, seed) for task in OTHER_TASKS for seed in range(other_runs)]
    return plan


def summary(outcomes: Sequence[RunOutcome]) -> dict[str, Any]:
    """Counts per outcome for the demo task and for the other tasks."""
    demo = [o for o in outcomes if o.task == DEMO_TASK]
    others = [o for o in outcomes if o.task != DEMO_TASK]

    def counts(group: Sequence[RunOutcome]) -> dict[str, Any]:
        by_outcome = Counter(o.outcome for o in group)
        completed = sum(o.stop_reason == "completed" for o in group)
        with_result = sum(by_outcome[name] for name in ("agrees", "contradicts", "omits"))
        return {
            "runs": len(group),
            "completed": completed,
            "with_tool_result": with_result,
            **{name: by_outcome[name] for name in OUTCOMES},
            "other_stops": dict(
                Counter(o.stop_reason for o in group if o.stop_reason != "completed")
            ),
            "seconds_per_run": sum(o.seconds for o in group) / max(len(group), 1),
        }

    per_task = {task: counts([o for o in others if o.task == task]) for task in OTHER_TASKS}
    return {"demo": counts(demo), "other_tasks": counts(others), "per_task": per_task}


def print_report(sources: dict[str, list[RunOutcome]], args: argparse.Namespace) -> None:
    load = os.getloadavg()
    print(
        f"embedded demo: temperature {args.temperature:g}, seeds 0..{args.runs - 1} on the demo, "
        f"0..{args.other_runs - 1} on {len(OTHER_TASKS)} other tasks; "
        f"load average now {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    rows = [("runs", "runs"), ("completed", "completed")]
    rows += [("with_tool_result", "  calculator returned the right value")]
    rows += [(name, f"    answer {name}") for name in ("agrees", "contradicts", "omits")]
    rows += [("no tool result", "  without the right tool result"), ("other stop", "other stops")]
    summaries = {label: summary(outcomes) for label, outcomes in sources.items()}
    header = ["", *[f"{label}: {group}" for label in summaries for group in ("demo", "others")]]
    table = [header]
    for key, title in rows:
        line = [title]
        for data in summaries.values():
            line += [str(data["demo"][key]), str(data["other_tasks"][key])]
        table.append(line)
    line = ["seconds per run"]
    for data in summaries.values():
        line += [
            f"{data['demo']['seconds_per_run']:.1f}",
            f"{data['other_tasks']['seconds_per_run']:.1f}",
        ]
    table.append(line)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    print()
    print("per other task (agrees / contradicts / omits / no tool result / other stop):")
    for task in OTHER_TASKS:
        cells = []
        for label, data in summaries.items():
            c = data["per_task"][task]
            cells.append(f"{label} " + "/".join(str(c[name]) for name in OUTCOMES))
        print(f"  {task:<42} " + "   ".join(cells))
    for label, data in summaries.items():
        stops = {**data["demo"]["other_stops"]}
        for reason, count in data["other_tasks"]["other_stops"].items():
            stops[reason] = stops.get(reason, 0) + count
        if stops:
            print(f"other stops under {label}: {stops}")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs of the demo task")
    parser.add_argument("--other-runs", type=int, default=10, help="runs of each other task")
    parser.add_argument("--temperature", type=float, default=0.7)
    add_source_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    plan = plan_runs(args.runs, args.other_runs)
    if args.worker:
        outcomes = asyncio.run(run_all(plan, args.temperature))
        print(json.dumps([asdict(o) for o in outcomes]))
        return 0
    child = [f"--runs={args.runs}", f"--other-runs={args.other_runs}"]
    child.append(f"--temperature={args.temperature}")
    sources = runs_by_source(
        "bench_embedded_demo",
        args.source,
        child,
        lambda: asyncio.run(run_all(plan, args.temperature)),
        lambda row: RunOutcome(**row),
    )
    if sources is None:
        return 2
    if args.json:
        print(json.dumps({label: [asdict(o) for o in runs] for label, runs in sources.items()}))
        return 0
    print_report(sources, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
