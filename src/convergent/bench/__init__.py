"""Benchmarks that measure when agent loops stop, and why.

Three suites, each a module:

- `convergence`: scripted tasks with ground truth, run under the library's objective
  loop and two baselines that exist only here: seed 000's subjective rule, and the
  stop rules before progress-aware stopping (``counting``).
- `bfcl`: the Berkeley Function Calling Leaderboard's multi-turn ground truth replayed
  through the loop on BFCL's executable backends (needs ``bfcl-eval``).
- `live`: convergence tasks run on a real model, with verified completion.

`report` turns results into JSON, markdown and PNG charts (charts need matplotlib).
The ``convergent bench`` command drives all of them, so the suites ship with the
library; nothing in the loop imports this package. What only measures (speed,
overheads, the gate's calibration, replays of recorded trajectories) and the scripts
that print the documentation's tables live in ``benchmarks/`` of the repository.
"""

from convergent.bench.report import BenchReport, PolicyStats, SuiteResult, write_report

__all__ = ["SUITES", "BenchReport", "PolicyStats", "SuiteResult", "write_report"]

SUITES = ("convergence", "bfcl", "live")
"""Suite names, in the order ``convergent bench`` runs them."""
