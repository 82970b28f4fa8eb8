"""Calibration of the executive function's scores, and what the gate costs.

Usage:
    python benchmarks/bench_gate_calibration.py                 # scripted scorer
    python benchmarks/bench_gate_calibration.py --scorer local  # embedded SmolLM2-135M
    python benchmarks/bench_gate_calibration.py --scorer openai:gpt-4o-mini --json

Runs every scenario of `benchmarks.gate_calibration.SCENARIOS` with and without the gate and
prints asking precision/recall, ECE, Brier score, extra requests and latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gate_calibration import format_report, run_calibration, scripted_scorer  # noqa: E402
from convergent.exceptions import ConvergentError
from convergent.models.base import Model
from convergent.models.registry import model_from_string


def build_scorer(spec: str) -> Model:
    if spec == "scripted":
        return scripted_scorer()
    return model_from_string(spec)


async def main_async(spec: str, threshold: float) -> dict[str, object]:
    scorer = build_scorer(spec)
    async with scorer:
        report = await run_calibration(scorer, threshold=threshold)
    return {"text": format_report(report), "data": report.to_dict()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scorer", default="scripted", help="scripted, local, or a model spec")
    parser.add_argument("--threshold", type=float, default=0.85)
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    args = parser.parse_args()
    try:
        outcome = asyncio.run(main_async(args.scorer, args.threshold))
    except ConvergentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(outcome["data"], indent=2))
    print(json.dumps(outcome["data"], indent=2) if args.json else outcome["text"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
