"""Replay all 800 BFCL multi-turn entries (or the first N per category) and probe them.

Usage: python benchmarks/run_bfcl.py [N]
Needs: pip install --no-deps bfcl-eval mpmath
"""

from __future__ import annotations

import asyncio
import json
import sys

from convergent.bench.bfcl import run_bfcl_async


def main() -> None:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else None
    result, _, _ = asyncio.run(run_bfcl_async(limit=limit))
    for category, counts in result.details["pass_counts"].items():
        for mode in ("one_per_response", "batched"):
            c = counts[mode]
            print(
                f"{category:<13}{mode:<17}entries {c['entries_passed']}/{c['entries']}"
                f"  turns {c['turns_passed']}/{c['turns']}"
            )
        for kind, probe in counts["probes"].items():
            print(f"{category:<13}probe {kind:<20}{probe['passed']}/{probe['run']}")
    print("dataset issues:", json.dumps(result.details["dataset_issues"]))
    print(f"{result.details['seconds']} s")


if __name__ == "__main__":
    main()
