"""What a corpus holds: the call patterns that the stop rules must tell apart.

Counted on the recordings alone (no replay), per corpus and separately for successful
and failed runs:

- ``parallel``: replies with two or more calls (one batch);
- ``repeat, new results``: a call made 3 or more times in a turn whose result changed
  at least once (tests run after edits, a status polled);
- ``verify after write``: a read (of a tool the benchmark declares read-only) made
  again after a call that may change state ran in between (a list after a delete, a
  read after an update);
- ``errors in a row (calls)`` / ``(steps)``: the longest run of failed calls in call
  order, and of failing replies (at least one failed call, none that succeeded);
- ``unchanged repeat``: the longest run of the same call with the same result while
  nothing changed (`convergent.replay._loops.longest_repeat`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from convergent.replay import Trajectory
from convergent.replay._loops import longest_repeat
from convergent.replay._recording import Turn


@dataclass(frozen=True, slots=True)
class RunPatterns:
    """The patterns of one run."""

    parallel_replies: int
    """Replies with two or more calls."""
    repeats_with_new_results: int
    """Calls made 3+ times in a turn whose result changed at least once."""
    verify_after_write: int
    """Calls made again after a call that may change state ran in between."""
    errors_in_a_row: int
    """Longest run of failed calls, in call order."""
    failing_steps_in_a_row: int
    """Longest run of replies whose calls all failed (at least one call)."""
    unchanged_repeat: int
    """Longest run of the same call with the same result while nothing changed."""


def run_patterns(trajectory: Trajectory) -> RunPatterns:
    """Count the patterns of one recorded run."""
    parallel = repeats = verify = errors = steps = unchanged = 0
    for turn in trajectory.turns:
        parallel += sum(1 for reply in turn if len(reply.calls) > 1)
        repeats += _repeats_with_new_results(turn)
        verify += _verify_after_write(turn, trajectory.read_only)
        errors = max(errors, _longest(call.failed for reply in turn for call in reply.calls))
        steps = max(
            steps,
            _longest(
                bool(reply.calls) and all(call.failed for call in reply.calls) for reply in turn
            ),
        )
        unchanged = max(unchanged, longest_repeat(turn, read_only=trajectory.read_only).times)
    return RunPatterns(parallel, repeats, verify, errors, steps, unchanged)


def _longest(flags: Iterable[bool]) -> int:
    best = current = 0
    for flag in flags:
        current = current + 1 if flag else 0
        best = max(best, current)
    return best


def _repeats_with_new_results(turn: Turn) -> int:
    results: dict[str, list[str | None]] = {}
    for reply in turn:
        for call in reply.calls:
            results.setdefault(call.key, []).append(call.result)
    return sum(1 for seen in results.values() if len(seen) >= 3 and len(set(seen)) > 1)


def _verify_after_write(turn: Turn, read_only: frozenset[str]) -> int:
    found = 0
    writes = 0
    last_seen: dict[str, int] = {}
    for reply in turn:
        for call in reply.calls:
            before = last_seen.get(call.key)
            if before is not None and before < writes and call.name in read_only:
                found += 1
            last_seen[call.key] = writes
            if not call.failed and call.name not in read_only:
                writes += 1
    return found


def summary(trajectories: Sequence[Trajectory]) -> list[str]:
    """One line per side (successful, failed): runs with each pattern, and the maxima."""
    lines = [
        f"{'runs':<16}{'parallel':>10}{'repeat, new results':>21}{'verify after write':>20}"
        f"{'max errors in a row (calls, steps)':>36}{'max unchanged repeat':>22}"
    ]
    for label, success in (("successful", True), ("failed", False)):
        runs = [run_patterns(t) for t in trajectories if t.success == success]
        if not runs:
            continue
        lines.append(
            f"{label + f' ({len(runs)})':<16}"
            f"{sum(1 for r in runs if r.parallel_replies):>10}"
            f"{sum(1 for r in runs if r.repeats_with_new_results):>21}"
            f"{sum(1 for r in runs if r.verify_after_write):>20}"
            f"{max(r.errors_in_a_row for r in runs):>29}, "
            f"{max(r.failing_steps_in_a_row for r in runs):<5}"
            f"{max(r.unchanged_repeat for r in runs):>22}"
        )
    return lines
