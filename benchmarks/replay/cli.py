"""The command line of the replay: read corpora, replay under each source and policy, report.

A *source* is a tree of convergent's sources (``today=/path/to/main/src``): each is
replayed in its own Python process with that tree first on the path, so today's policy
and a new one are measured on the same recordings in one command. Without ``--source``
the convergent this process imports is used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.replay.patterns import summary
from benchmarks.replay.readers import READERS, CorpusError, read_corpus
from benchmarks.replay.report import corpus_header, details, figures, table
from benchmarks.replay.trajectory import Trajectory

POLICIES: dict[str, dict[str, Any]] = {
    "default": {},
    "stop at the first error": {"on_tool_error": "stop"},
    "repeats 2": {"limits": {"max_repeated_calls": 2}},
    "repeats 4": {"limits": {"max_repeated_calls": 4}},
    "no nudge": {"limits": {"stall_nudges": 0}},
    "error steps 1": {"max_consecutive_tool_errors": 1},
    "error steps 2": {"max_consecutive_tool_errors": 2},
}
"""Agent options per policy; ``default`` is the library's defaults, whatever they are.
A ``limits`` entry holds `Limits` fields (``stall_nudges`` needs a convergent that has
nudges)."""
DEFAULT_POLICIES = ("default", "stop at the first error")
"""The policies replayed when none is named."""

ROOT = Path(__file__).resolve().parents[2]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="replay_trajectories",
        description="Replay recorded agent runs through the loop and report its stops.",
    )
    parser.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="FORMAT:PATH",
        help=f"a corpus file or folder and its format ({', '.join(READERS)})",
    )
    parser.add_argument(
        "--trajectories",
        action="append",
        default=[],
        metavar="PATH",
        help="a tau-bench file (the same as --corpus tau-bench:PATH)",
    )
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="LABEL=SRC",
        help="replay under the convergent sources in SRC (repeat to compare policies)",
    )
    parser.add_argument(
        "--policy",
        action="append",
        choices=sorted(POLICIES),
        help=f"policies to replay (default: {', '.join(DEFAULT_POLICIES)})",
    )
    parser.add_argument(
        "--loop-threshold",
        type=int,
        default=3,
        help="unchanged repeats that make a real loop (default 3)",
    )
    parser.add_argument("--details", action="store_true", help="list every stop")
    parser.add_argument(
        "--patterns", action="store_true", help="count each corpus's call patterns too"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.corpus += [f"tau-bench:{path}" for path in args.trajectories]
    if not args.corpus:
        parser.error("give at least one --corpus FORMAT:PATH")
    return args


def corpora(specs: Sequence[str]) -> dict[str, list[Trajectory]]:
    """Read each ``FORMAT:PATH``; the corpus is named after the path."""
    found: dict[str, list[Trajectory]] = {}
    for spec in specs:
        fmt, sep, path = spec.partition(":")
        if not sep or not path:
            raise CorpusError(f"--corpus {spec!r}: expected FORMAT:PATH")
        found[Path(path).name] = read_corpus(fmt, Path(path))
    return found


async def replay_all(
    found: dict[str, list[Trajectory]], policies: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Replay every trajectory under each policy: ``{policy: {id: RunReplay dict}}``."""
    from benchmarks.replay.replayer import replay

    out: dict[str, dict[str, Any]] = {}
    for policy in policies:
        out[policy] = {}
        for trajectories in found.values():
            for trajectory in trajectories:
                result = await replay(trajectory, POLICIES[policy])
                out[policy][trajectory.id] = result.to_dict()
    return out


def run_source(src: str, argv: Sequence[str]) -> dict[str, Any]:
    """Replay in a child process whose convergent comes from ``src``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, str(ROOT)]))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.replay_trajectories", *argv, "--worker"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = (done.stderr.strip() or "no output").splitlines()
        raise CorpusError(f"the replay under {src} failed: {lines[-1]}")
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    policies = args.policy or list(DEFAULT_POLICIES)
    try:
        found = corpora(args.corpus)
        if args.worker:
            import convergent

            replays = asyncio.run(replay_all(found, policies))
            print(json.dumps({"convergent": convergent.__file__, "replays": replays}))
            return 0
        sources: dict[str, dict[str, Any]] = {}
        if not args.source:
            import convergent

            sources["installed"] = {
                "convergent": convergent.__file__,
                "replays": asyncio.run(replay_all(found, policies)),
            }
        child = [f"--corpus={spec}" for spec in args.corpus]
        child += [f"--policy={policy}" for policy in policies]
        for spec in args.source:
            label, sep, src = spec.partition("=")
            if not sep or not Path(src).is_dir():
                raise CorpusError(f"--source {spec!r}: expected LABEL=SRC with SRC a folder")
            sources[label] = run_source(str(Path(src).resolve()), child)
    except CorpusError as exc:
        print(f"replay_trajectories: {exc}", file=sys.stderr)
        return 2
    print_report(found, sources, policies, args)
    return 0


def print_report(
    found: dict[str, list[Trajectory]],
    sources: dict[str, dict[str, Any]],
    policies: Sequence[str],
    args: argparse.Namespace,
) -> None:
    from benchmarks.replay.replayer import RunReplay

    threshold = args.loop_threshold
    payload: dict[str, Any] = {}
    for label, source in sources.items():
        if not args.json:
            print(f"source {label}: convergent from {Path(source['convergent']).parent}")
    for name, trajectories in found.items():
        rows = []
        for label, source in sources.items():
            for policy in policies:
                replays = {
                    run_id: RunReplay.from_dict(data)
                    for run_id, data in source["replays"][policy].items()
                }
                rows.append(figures(f"{label}: {policy}", trajectories, replays, threshold))
        if args.json:
            payload[name] = [_row_json(row) for row in rows]
            continue
        print()
        print(corpus_header(name, trajectories, threshold))
        if args.patterns:
            print("\n".join(summary(trajectories)))
        print("\n".join(table(rows)))
        if args.details:
            for row in rows:
                print("\n".join(details(row)))
    if args.json:
        print(json.dumps(payload, indent=2))


def _row_json(row: Any) -> dict[str, Any]:
    return {
        "policy": row.label,
        "successful": row.successful,
        "failed": row.failed,
        "successful_cut": [stop.describe() for stop in row.successful_cut],
        "policy_faults": len(row.policy_faults),
        "failed_stopped": [stop.describe() for stop in row.failed_stopped],
        "real_loops_in_failed_runs": [trajectory.id for trajectory in row.loops],
        "real_loops_caught": [trajectory.id for trajectory in row.loops_caught],
        "real_loops_nudged": [trajectory.id for trajectory in row.fates(False, "nudged")],
        "real_loops_missed": [trajectory.id for trajectory in row.fates(False, "missed")],
        "successful_real_loops": {
            trajectory.id: fate for trajectory, fate, _ in row.loop_fates if trajectory.success
        },
        "notes": row.notes,
        "answers_after_stop": row.answers_after_stop,
    }
