"""Replay recorded runs with every tool declared as docs/loop.md tells users to, writes too.

`convergent replay` declares only the tools each benchmark marks as reads; here every
tool of the corpora of docs/evidence.md is declared (`benchmarks.replay.declared_tools`):
reads, idempotent calls and writes. One markdown row per corpus: successful runs cut
(by the policy's fault), failed runs stopped, the real loops of failed runs (stopped,
nudged, missed), the notes given; ``--json`` prints the whole report.

Run from the repository root (one process: the declaration holds in it only):
    python benchmarks/replay_declared.py $C/gpt-4o-airline.json $C/bfcl-gpt-oss \\
        --success $C/labels/swe-agent-gpt4-lite.json [--set NAME=VALUE ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.replay.declared_tools import declaring  # noqa: E402
from convergent.replay import replay  # noqa: E402


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--success", action="append", default=[], type=Path, metavar="JSON")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def row(corpus: dict[str, Any]) -> str:
    """One corpus of a report as a markdown row."""
    runs = corpus["runs"]
    loops = corpus["real_loops"]["failed"]
    return (
        f"| {Path(corpus['name']).name} | {runs['successful']} / {runs['failed']} "
        f"| {corpus['successful_cut']} ({corpus['policy_faults']}) | {corpus['failed_stopped']} "
        f"| {loops['stopped']}, {loops['nudged']}, {loops['missed']} | {corpus['notes']} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    labels: dict[str, bool] = {}
    for file in arguments.success:
        labels.update(json.loads(file.read_text()))
    settings = {
        name: _value(value) for name, _, value in (item.partition("=") for item in arguments.set)
    }
    with declaring():
        report = replay(arguments.corpora, settings=settings, success=labels or None, workers=1)
    data = report.to_dict()
    if arguments.json:
        print(json.dumps(data))
        return 0
    print(
        "| corpus | runs (successful / failed) | successful cut (policy's fault) "
        "| failed stopped | real loops of failed runs: stopped, nudged, missed | notes |"
    )
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    for corpus in [*data["corpora"], data["total"]]:
        print(row(corpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
