"""The command line of the evidence replay: corpora, under each source and policy, reported.

A *source* is a tree of convergent's sources (``today=/path/to/main/src``): each is
replayed in its own Python process with that tree first on the path, so today's policy
and a new one are measured on the same recordings in one command. A tree older than
`convergent.replay` gets it from this checkout (only the loop under test comes from the
tree; see `benchmarks.replay`). Without ``--source`` the convergent this process
imports is used. With ``--declared`` each corpus's tools are declared with the file of
its format (`benchmarks.replay.declared`), as ``convergent replay --declare`` reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.replay.patterns import summary
from convergent.exceptions import UserError

ROOT = Path(__file__).resolve().parents[2]

POLICIES: dict[str, tuple[dict[str, Any], ...]] = {
    "default": ({},),
    "stop at the first error": ({"on_tool_error": "stop"},),
    "repeats 2": ({"max_repeated_calls": 2},),
    "repeats 4": ({"max_repeated_calls": 4},),
    "no nudge": ({"notes": 0}, {"stall_nudges": 0}),
    "error steps 1": ({"max_repeated_failures": 1}, {"max_consecutive_tool_errors": 1}),
    "error steps 2": ({"max_repeated_failures": 2}, {"max_consecutive_tool_errors": 2}),
}
"""Settings per policy, each as alternatives: the first whose names the replayed
convergent takes is used (``notes`` where the stop policy has it, else ``stall_nudges``);
``default`` is the library's defaults, whatever they are."""
DEFAULT_POLICIES = ("default", "stop at the first error")
"""The policies replayed when none is named."""


class CorpusError(ValueError):
    """A bad ``--corpus`` or ``--source``, or a replay that failed; the message says which."""


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line's arguments."""
    parser = argparse.ArgumentParser(
        prog="replay_trajectories",
        description="Replay recorded agent runs through the loop and report its stops.",
    )
    parser.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="FORMAT:PATH",
        help="a corpus file or folder and its format (a `convergent replay --format` name)",
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
    parser.add_argument(
        "--declared",
        action="store_true",
        help="declare each corpus's tools as docs/loop.md tells users to, writes included "
        "(benchmarks/replay/declarations/<kind>.yaml)",
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


def corpora(specs: Sequence[str]) -> list[tuple[str, Path]]:
    """Each ``FORMAT:PATH`` as its format and absolute path."""
    found = []
    for spec in specs:
        fmt, sep, path = spec.partition(":")
        if not sep or not path:
            raise CorpusError(f"--corpus {spec!r}: expected FORMAT:PATH")
        found.append((fmt, Path(path).resolve()))
    return found


def settings_for(policy: str) -> dict[str, Any]:
    """The first alternative of ``policy`` the imported convergent takes."""
    from convergent.replay._settings import setting_names

    known = set(setting_names())
    alternatives = POLICIES[policy]
    return next((dict(a) for a in alternatives if set(a) <= known), dict(alternatives[0]))


def replay_all(
    found: Sequence[tuple[str, Path]],
    policies: Sequence[str],
    threshold: int,
    declared: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Every corpus under each policy: ``{policy: [corpus figures as dicts]}``."""
    from benchmarks.replay.declared import declarations_for
    from convergent.replay import replay

    out: dict[str, list[dict[str, Any]]] = {}
    for policy in policies:
        out[policy] = []
        for fmt, path in found:
            report = replay(
                [path],
                settings=settings_for(policy),
                format=fmt,
                threshold=threshold,
                declarations=declarations_for(fmt) if declared else None,
            )
            (figures,) = report.to_dict()["corpora"]
            out[policy].append(figures)
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
    """Replay, then print the report; 2 on a bad corpus or source."""
    args = parse(argv)
    policies = args.policy or list(DEFAULT_POLICIES)
    try:
        found = corpora(args.corpus)
        if args.worker:
            import convergent

            replays = replay_all(found, policies, args.loop_threshold, args.declared)
            print(json.dumps({"convergent": convergent.__file__, "replays": replays}))
            return 0
        sources: dict[str, dict[str, Any]] = {}
        if not args.source:
            import convergent

            sources["installed"] = {
                "convergent": convergent.__file__,
                "replays": replay_all(found, policies, args.loop_threshold, args.declared),
            }
        child = [f"--corpus={fmt}:{path}" for fmt, path in found]
        child += [f"--policy={policy}" for policy in policies]
        child += [f"--loop-threshold={args.loop_threshold}"]
        child += ["--declared"] if args.declared else []
        for spec in args.source:
            label, sep, src = spec.partition("=")
            if not sep or not Path(src).is_dir():
                raise CorpusError(f"--source {spec!r}: expected LABEL=SRC with SRC a folder")
            sources[label] = run_source(str(Path(src).resolve()), child)
    except (CorpusError, UserError) as exc:
        print(f"replay_trajectories: {exc}", file=sys.stderr)
        return 2
    print_report(found, sources, policies, args)
    return 0


def print_report(
    found: Sequence[tuple[str, Path]],
    sources: Mapping[str, Mapping[str, Any]],
    policies: Sequence[str],
    args: argparse.Namespace,
) -> None:
    """Per corpus: who ran and its loops, then one row per source and policy."""
    payload: dict[str, Any] = {}
    if not args.json:
        for label, source in sources.items():
            print(f"source {label}: convergent from {Path(source['convergent']).parent}")
    for index, (fmt, path) in enumerate(found):
        rows = [
            (f"{label}: {policy}", source["replays"][policy][index])
            for label, source in sources.items()
            for policy in policies
        ]
        if args.json:
            payload[path.name] = [{"policy": label, **figures} for label, figures in rows]
            continue
        print()
        print(_header(fmt, path, args.loop_threshold, args.patterns, args.declared))
        print("\n".join(table(rows)))
        if args.details:
            for label, figures in rows:
                print("\n".join(details(label, figures)))
    if args.json:
        print(json.dumps(payload, indent=2, default=str))


def _header(fmt: str, path: Path, threshold: int, patterns: bool, declared: bool) -> str:
    from benchmarks.replay.declared import declarations_for
    from convergent.replay import Trajectory, read_runs
    from convergent.replay._loops import longest_repeat

    declarations = declarations_for(fmt if declared else None)
    runs = [
        declarations.apply(run) for run in read_runs([path], fmt) if isinstance(run, Trajectory)
    ]
    models = Counter(run.model for run in runs)
    successful = sum(1 for run in runs if run.success)
    failed = sum(1 for run in runs if run.success is False)
    unlabelled = len(runs) - successful - failed
    looping = [
        run
        for run in runs
        if any(
            longest_repeat(
                t, read_only=run.read_only, waits=run.waits, idempotent=run.idempotent
            ).times
            >= threshold
            for t in run.turns
        )
    ]
    in_successful = sum(1 for run in looping if run.success)
    in_failed = sum(1 for run in looping if run.success is False)
    named = next(iter(models)) if len(models) == 1 else f"{len(models)} models ({_counts(models)})"
    line = (
        f"== {path.name}: {len(runs)} runs ({successful} successful, {failed} failed"
        + (f", {unlabelled} unlabelled" if unlabelled else "")
        + f") of {named}; {sum(len(r.turns) for r in runs)} agent turns; runs with a real "
        f"loop (a call repeated x{threshold} with the same result, nothing changed): "
        f"{in_successful} successful, {in_failed} failed"
    )
    return line + ("\n" + "\n".join(summary(runs)) if patterns else "")


def table(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """The per-policy table of one corpus."""
    lines = [
        f"{'policy':<34}{'successful cut':>16}{'(policy fault)':>16}"
        f"{'failed stopped':>16}{'failed runs real loops: stopped, nudged, missed':>49}"
        f"{'notes':>7}"
    ]
    for label, figures in rows:
        runs = figures["runs"]
        loops = figures["real_loops"]["failed"]
        reasons = Counter(
            verdict["stops"][0]["reason"]
            for verdict in figures["stopped"]
            if verdict["success"] is True
        )
        fates = f"{loops['stopped']}, {loops['nudged']}, {loops['missed']} of {sum(loops.values())}"
        lines.append(
            f"{label:<34}{figures['successful_cut']:>7} of {runs['successful']:<6}"
            f"{figures['policy_faults']:>16}{figures['failed_stopped']:>7} of {runs['failed']:<6}"
            f"{fates:>49}{figures['notes']:>7}"
            + (f"   cut by: {_counts(reasons)}" if reasons else "")
        )
    return lines


def details(label: str, figures: Mapping[str, Any]) -> list[str]:
    """Every stop of one policy, one line each, for a person to check."""
    lines = [f"-- {label}"]
    for verdict in figures["stopped"]:
        stop = verdict["stops"][0]
        repeat = stop["repeat"]
        evidence = (
            f"real loop: {repeat['name']} x{repeat['times']} unchanged"
            if stop["real_loop"]
            else f"policy's fault (longest unchanged repeat: x{repeat['times']})"
            if verdict["success"]
            else f"longest unchanged repeat: x{repeat['times']}"
        )
        detail = stop["detail"] if len(stop["detail"]) <= 160 else stop["detail"][:157] + "..."
        lines.append(
            f"   {verdict['verdict']}: {verdict['id']}: {stop['reason']} ({detail}); {evidence}; "
            f"turn {stop['turn'] + 1} of {verdict['turns']}, stopped at reply {stop['played']} "
            f"of {stop['recorded']}, {stop['replies_left']} recorded replies left in the turn"
        )
    for verdict in figures["loops_not_stopped"]:
        loop = verdict["loop"]
        repeat = loop["repeat"]
        side = {True: "successful", False: "failed", None: "unlabelled"}[verdict["success"]]
        lines.append(
            f"   {side}, real loop {loop['fate']}: {verdict['id']} ({repeat['name']} "
            f"x{repeat['times']} unchanged, replies {repeat['start'] + 1}-{repeat['reply'] + 1})"
        )
    return lines


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.most_common())
