"""How long the check of a typed answer against an output schema takes, hostile or not.

Three cases, each in a fresh process (so the peak memory is the case's own):

- ``big``: an answer of N objects of three fields (``--items``, 4,000 by default: about
  190 KB, as long as the longest replies a model writes), under the schema pydantic
  writes for it: the common large answer, which must check in full within its time.
- ``multiplying``: a schema whose ``anyOf`` alternatives double at each of L levels
  (``--levels``), and the answer ``1``: it must run out of its steps or its time, not of
  memory.
- ``pattern``: ``^(a+)+$`` against ``"a" * 40 + "!"``, which Python's engine takes
  hours to refuse.

Run: ``python benchmarks/bench_output_check.py [--items 4000] [--levels 30] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any


def _case(name: str, items: int, levels: int) -> dict[str, Any]:
    from pydantic import BaseModel

    from convergent.output import OutputSpec

    class Item(BaseModel):
        name: str
        n: int
        tags: list[str]

    class Answer(BaseModel):
        items: list[Item]

    if name == "big":
        spec = OutputSpec.of_schema(Answer.model_json_schema())
        rows = [{"name": f"x{i}", "n": i, "tags": ["a", "b"]} for i in range(items)]
        answer = json.dumps({"items": rows})
    elif name == "multiplying":
        defs: dict[str, Any] = {
            f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
            for i in range(levels)
        }
        defs[f"a{levels}"] = {"type": "string"}
        spec = OutputSpec.of_schema({"$defs": defs, "$ref": "#/$defs/a0"})
        answer = "1"
    else:
        spec = OutputSpec.of_schema({"type": "string", "pattern": "^(a+)+$"})
        answer = json.dumps("a" * 40 + "!")
    started = time.perf_counter()
    verdict = spec.check(answer)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    errors = verdict.errors or ""
    return {"seconds": seconds, "peak_mb": peak, "valid": verdict.errors is None, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4_000)
    parser.add_argument("--levels", type=int, default=30)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(_case(args.case, args.items, args.levels)))
        return
    rows = {}
    for name in ("big", "multiplying", "pattern"):
        command = [sys.executable, __file__, "--case", name]
        command += ["--items", str(args.items), "--levels", str(args.levels)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        rows[name] = json.loads(done.stdout)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"cases": rows, "load_1min": load}))
        return
    for name, row in rows.items():
        verdict = "valid" if row["valid"] else row["errors"][:70]
        print(f"{name:>12}  {row['seconds']:6.2f} s  {row['peak_mb']:6.0f} MB  {verdict}")
    print(f"load {load:.2f}")


if __name__ == "__main__":
    main()
