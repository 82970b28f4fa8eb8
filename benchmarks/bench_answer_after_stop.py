"""Is the embedded model's answer after a stop an answer, and does it use your own tool?

Runs the embedded model (SmolLM2-135M) on tasks that stop before the model answers by
itself, and sorts what each run gives the user (``RunResult.output``) into exactly one of:

- ``states the result``: plain text that states what the tool found (the usable kind);
- ``other text``: plain text that does not;
- ``prompt echoed``: the loop's own request for an answer, or its note, copied back;
- ``protocol JSON``: the structured protocol's ``{"thought": ..., "tool_calls": ...}``;
- ``repetition``: one sentence written three times or more;
- ``empty``: nothing.

This sorting is the benchmark's own (phrases of the loop's prompts, a sentence count),
not the check the loop applies. The scenarios:

- ``calculator, max_cycles=1``: the README's first task stopped after its first cycle
  (the built-in tools);
- ``own tool, max_cycles=1``: a population ``lookup`` tool of the user's, stopped after
  one cycle;
- ``own tool, stalled``: the same tool on a city it does not know, so the model repeats
  the call until the run stops ``stalled``;
- ``own tool beside built-ins`` / ``own tool alone`` / ``own tool and ask_user``: "What
  is the population of Paris?" with the user's tool next to the built-in tools, alone,
  and next to ``ask_user`` only (what ``convergent run --tool`` offers by default): does
  the model call the user's tool, and does the run give its result?

Each scenario runs with seeds 0..N-1 at ``--temperature`` (0.7 by default, so seeds
differ). ``--source LABEL=SRC`` (repeatable) runs the same plan under another tree of
convergent's sources in a child process, to compare before and after a change:

    python benchmarks/bench_answer_after_stop.py --source before=OLD/src --source after=src

Run: python benchmarks/bench_answer_after_stop.py [--runs 10] [--temperature 0.7]
         [--scenario NAME ...] [--source LABEL=SRC ...] [--json]
"""

from __future__ import annotations

import argparse
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

BUILTINS = ("calculator", "read_file", "list_dir", "ask_user")
"""The built-in tools ``convergent run`` offers."""
OWN_TOOL = "benchmarks.bench_answer_after_stop:lookup"
"""The user's own tool, by the import path ``--tool`` would take."""

VERDICTS = (
    "states the result",
    "other text",
    "prompt echoed",
    "protocol JSON",
    "repetition",
    "empty",
)

ECHO_MARKERS = (
    "cannot call tools any more",
    "reply with your best answer",
    "say briefly what is missing",
    "you have requested",
    "repeating it will not help",
)
"""Phrases of the loop's final-answer prompt and of its stall note."""


def lookup(city: str) -> str:
    """Return the population of a city.

    Args:
        city: City name.
    """
    return {"Paris": "2.1 million", "Tokyo": "14 million"}.get(city, f"unknown city: {city}")


@dataclass(frozen=True, slots=True)
class Scenario:
    """One task, its tools and its cycle limit, and what a usable answer states."""

    name: str
    task: str
    tools: tuple[str, ...]
    max_cycles: int
    fact: str
    """A regular expression an answer stating the tool's result matches."""


SCENARIOS = (
    Scenario(
        "calculator, max_cycles=1",
        "What is 17 * 23? Use the calculator tool.",
        BUILTINS,
        1,
        r"\b391\b",
    ),
    Scenario(
        "own tool, max_cycles=1",
        "What is the population of Paris? Use the lookup tool.",
        (OWN_TOOL,),
        1,
        r"2[.,]1 ?million|2,100,000",
    ),
    Scenario(
        "own tool, stalled",
        "What is the population of Atlantis? Use the lookup tool.",
        (OWN_TOOL,),
        8,
        r"unknown|not (?:known|found|available)|no (?:data|record|information)",
    ),
    Scenario(
        "own tool beside built-ins",
        "What is the population of Paris?",
        (*BUILTINS, OWN_TOOL),
        4,
        r"2[.,]1 ?million|2,100,000",
    ),
    Scenario(
        "own tool alone",
        "What is the population of Paris?",
        (OWN_TOOL,),
        4,
        r"2[.,]1 ?million|2,100,000",
    ),
    Scenario(
        "own tool and ask_user",
        "What is the population of Paris?",
        ("ask_user", OWN_TOOL),
        4,
        r"2[.,]1 ?million|2,100,000",
    ),
)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """One run of one scenario and what its output is."""

    scenario: str
    seed: int
    stop_reason: str
    stop_detail: str
    cycles: int
    calls: list[str]
    """Each tool call as ``name(arguments) -> result``."""
    output: str
    output_after_stop: bool
    verdict: str
    """One of `VERDICTS`."""
    used_own_tool: bool
    """The model called ``lookup`` at least once."""
    seconds: float


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [" ".join(p.lower().split()) for p in parts if len(p.split()) >= 3]


def judge(output: str, fact: str) -> str:
    """Sort a run's output into one of `VERDICTS` (see the module)."""
    text = output.strip()
    if not text:
        return "empty"
    lowered = " ".join(text.lower().split())
    if text.startswith("{") or '"tool_calls"' in text or '"thought"' in text:
        return "protocol JSON"
    if any(marker in lowered for marker in ECHO_MARKERS):
        return "prompt echoed"
    counts = Counter(_sentences(text))
    if counts and counts.most_common(1)[0][1] >= 3:
        return "repetition"
    return "states the result" if re.search(fact, text, re.IGNORECASE) else "other text"


def build(workspace: str, tools: Sequence[str], max_cycles: int, **overrides: Any) -> Any:
    """The agent `convergent run` builds for the embedded model with these tools."""
    from convergent.builder import build_agent
    from convergent.cli._app import app  # noqa: F401  (loads the command modules in order)
    from convergent.cli.run import DEFAULT_SYSTEM_PROMPT
    from convergent.spec import AgentSpec

    spec = AgentSpec(
        model="local",
        system_prompt=DEFAULT_SYSTEM_PROMPT,
        workspace=workspace,
        tools=list(tools),
        limits={"max_cycles": max_cycles},
    )
    return build_agent(spec, **overrides)


async def run_all(plan: Sequence[tuple[Scenario, int]], temperature: float) -> list[RunOutcome]:
    """Run each ``(scenario, seed)`` of ``plan`` on one embedded-model server."""
    from convergent import ModelSettings

    outcomes: list[RunOutcome] = []
    with tempfile.TemporaryDirectory() as workspace:
        model = build(workspace, BUILTINS, 1).model
        try:
            for scenario, seed in plan:
                settings = ModelSettings(temperature=temperature, extra={"seed": seed})
                agent = build(
                    workspace, scenario.tools, scenario.max_cycles, model=model, settings=settings
                )
                started = time.perf_counter()
                result = await agent.run(scenario.task)
                outcomes.append(
                    RunOutcome(
                        scenario=scenario.name,
                        seed=seed,
                        stop_reason=result.stop_reason.value,
                        stop_detail=result.stop_detail,
                        cycles=result.cycles,
                        calls=[
                            f"{r.name}({json.dumps(r.arguments)}) -> {r.result}"
                            for r in result.tool_calls
                        ],
                        output=result.output,
                        output_after_stop=result.output_after_stop,
                        verdict=judge(result.output, scenario.fact),
                        used_own_tool=any(r.name == "lookup" for r in result.tool_calls),
                        seconds=time.perf_counter() - started,
                    )
                )
                print(_progress(outcomes[-1]), file=sys.stderr, flush=True)
        finally:
            await model.aclose()
    return outcomes


def _progress(run: RunOutcome) -> str:
    output = run.output.replace("\n", " ")[:70]
    return (
        f"  {run.scenario[:26]:<26} seed {run.seed:>2}  {run.stop_reason:<10} "
        f"{run.verdict:<17} {run.seconds:5.1f} s  {output!r}"
    )


def plan_runs(runs: int, names: Sequence[str]) -> list[tuple[Scenario, int]]:
    """Every chosen scenario with seeds 0..runs-1."""
    chosen = [s for s in SCENARIOS if not names or s.name in names]
    return [(scenario, seed) for scenario in chosen for seed in range(runs)]


def summary(outcomes: Sequence[RunOutcome]) -> dict[str, dict[str, Any]]:
    """Per scenario: runs, stops, verdicts, answers after a stop, own-tool use."""
    table: dict[str, dict[str, Any]] = {}
    for scenario in SCENARIOS:
        group = [o for o in outcomes if o.scenario == scenario.name]
        if not group:
            continue
        verdicts = Counter(o.verdict for o in group)
        stopped = [o for o in group if o.stop_reason not in ("completed", "handed_off")]
        table[scenario.name] = {
            "runs": len(group),
            "stops": dict(Counter(o.stop_reason for o in group)),
            "verdicts": {name: verdicts[name] for name in VERDICTS},
            "usable": verdicts["states the result"],
            "usable_after_stop": sum(o.verdict == "states the result" for o in stopped),
            "stopped": len(stopped),
            "marked_after_stop": sum(o.output_after_stop for o in group),
            "used_own_tool": sum(o.used_own_tool for o in group),
            "seconds_per_run": sum(o.seconds for o in group) / len(group),
        }
    return table


def print_report(sources: dict[str, list[RunOutcome]], args: argparse.Namespace) -> None:
    load = os.getloadavg()
    print(
        f"answers after a stop, embedded model: temperature {args.temperature:g}, seeds "
        f"0..{args.runs - 1}; load average now {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    for label, outcomes in sources.items():
        print(f"\n{label}:")
        for name, row in summary(outcomes).items():
            verdicts = ", ".join(f"{k} {v}" for k, v in row["verdicts"].items() if v)
            print(
                f"  {name:<26} runs {row['runs']:>2}  stops {row['stops']}  "
                f"usable after a stop {row['usable_after_stop']}/{row['stopped']}  "
                f"marked after stop {row['marked_after_stop']}  "
                f"own tool called {row['used_own_tool']}  "
                f"{row['seconds_per_run']:.1f} s/run"
            )
            print(f"  {'':<26} {verdicts}")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="seeds per scenario")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        choices=[s.name for s in SCENARIOS],
        help="run only this scenario (repeatable)",
    )
    add_source_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    plan = plan_runs(args.runs, args.scenario)
    if args.worker:
        outcomes = asyncio.run(run_all(plan, args.temperature))
        print(json.dumps([asdict(o) for o in outcomes]))
        return 0
    child = [f"--runs={args.runs}", f"--temperature={args.temperature}"]
    child += [f"--scenario={name}" for name in args.scenario]
    sources = runs_by_source(
        "bench_answer_after_stop",
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
