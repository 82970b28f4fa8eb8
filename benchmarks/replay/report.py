"""What the replays show, per corpus and per policy, in figures a person can check.

For each corpus: successful runs the policy cut short (by reason, each one named with
whether the recording shows a real loop there or the stop was the policy's fault), failed
runs it stopped, and what became of each real loop. Every stop is placed against the
recording: the turn, the reply, and how many recorded replies the stop left unplayed.

A real loop is *stopped* when the replay ended its turn (for any reason, a hand-off
included) before the loop's last repeat ran; *nudged* when it was not stopped but the
loop answered one of the loop's repeated calls with a note instead of running it (the
replay then plays what the recorded model did next, which never saw the note: a model
that changed course afterwards is not stopped); *missed* otherwise.
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


LoopFate = str
"""What became of a run's real loop: ``stopped``, ``nudged`` or ``missed``."""


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
    loop_fates: tuple[tuple[Trajectory, LoopFate, Repeat], ...]
    """Every run whose recording has a real loop, with what became of it and the loop
    (the first looping turn's, or the one stopped or nudged)."""
    notes: int
    """Times the loop answered a call with a note and the run went on."""
    answers_after_stop: int
    """Cut turns in which the loop asked the model for an answer after the stop."""

    @property
    def policy_faults(self) -> tuple[Stop, ...]:
        """Successful runs cut short where the recording shows no real loop."""
        return tuple(stop for stop in self.successful_cut if not stop.real_loop)

    def fates(self, success: bool, fate: LoopFate | None = None) -> tuple[Trajectory, ...]:
        """Runs with a real loop, successful or failed, optionally with one fate."""
        return tuple(
            trajectory
            for trajectory, found, _ in self.loop_fates
            if trajectory.success == success and fate in (None, found)
        )

    @property
    def loops(self) -> tuple[Trajectory, ...]:
        """Failed runs whose recording has a real loop."""
        return self.fates(False)

    @property
    def loops_caught(self) -> tuple[Trajectory, ...]:
        """Failed runs whose real loop was stopped: its last repeat never ran."""
        return self.fates(False, "stopped")


def figures(
    label: str,
    trajectories: Sequence[Trajectory],
    replays: Mapping[str, RunReplay],
    threshold: int,
) -> PolicyFigures:
    """Count one policy's stops on one corpus."""
    successful_cut: list[Stop] = []
    failed_stopped: list[Stop] = []
    fates: list[tuple[Trajectory, LoopFate, Repeat]] = []
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
        fate = loop_fate(trajectory, outcomes, threshold)
        if fate is not None:
            fates.append((trajectory, *fate))
    successful = sum(1 for trajectory in trajectories if trajectory.success)
    return PolicyFigures(
        label=label,
        successful=successful,
        failed=len(trajectories) - successful,
        successful_cut=tuple(successful_cut),
        failed_stopped=tuple(failed_stopped),
        loop_fates=tuple(fates),
        notes=notes,
        answers_after_stop=answers,
    )


def loop_fate(
    trajectory: Trajectory, outcomes: Sequence[TurnReplay], threshold: int
) -> tuple[LoopFate, Repeat] | None:
    """What became of the run's real loops: the best fate over its looping turns, or None."""
    found: tuple[LoopFate, Repeat] | None = None
    for turn, outcome in zip(trajectory.turns, outcomes, strict=True):
        repeat = longest_repeat(turn, read_only=trajectory.read_only)
        if repeat.times < threshold:
            continue
        # the reply with the last repeat never played, or played and the loop stopped there
        if outcome.played <= repeat.reply or (outcome.cut and outcome.played == repeat.reply + 1):
            return "stopped", repeat
        nudged = any(
            key == repeat.key and repeat.start <= reply <= repeat.reply
            for reply, key in outcome.replaced
        )
        if nudged and (found is None or found[0] == "missed"):
            found = "nudged", repeat
        elif found is None:
            found = "missed", repeat
    return found


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
        f"{'failed stopped':>16}{'failed runs real loops: stopped, nudged, missed':>49}"
        f"{'notes':>7}"
    ]
    for row in rows:
        reasons = Counter(stop.outcome.stop_reason for stop in row.successful_cut)
        loops = (
            f"{len(row.loops_caught)}, {len(row.fates(False, 'nudged'))}, "
            f"{len(row.fates(False, 'missed'))} of {len(row.loops)}"
        )
        lines.append(
            f"{row.label:<34}{len(row.successful_cut):>7} of {row.successful:<6}"
            f"{len(row.policy_faults):>16}{len(row.failed_stopped):>7} of {row.failed:<6}"
            f"{loops:>49}{row.notes:>7}" + (f"   cut by: {_counts(reasons)}" if reasons else "")
        )
    return lines


def details(row: PolicyFigures) -> list[str]:
    """Every stop of one policy, one line each, for a person to check."""
    lines = [f"-- {row.label}"]
    lines += [f"   successful, cut: {stop.describe()}" for stop in row.successful_cut]
    lines += [f"   failed, stopped: {stop.describe()}" for stop in row.failed_stopped]
    for trajectory, fate, repeat in row.loop_fates:
        if fate == "stopped" and not trajectory.success:
            continue  # listed with the stops above
        if fate == "stopped":
            continue  # a successful run cut by its real loop, listed above
        side = "successful" if trajectory.success else "failed"
        what = {
            "nudged": "nudged at the loop, not stopped (the recording changed course after it)",
            "missed": "not stopped, not nudged",
        }[fate]
        lines.append(
            f"   {side}, real loop {what}: {trajectory.id} ({repeat.name} x{repeat.times} "
            f"unchanged, replies {repeat.start + 1}-{repeat.reply + 1})"
        )
    return lines


def _models(models: Counter[str]) -> str:
    if len(models) == 1:
        return next(iter(models))
    return f"{len(models)} models ({_counts(models)})"


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.most_common())
