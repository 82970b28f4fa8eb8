"""Run the convergence suite and print every policy's rates, then the stop rules' cases.

Usage:
    python benchmarks/run_convergence.py [SEED] [TASKS_PER_SCENARIO] [--scenario NAME ...]
        [--policy NAME ...] [--source LABEL=SRC ...] [--json]

Without ``--source`` the suite runs here. The first table gives, per scenario and
policy, the false stops (false positives), the missed stops (false negatives) and the
accuracy. The second gives, for the scenarios of the stop rules (kinds ``progress``,
``stuck`` and ``budget``), the counts behind them for the rules before progress-aware
stopping (``counting``) and the library's loop (``objective``): false and missed stops,
cycles past the done cycle, notes to the model, answers after a stop, payments sent and
tokens used.

With ``--source LABEL=SRC`` (repeatable) this checkout's benchmark runs against the
library in ``SRC`` (a ``src`` folder holding ``convergent``), each in its own process,
and one markdown table shows every stop-rule scenario under each source, side by side
(default policy ``objective``). The rules before a commit are that commit's sources:

    git archive 361b87a src | tar -x -C /tmp/before
    python benchmarks/run_convergence.py 0 10 --source before=/tmp/before/src --source now=src
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._sources import ROOT, add_source_arguments, runs_by_source  # noqa: E402
from convergent.bench.convergence import (  # noqa: E402
    POLICIES,
    SCENARIOS,
    TaskOutcome,
    build_tasks,
    run_convergence_async,
    run_task,
    summarize,
)

COMPARED = ("counting", "objective")
RULE_KINDS = ("progress", "stuck", "budget")
BENCH = ROOT / "src" / "convergent" / "bench"


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed", nargs="?", type=int, default=0)
    parser.add_argument("per_scenario", nargs="?", type=int, default=10)
    parser.add_argument("--scenario", action="append", default=[], metavar="NAME")
    parser.add_argument("--policy", action="append", default=[], choices=POLICIES)
    add_source_arguments(parser)
    return parser.parse_args(argv)


def _outcomes(seed: int, per_scenario: int, scenarios: list[str], policies: list[str]) -> list:
    async def run() -> list[TaskOutcome]:
        tasks = build_tasks(seed, per_scenario, scenarios)
        return [await run_task(task, policy) for task in tasks for policy in policies]  # type: ignore[arg-type]

    return asyncio.run(run())


def _with_this_benchmark(src: Path, folder: Path) -> Path:
    """A copy of the library in ``src`` holding this checkout's benchmark package."""
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(src / "convergent", folder / "convergent", ignore=skip)
    shutil.rmtree(folder / "convergent" / "bench", ignore_errors=True)
    shutil.copytree(BENCH, folder / "convergent" / "bench", ignore=skip)
    return folder


def _summary(runs: Sequence[TaskOutcome]) -> str:
    """One cell: verdicts, how the runs ended, and what they did that the verdict hides."""
    verdicts = Counter(
        "correct"
        if run.correct
        else "false stop"
        if run.false_positive
        else "missed stop"
        if run.false_negative
        else "wrong end"
        for run in runs
    )
    parts = [", ".join(f"{count} {verdict}" for verdict, count in verdicts.most_common())]
    ends = Counter(run.stop for run in runs)
    parts.append(", ".join(f"`{stop}` {count}" for stop, count in ends.most_common()))
    cycles = sorted({run.cycles for run in runs})
    parts.append(f"cycle {cycles[0]}" + (f"-{cycles[-1]}" if len(cycles) > 1 else ""))
    extras = {
        "notes": sum(run.nudges for run in runs),
        "budget notes": sum(run.budget_notes for run in runs),
        "answers after stop": sum(run.answer_after_stop for run in runs),
        "payments": sum(run.payments for run in runs),
        "writes": sum(run.writes for run in runs),
    }
    parts += [f"{value} {name}" for name, value in extras.items() if value]
    if any(run.cost for run in runs):
        parts.append(f"cost ≤ {max(run.cost for run in runs):.3f}")
    return "; ".join(parts)


def _side_by_side(by_source: dict[str, list[TaskOutcome]], policies: list[str]) -> None:
    labels = list(by_source)
    print("| scenario | what the model does | " + " | ".join(labels) + " |")
    print("| --- | --- |" + " --- |" * len(labels))
    shown = {run.scenario for runs in by_source.values() for run in runs}
    for scenario in SCENARIOS:
        if scenario.kind not in RULE_KINDS or scenario.name not in shown:
            continue
        for policy in policies:
            name = scenario.name if len(policies) == 1 else f"{scenario.name} ({policy})"
            cells = [
                _summary(
                    [
                        r
                        for r in by_source[label]
                        if r.scenario == scenario.name and r.policy == policy
                    ]
                )
                for label in labels
            ]
            print(f"| {name} | {scenario.description} | " + " | ".join(cells) + " |")


def _tables(outcomes: list[TaskOutcome]) -> None:
    result = summarize(outcomes)
    print(f"{'scenario':<28}{'policy':<20}{'tasks':>6}{'FP':>8}{'FN':>8}{'acc':>8}")
    rows = [("all", result.policies), *result.breakdown.items()]
    for scenario, per_policy in rows:
        for policy, stats in per_policy.items():
            print(
                f"{scenario:<28}{policy:<20}{stats.tasks:>6}"
                f"{stats.false_positive_rate:>8.1%}{stats.false_negative_rate:>8.1%}"
                f"{stats.accuracy:>8.1%}"
            )
    print()
    print(
        f"{'scenario':<28}{'policy':<12}{'false':>6}{'missed':>7}{'extra':>6}{'nudges':>7}"
        f"{'answers':>8}{'payments':>9}{'tokens':>8}  stops"
    )
    for scenario in SCENARIOS:
        if scenario.kind not in RULE_KINDS:
            continue
        for policy in COMPARED:
            runs = [o for o in outcomes if o.scenario == scenario.name and o.policy == policy]
            if not runs:
                continue
            stops = Counter(run.stop for run in runs)
            print(
                f"{scenario.name:<28}{policy:<12}"
                f"{sum(o.false_positive for o in runs):>6}{sum(o.false_negative for o in runs):>7}"
                f"{sum(o.extra_cycles for o in runs):>6}{sum(o.nudges for o in runs):>7}"
                f"{sum(o.answer_after_stop for o in runs):>8}{sum(o.payments for o in runs):>9}"
                f"{sum(o.tokens for o in runs):>8}  "
                + ", ".join(f"{stop} {count}" for stop, count in sorted(stops.items()))
            )


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    known = {scenario.name for scenario in SCENARIOS}
    unknown = [name for name in args.scenario if name not in known]
    if unknown:
        print(f"run_convergence: unknown scenario {unknown[0]!r}", file=sys.stderr)
        return 2
    rules = [s.name for s in SCENARIOS if s.kind in RULE_KINDS]
    scenarios = args.scenario or (rules if args.source or args.worker else None)
    policies = args.policy or (["objective"] if args.source or args.worker else list(POLICIES))
    if args.worker:
        outcomes = _outcomes(args.seed, args.per_scenario, scenarios or rules, policies)
        print(json.dumps([dataclasses.asdict(outcome) for outcome in outcomes]))
        return 0
    if not args.source:
        if scenarios is None:
            outcomes = asyncio.run(run_convergence_async(args.seed, args.per_scenario))[1]
        else:
            outcomes = _outcomes(args.seed, args.per_scenario, scenarios, policies)
        if args.json:
            print(json.dumps([dataclasses.asdict(outcome) for outcome in outcomes]))
        else:
            _tables(outcomes)
        return 0
    child_argv = [str(args.seed), str(args.per_scenario)]
    child_argv += [f"--scenario={name}" for name in scenarios or ()]
    child_argv += [f"--policy={name}" for name in policies]
    with tempfile.TemporaryDirectory(prefix="convergence-sources-") as scratch:
        overlays = []
        for spec in args.source:
            label, sep, src = spec.partition("=")
            if not sep or not (Path(src) / "convergent").is_dir():
                print(f"run_convergence: --source {spec!r}: expected LABEL=SRC", file=sys.stderr)
                return 2
            overlays.append(f"{label}={_with_this_benchmark(Path(src), Path(scratch) / label)}")
        by_source = runs_by_source(
            "run_convergence", overlays, child_argv, list, lambda row: TaskOutcome(**row)
        )
    if by_source is None:
        return 2
    if args.json:
        print(json.dumps({k: [dataclasses.asdict(r) for r in v] for k, v in by_source.items()}))
    else:
        _side_by_side(by_source, policies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
