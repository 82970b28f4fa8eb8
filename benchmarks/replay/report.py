"""What the replays show, per corpus and per policy, in figures a person can check.

For each corpus: successful runs the policy cut short (by reason, each one named with
whether the recording shows a real loop there or the stop was the policy's fault), failed
runs it stopped, and whether the real loops of failed runs were caught. Every stop is
placed against the recording: the turn, the reply, and how many recorded replies the
stop left unplayed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from benchmarks.replay.loops import Repeat, longest_repeat
from benchmarks.replay.replayer import RunReplay, TurnReplay
from benchmarks.replay.trajectory import Trajectory


@dataclass(frozen=True, slots=True)
class Stop:
    """The first turn a policy cut short in one run, placed against the recording."""

    trajectory: Trajectory
    """The run."""
    turn: int
    """The cut turn (0-based)."""
    outcome: TurnReplay
    """How the replay ended that turn."""
    repeat: Repeat
    """The longest unchanged repetition in the turn up to the stop."""
    real_loop: bool
    """Whether that repetition reaches the loop threshold: stopping there is right."""

    @property
    def replies_left(self) -> int:
        """Recorded replies the stop left unplayed, to the end of the run."""
        later = sum(len(turn) for turn in self.trajectory.turns[self.turn + 1 :])
        return self.outcome.recorded - self.outcome.played + later

    def describe(self) -> str:
        """One line: the run, the reason, the loop verdict and where the stop came."""
        verdict = (
            f"real loop: {self.repeat.name} x{self.repeat.times} unchanged"
            if self.real_loop
            else f"policy's fault (longest unchanged repeat: x{self.repeat.times})"
        )
        detail = " ".join(self.outcome.detail.split())
        if len(detail) > 160:
            detail = detail[:157] + "..."
        return (
            f"{self.trajectory.id}: {self.outcome.stop_reason} ({detail}); "
            f"{verdict}; turn {self.turn + 1} of {len(self.trajectory.turns)}, stopped at "
            f"reply {self.outcome.played} of {self.outcome.recorded}, "
            f"{self.replies_left} recorded replies left"
        )


@dataclass(frozen=True, slots=True)
class PolicyFigures:
    """One policy on one corpus."""

    label: str
    """Source and policy, e.g. ``today: default``."""
    successful: int
    """Successful runs in the corpus."""
    failed: int
    """Failed runs in the corpus."""
    successful_cut: tuple[Stop, ...]
    """Successful runs cut short, with where and why."""
    failed_stopped: tuple[Stop, ...]
    """Failed runs stopped, with where and why."""
    loops: tuple[Trajectory, ...]
    """Failed runs whose recording has a real loop."""
    loops_caught: tuple[Trajectory, ...]
    """Those of them the loop ended (any stop) before the recording's loop reached the
    threshold: the repeats past it never ran."""
    notes: int
    """Times the loop answered a call with a note and the run went on."""
    answers_after_stop: int
    """Cut turns in which the loop asked the model for an answer after the stop."""

    @property
    def policy_faults(self) -> tuple[Stop, ...]:
        """Successful runs cut short where the recording shows no real loop."""
        return tuple(stop for stop in self.successful_cut if not stop.real_loop)


def figures(
    label: str,
    trajectories: Sequence[Trajectory],
    replays: Mapping[str, RunReplay],
    threshold: int,
) -> PolicyFigures:
    """Count one policy's stops on one corpus."""
    successful_cut: list[Stop] = []
    failed_stopped: list[Stop] = []
    loops: list[Trajectory] = []
    caught: list[Trajectory] = []
    notes = answers = 0
    for trajectory in trajectories:
        outcomes = replays[trajectory.id].turns
        notes += sum(outcome.notes for outcome in outcomes)
        answers += sum(1 for outcome in outcomes if outcome.cut and outcome.extra_requests)
        first = next((index for index, outcome in enumerate(outcomes) if outcome.cut), None)
        if first is not None:
            outcome = outcomes[first]
            repeat = longest_repeat(
                trajectory.turns[first], replies=outcome.played, read_only=trajectory.read_only
            )
            stop = Stop(trajectory, first, outcome, repeat, repeat.times >= threshold)
            (successful_cut if trajectory.success else failed_stopped).append(stop)
        if not trajectory.success:
            repeats = [
                longest_repeat(turn, read_only=trajectory.read_only) for turn in trajectory.turns
            ]
            looping = [index for index, repeat in enumerate(repeats) if repeat.times >= threshold]
            if looping:
                loops.append(trajectory)
                # caught: the replay ended the turn before it played the loop's last repeat
                if any(outcomes[index].played <= repeats[index].reply + 1 for index in looping):
                    caught.append(trajectory)
    successful = sum(1 for trajectory in trajectories if trajectory.success)
    return PolicyFigures(
        label=label,
        successful=successful,
        failed=len(trajectories) - successful,
        successful_cut=tuple(successful_cut),
        failed_stopped=tuple(failed_stopped),
        loops=tuple(loops),
        loops_caught=tuple(caught),
        notes=notes,
        answers_after_stop=answers,
    )


def corpus_header(name: str, trajectories: Sequence[Trajectory], threshold: int) -> str:
    """Who ran, how many runs, and how many real loops the recordings hold."""
    models = Counter(trajectory.model for trajectory in trajectories)
    successful = sum(1 for trajectory in trajectories if trajectory.success)
    looping = [
        trajectory
        for trajectory in trajectories
        if any(
            longest_repeat(turn, read_only=trajectory.read_only).times >= threshold
            for turn in trajectory.turns
        )
    ]
    in_successful = sum(1 for trajectory in looping if trajectory.success)
    return (
        f"== {name}: {len(trajectories)} runs ({successful} successful, "
        f"{len(trajectories) - successful} failed) of {_models(models)}; "
        f"{sum(len(t.turns) for t in trajectories)} agent turns; runs with a real loop "
        f"(a call repeated x{threshold} with the same result, nothing changed): "
        f"{in_successful} successful, {len(looping) - in_successful} failed"
    )


def table(rows: Iterable[PolicyFigures]) -> list[str]:
    """The per-policy table of one corpus."""
    lines = [
        f"{'policy':<34}{'successful cut':>16}{'(policy fault)':>16}"
        f"{'failed stopped':>16}{'loops caught':>14}{'notes':>7}"
    ]
    for row in rows:
        reasons = Counter(stop.outcome.stop_reason for stop in row.successful_cut)
        lines.append(
            f"{row.label:<34}{len(row.successful_cut):>7} of {row.successful:<6}"
            f"{len(row.policy_faults):>16}{len(row.failed_stopped):>7} of {row.failed:<6}"
            f"{len(row.loops_caught):>8} of {len(row.loops):<3}{row.notes:>7}"
            + (f"   cut by: {_counts(reasons)}" if reasons else "")
        )
    return lines


def details(row: PolicyFigures) -> list[str]:
    """Every stop of one policy, one line each, for a person to check."""
    lines = [f"-- {row.label}"]
    lines += [f"   successful, cut: {stop.describe()}" for stop in row.successful_cut]
    lines += [f"   failed, stopped: {stop.describe()}" for stop in row.failed_stopped]
    missed = [trajectory for trajectory in row.loops if trajectory not in row.loops_caught]
    lines += [f"   failed, real loop not stopped: {trajectory.id}" for trajectory in missed]
    return lines


def _models(models: Counter[str]) -> str:
    if len(models) == 1:
        return next(iter(models))
    return f"{len(models)} models ({_counts(models)})"


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.most_common())
