"""Replay recorded runs with every tool declared as docs/loop.md tells users to, writes too.

`convergent replay` declares only the tools each benchmark marks as reads; here each
corpus is replayed with the declaration file of its kind (`benchmarks.replay.declared`:
``benchmarks/replay/declarations/*.yaml``, what ``convergent replay --declare FILE``
reads): reads, idempotent calls and writes. One markdown row per corpus: successful
runs cut (by the policy's fault), failed runs stopped, the real loops of failed runs
(stopped, nudged, missed), the notes given; ``--json`` prints the whole report.

Run from the repository root:
    python benchmarks/replay_declared.py $C/gpt-4o-airline.json $C/bfcl-gpt-oss \\
        --success $C/labels/swe-agent-gpt4-lite.json \\
        --success $C/mini-swe-gpt5mini=$C/labels/mini-swe-gpt5mini.json [--set NAME=VALUE ...]
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

from benchmarks.replay.declared import (  # noqa: E402
    add_success_option,
    labels_by_corpus,
    replay_each,
)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    add_success_option(parser)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--workers", type=int, default=1, help="processes that replay")
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
    unlabelled = corpus["verdicts"]["unlabelled, stopped"]
    return (
        f"| {Path(corpus['name']).name} | {runs['successful']} / {runs['failed']} / "
        f"{runs['unlabelled']} | {corpus['successful_cut']} ({corpus['policy_faults']}) "
        f"| {corpus['failed_stopped']} | {unlabelled} "
        f"| {loops['stopped']}, {loops['nudged']}, {loops['missed']} | {corpus['notes']} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    settings = {
        name: _value(value) for name, _, value in (item.partition("=") for item in arguments.set)
    }
    report = replay_each(
        arguments.corpora,
        settings=settings,
        labels=labels_by_corpus(arguments.success),
        workers=arguments.workers,
    )
    data = report.to_dict()
    if arguments.json:
        print(json.dumps(data))
        return 0
    print(
        "| corpus | runs (successful / failed / unlabelled) | successful cut (policy's fault) "
        "| failed stopped | unlabelled stopped "
        "| real loops of failed runs: stopped, nudged, missed | notes |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for corpus in [*data["corpora"], data["total"]]:
        print(row(corpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
