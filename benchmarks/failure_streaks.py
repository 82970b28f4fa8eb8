"""The longest streaks of failing steps and of mistakes in recorded runs, by success label.

The streak thresholds of `convergent.StopPolicy` must leave the longest streak a
successful run recovered from at least two steps below the stop. This script measures
those streaks on the recordings, without replaying them:

- a *step* is one recorded reply with tool calls; it *fails* when every call failed (as
  the reader marks it, or as the corpus's declarations or ``--failure-if`` declare it),
  and it is a *mistake* when every call was the model's mistake (as the reader or the
  declarations mark it, or a call to a name that can be no tool's,
  ``get_weather<|channel|>commentary``);
- a *streak* is such steps in a row within a turn; it *recovers* when the turn goes on
  with a step that did not fail (or with an answer); a harness action that ends the run
  (SWE-agent's ``exit_cost``...) is no recovery;
- for each streak: its length, and the most times one call (same tool, same arguments)
  was made in it (the loop that ``max_repeated_failures`` and ``max_repeated_mistakes``
  count; the rest is a search).

Each corpus's runs are read with the declarations of its kind
(`benchmarks.replay.declared`, the files ``convergent replay --declare`` reads); a
``--failure-if FORMAT=REGEX`` adds a failure pattern for that format's corpora.

Run from the repository root:
    python benchmarks/failure_streaks.py tau-bench:$C/gpt-4o-airline.json \\
        swe-agent:$C/swe-agent-gpt4-lite --success $C/labels/swe-agent-gpt4-lite.json \\
        --failure-if 'mini-swe-agent=<returncode>[1-9]'
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.replay.declared import (  # noqa: E402
    add_success_option,
    declarations_for,
    labels_by_corpus,
)
from convergent.replay import RecordedCall, Trajectory, declared, read_runs  # noqa: E402

NO_TOOL = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
"""What a tool's name can be (as the replay reads it): anything else went to no tool."""
HARNESS_EXITS = frozenset({"exit_cost", "exit_context", "exit_format", "exit_api"})
"""SWE-agent's own autosubmission when a limit is hit, recorded as the last action."""


@dataclass
class Longest:
    """The longest streaks of one kind in the runs of one label."""

    runs: int = 0
    recovered: int = 0
    """The longest streak a turn recovered from."""
    recovered_same_call: int = 0
    """The most times one call was made in a streak that recovered."""
    any: int = 0
    """The longest streak, recovered or not."""
    same_call: int = 0
    """The most times one call was made in any streak."""
    recovered_lengths: Counter[int] = field(default_factory=Counter)
    """How many recovering streaks had each length."""


def streaks(run: Trajectory, bad: Callable[[RecordedCall], bool]) -> list[tuple[int, int, bool]]:
    """(length, most times one call was made, recovered) of each streak of bad steps."""
    found: list[tuple[int, int, bool]] = []
    for turn in run.turns:
        length, counts = 0, Counter[str]()
        for reply in turn:
            if any(call.name in HARNESS_EXITS for call in reply.calls):
                break
            if reply.calls and all(bad(call) for call in reply.calls):
                length += 1
                counts.update({call.key for call in reply.calls})
                continue
            if length:
                found.append((length, max(counts.values()), True))
            length, counts = 0, Counter()
        if length:
            found.append((length, max(counts.values()), False))
    return found


def failed(call: RecordedCall) -> bool:
    """Whether a call failed, as the reader or a declaration marks it."""
    return call.failed


def mistaken(call: RecordedCall) -> bool:
    """Whether a call was the model's mistake: marked so, or to a name no tool can have."""
    return call.mistake or NO_TOOL.fullmatch(call.name) is None


def measure(
    corpus: str, path: str, labels: dict[str, bool], failure_if: str | None
) -> dict[str, dict[str, Longest]]:
    """The longest failing and mistake streaks of a corpus, per success label."""
    declarations = declarations_for(corpus)
    if failure_if is not None:
        declarations = declarations.merged(declared(failures=[f"(?m){failure_if}"]))
    result: dict[str, dict[str, Longest]] = {"failing": {}, "mistakes": {}}
    for item in read_runs([path], corpus):
        if not isinstance(item, Trajectory):
            continue  # a run that could not be read, or a line that holds none
        run = declarations.apply(item)
        success = labels.get(run.id, labels.get(run.name, run.success))
        label = {True: "successful", False: "failed", None: "unlabelled"}[success]
        for kind, bad in (("failing", failed), ("mistakes", mistaken)):
            longest = result[kind].setdefault(label, Longest())
            longest.runs += 1
            for length, same, recovered in streaks(run, bad):
                longest.any = max(longest.any, length)
                longest.same_call = max(longest.same_call, same)
                if recovered:
                    longest.recovered = max(longest.recovered, length)
                    longest.recovered_same_call = max(longest.recovered_same_call, same)
                    longest.recovered_lengths[length] += 1
    return result


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+", metavar="FORMAT:PATH")
    add_success_option(parser)
    parser.add_argument(
        "--failure-if",
        action="append",
        default=[],
        metavar="FORMAT=REGEX",
        help="a result of this format matching REGEX is a failure (as `--failure-if` declares)",
    )
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    shared, own = labels_by_corpus(arguments.success)
    patterns = dict(item.split("=", 1) for item in arguments.failure_if)
    table: dict[str, object] = {}
    for spec in arguments.corpora:
        corpus, _, path = spec.partition(":")
        labels = {**shared, **own.get(str(Path(path)), {})}
        measured = measure(corpus, path, labels, patterns.get(corpus))
        table[path] = {
            kind: {label: vars(longest) for label, longest in by_label.items()}
            for kind, by_label in measured.items()
        }
        if not arguments.json:
            for kind, by_label in measured.items():
                for label, longest in sorted(by_label.items()):
                    print(
                        f"{Path(path).name:<28} {kind:<9} {label:<11} runs {longest.runs:>5}; "
                        f"longest recovered {longest.recovered} "
                        f"(one call {longest.recovered_same_call} times); "
                        f"longest {longest.any} (one call {longest.same_call} times)"
                    )
    if arguments.json:
        print(json.dumps(table, default=dict))
    return 0


if __name__ == "__main__":
    sys.exit(main())
