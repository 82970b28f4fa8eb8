"""Run the live suite on a real model (default: the embedded local one).

Usage: python benchmarks/run_live.py [MODEL_SPEC] [SEED]
"""

from __future__ import annotations

import asyncio
import json
import sys

from convergent.bench.live import load_live_model, run_live


def main() -> None:
    spec = sys.argv[1] if len(sys.argv) > 1 else "local"
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    result = asyncio.run(run_live(load_live_model(spec), seed=seed))
    if result.skipped is not None:
        print(f"live: skipped: {result.skipped}")
        return
    print(json.dumps(result.to_dict(), indent=2))


if __name__ == "__main__":
    main()
