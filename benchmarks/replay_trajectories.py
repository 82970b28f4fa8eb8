"""Replay the evidence corpora under several sources and policies (over `convergent.replay`).

Every agent turn of every recorded run is replayed through `Agent.run`, as
``convergent replay`` does; this script adds the comparison of source trees in one
command, named policy variants and the corpora's call patterns. The report counts, per
corpus and per policy, successful runs cut short (and whether the recording shows a
real loop there), failed runs stopped, and the real loops caught. See
docs/evidence.md for the corpora and the figures.

Run from the repository root:
    python benchmarks/replay_trajectories.py --corpus tau-bench:gpt-4o-airline.json
    python benchmarks/replay_trajectories.py --corpus tau2-bench:results/ \
        --source today=../main/src --source new=src --details
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.replay.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
