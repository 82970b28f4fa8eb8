"""Run the convergence suite and print every policy's rates per scenario.

Usage: python benchmarks/run_convergence.py [SEED] [TASKS_PER_SCENARIO]
"""

from __future__ import annotations

import sys

from convergent.bench.convergence import run_convergence


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    per_scenario = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    result = run_convergence(seed, per_scenario)
    print(f"{'scenario':<26}{'policy':<20}{'tasks':>6}{'FP':>8}{'FN':>8}{'acc':>8}")
    rows = [("all", result.policies), *result.breakdown.items()]
    for scenario, per_policy in rows:
        for policy, stats in per_policy.items():
            print(
                f"{scenario:<26}{policy:<20}{stats.tasks:>6}"
                f"{stats.false_positive_rate:>8.1%}{stats.false_negative_rate:>8.1%}"
                f"{stats.accuracy:>8.1%}"
            )


if __name__ == "__main__":
    main()
