"""Run the convergence suite and print every policy's rates, then the stop rules' cases.

Usage: python benchmarks/run_convergence.py [SEED] [TASKS_PER_SCENARIO]

The first table gives, per scenario and policy, the false stops (false positives), the
missed stops (false negatives) and the accuracy. The second gives, for the scenarios of
the stop rules (kinds ``progress``, ``stuck`` and ``budget``), the counts behind them
for the rules before progress-aware stopping (``counting``) and the library's loop
(``objective``): false and missed stops, cycles past the done cycle, notes to the model,
answers after a stop, payments sent and tokens used.
"""

from __future__ import annotations

import asyncio
import sys

from convergent.bench.convergence import SCENARIOS, run_convergence_async

COMPARED = ("counting", "objective")


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    per_scenario = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    result, outcomes = asyncio.run(run_convergence_async(seed, per_scenario))
    print(f"{'scenario':<26}{'policy':<20}{'tasks':>6}{'FP':>8}{'FN':>8}{'acc':>8}")
    rows = [("all", result.policies), *result.breakdown.items()]
    for scenario, per_policy in rows:
        for policy, stats in per_policy.items():
            print(
                f"{scenario:<26}{policy:<20}{stats.tasks:>6}"
                f"{stats.false_positive_rate:>8.1%}{stats.false_negative_rate:>8.1%}"
                f"{stats.accuracy:>8.1%}"
            )
    print()
    print(
        f"{'scenario':<26}{'policy':<12}{'false':>6}{'missed':>7}{'extra':>6}{'nudges':>7}"
        f"{'answers':>8}{'payments':>9}{'tokens':>8}  stops"
    )
    for scenario in SCENARIOS:
        if scenario.kind not in ("progress", "stuck", "budget"):
            continue
        for policy in COMPARED:
            runs = [o for o in outcomes if o.scenario == scenario.name and o.policy == policy]
            stops: dict[str, int] = {}
            for run in runs:
                stops[run.stop] = stops.get(run.stop, 0) + 1
            print(
                f"{scenario.name:<26}{policy:<12}"
                f"{sum(o.false_positive for o in runs):>6}{sum(o.false_negative for o in runs):>7}"
                f"{sum(o.extra_cycles for o in runs):>6}{sum(o.nudges for o in runs):>7}"
                f"{sum(o.answer_after_stop for o in runs):>8}{sum(o.payments for o in runs):>9}"
                f"{sum(o.tokens for o in runs):>8}  "
                + ", ".join(f"{stop} {count}" for stop, count in sorted(stops.items()))
            )


if __name__ == "__main__":
    main()
