"""What a replay means for one run: where the loop stopped it, whether rightly, what it saved.

A stop (a turn the loop ended before the recording did) is placed against the
recording: the turn and reply, the typed reason, the longest unchanged repetition up to
there (a *real loop* when it reaches the threshold), the calls around it, and what the
rest of the turn would have cost (recorded replies, and tokens and cost where the
recording has them). With a success label the run gets its verdict:

- ``played through``: no turn was cut, and every recorded reply was played;
- ``replayed in part``: no turn was cut, but the loop ended a turn before its recorded
  end without a stop (a hand-off the recording went on after): never "played through";
- ``successful, cut at a real loop``: a successful run cut where the recording proves a
  loop (stopping a real loop is right whatever the policy);
- ``successful, cut: policy's fault``: a successful run cut without such proof;
- ``failed, stopped``: a failed run cut (what the stop saves);
- ``unlabelled, stopped``: a cut run whose success is not known.

For a run whose recording holds a real loop, its *fate*: ``stopped`` (the replay ended
the loop's turn before the loop's last repeat ran), ``nudged`` (not stopped, but the loop
answered one of the loop's repeated calls with a note instead of running it, or gave its
note right after one ran, and the recording changed course after it), or ``missed``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from convergent.replay._loops import Repeat, longest_repeat
from convergent.replay._recording import Trajectory, Turn
from convergent.replay._replayer import RunReplay, TurnReplay

__all__ = [
    "CUT_FAULT",
    "CUT_REAL_LOOP",
    "FAILED_STOPPED",
    "PARTIAL",
    "PLAYED_THROUGH",
    "UNLABELLED_STOPPED",
    "CallLine",
    "LoopFate",
    "RunVerdict",
    "Stop",
    "judge",
]

PLAYED_THROUGH = "played through"
PARTIAL = "replayed in part"
CUT_REAL_LOOP = "successful, cut at a real loop"
CUT_FAULT = "successful, cut: policy's fault"
FAILED_STOPPED = "failed, stopped"
UNLABELLED_STOPPED = "unlabelled, stopped"

_WINDOW_BEFORE = 4
_WINDOW_AFTER = 2
_SHORT = 160


@dataclass(frozen=True, slots=True)
class CallLine:
    """One recorded call near a stop, as the report shows it."""

    reply: int
    """Its reply in the turn (1-based)."""
    name: str
    """The tool."""
    arguments: str
    """The arguments, as short JSON."""
    result: str
    """The recorded result, shortened ("" when none was recorded)."""
    failed: bool
    """Whether the recording marks it failed."""
    status: str
    """``ran`` (the replay ran it), ``noted`` (answered with a note instead, the run going
    on), ``not run`` (the loop stopped before running it), or ``unplayed`` (a reply after
    the stop)."""


@dataclass(frozen=True, slots=True)
class Stop:
    """A turn the loop ended before the recording did, placed against the recording."""

    turn: int
    """The turn (0-based)."""
    reason: str
    """The stop reason."""
    rule: str
    """The rule that gave the stop, as the loop names it (`convergent.RunResult.stop_rule`):
    the setting `--set` names (``max_repeated_calls``, ``max_failing_steps``,
    ``max_tool_calls``...) or, for a stop no setting gives, the fact (``fatal``...)."""
    detail: str
    """The stop detail, on one line."""
    played: int
    """Recorded replies of the turn the model had given when the loop stopped."""
    recorded: int
    """Recorded replies in the turn."""
    replies_left: int
    """Recorded replies the stop left unplayed in the turn: the cycles it saves."""
    tokens_left: int | None
    """Tokens of those replies, where the recording has usage (else None)."""
    cost_left: float | None
    """Cost of those replies, where the recording has it (else None)."""
    repeat: Repeat
    """The longest unchanged repetition in the turn up to the stop."""
    real_loop: bool
    """Whether that repetition reaches the loop threshold: stopping there is right."""
    answered: bool
    """Whether the loop asked the model for an answer after the stop."""
    calls: tuple[CallLine, ...]
    """The recorded calls around the stop."""


@dataclass(frozen=True, slots=True)
class LoopFate:
    """What became of a real loop in the recording."""

    fate: str
    """``stopped``, ``nudged`` or ``missed``."""
    turn: int
    """The loop's turn (0-based)."""
    repeat: Repeat
    """The loop: the call, how often, and its replies."""


@dataclass(frozen=True, slots=True)
class RunVerdict:
    """One run's replay, judged: its stops, its loop, and its verdict."""

    id: str
    """The run's id."""
    name: str
    """The run's own name (what a ``--success`` map matches)."""
    source: str
    """The file it came from."""
    model: str
    """The recorded model."""
    success: bool | None
    """Its success label (None: unknown)."""
    turns: int
    """Recorded turns."""
    replies: int
    """Recorded replies."""
    tokens: int | None
    """Recorded tokens of all replies, where the recording has usage."""
    stops: tuple[Stop, ...]
    """Every turn the loop cut short, in order."""
    loop: LoopFate | None
    """The run's real loop and what became of it (None: the recording holds none)."""
    notes: int
    """Notes the loop gave, the run going on: calls it answered with a note instead of
    running them, and notes right after a reply's calls ran (a read or an undeclared
    call judged on its result, a failure streak)."""
    nudges: tuple[tuple[int, int, str], ...] = ()
    """Where: each note as its turn and reply (1-based) and the tool it was about (for a
    note after the calls ran: each tool of that reply)."""
    unplayed: int = 0
    """Recorded replies never played in turns the loop did not cut (a partial replay)."""
    gaps: Mapping[str, int] = field(default_factory=dict)
    """What the reader could not read or had to guess in the run (`Trajectory.gaps`)."""
    final_answer: bool = True
    """Whether the recording ends with an answer (text without tool calls)."""
    unlabelled_why: str = ""
    """Why a rule given for labels could not label the run."""

    @property
    def shown(self) -> str:
        """How a report names the run: its own name."""
        return self.name or self.id

    @property
    def stop(self) -> Stop | None:
        """The first cut turn, if any."""
        return self.stops[0] if self.stops else None

    @property
    def real_loop_only(self) -> bool:
        """Whether every cut is at a real loop."""
        return bool(self.stops) and all(stop.real_loop for stop in self.stops)

    @property
    def verdict(self) -> str:
        """The verdict (one of the constants of this module)."""
        if not self.stops:
            return PARTIAL if self.unplayed else PLAYED_THROUGH
        if self.success is None:
            return UNLABELLED_STOPPED
        if not self.success:
            return FAILED_STOPPED
        return CUT_REAL_LOOP if self.real_loop_only else CUT_FAULT

    @property
    def replies_saved(self) -> int:
        """Recorded replies left unplayed by all stops (cycles saved)."""
        return sum(stop.replies_left for stop in self.stops)

    @property
    def tokens_saved(self) -> int | None:
        """Recorded tokens left unplayed by all stops, where the recording has usage."""
        found = [stop.tokens_left for stop in self.stops if stop.tokens_left is not None]
        return sum(found) if found else None

    @property
    def cost_saved(self) -> float | None:
        """Recorded cost left unplayed by all stops, where the recording has it."""
        found = [stop.cost_left for stop in self.stops if stop.cost_left is not None]
        return sum(found) if found else None


def judge(trajectory: Trajectory, replay: RunReplay, threshold: int = 3) -> RunVerdict:
    """Judge a run's replay: its stops, its real loop's fate, its verdict.

    Args:
        trajectory: The recorded run.
        replay: Its replay (`replay_run`).
        threshold: Unchanged repeats of one call that make a real loop.
    """
    stops = tuple(
        _stop(trajectory, index, outcome, threshold)
        for index, outcome in enumerate(replay.turns)
        if outcome.cut
    )
    usage = [reply.usage for turn in trajectory.turns for reply in turn if reply.usage is not None]
    return RunVerdict(
        id=trajectory.id,
        name=trajectory.name,
        source=trajectory.source,
        model=trajectory.model,
        success=trajectory.success,
        turns=len(trajectory.turns),
        replies=trajectory.replies,
        tokens=sum(u.total_tokens for u in usage) if usage else None,
        stops=stops,
        loop=loop_fate(trajectory, replay.turns, threshold),
        notes=sum(outcome.notes for outcome in replay.turns),
        nudges=_nudges(trajectory, replay),
        unplayed=replay.unplayed,
        gaps=trajectory.gaps,
        final_answer=trajectory.final_answer is not None,
        unlabelled_why=trajectory.unlabelled_why,
    )


def _nudges(trajectory: Trajectory, replay: RunReplay) -> tuple[tuple[int, int, str], ...]:
    """Where the loop gave a note and went on: turn, reply (1-based) and tool, in order."""
    found: dict[tuple[int, int, str], None] = {}
    for index, (turn, outcome) in enumerate(zip(trajectory.turns, replay.turns, strict=True)):
        replaced = set(outcome.replaced)
        noted = set(outcome.noted_after)
        for reply, recorded in enumerate(turn):
            for call in recorded.calls:
                if reply in noted or (reply, call.key) in replaced:
                    found[(index + 1, reply + 1, call.name)] = None
    return tuple(found)


def _stop(
    trajectory: Trajectory,
    index: int,
    outcome: TurnReplay,
    threshold: int,
) -> Stop:
    turn = trajectory.turns[index]
    repeat = longest_repeat(
        turn,
        replies=outcome.played,
        read_only=trajectory.read_only,
        waits=trajectory.waits,
        idempotent=trajectory.idempotent,
    )
    unplayed = turn[outcome.played :]
    usage = [reply.usage for reply in unplayed if reply.usage is not None]
    return Stop(
        turn=index,
        reason=outcome.stop_reason,
        rule=outcome.rule,
        detail=" ".join(outcome.detail.split()),
        played=outcome.played,
        recorded=outcome.recorded,
        replies_left=len(unplayed),
        tokens_left=sum(u.total_tokens for u in usage) if usage else None,
        cost_left=sum(u.cost for u in usage) if any(u.cost for u in usage) else None,
        repeat=repeat,
        real_loop=repeat.times >= threshold,
        answered=outcome.extra_requests > 0,
        calls=_window(turn, outcome),
    )


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SHORT else flat[: _SHORT - 3] + "..."


def _window(turn: Turn, outcome: TurnReplay) -> tuple[CallLine, ...]:
    """The calls of the replies around the stop, each with what the replay did with it."""
    last = outcome.played - 1
    noted = set(outcome.replaced)
    noted_after = set(outcome.noted_after)
    unrun = set(outcome.unrun)
    lines: list[CallLine] = []
    for index in range(max(0, last - _WINDOW_BEFORE), min(len(turn), last + 1 + _WINDOW_AFTER)):
        for call in turn[index].calls:
            if index > last:
                status = "unplayed"
            elif (index, call.key) in noted or index in noted_after:
                status = "noted"
            elif (index, call.key) in unrun:
                status = "not run"
            else:
                status = "ran"
            lines.append(
                CallLine(
                    reply=index + 1,
                    name=call.name,
                    arguments=_short(
                        json.dumps(dict(call.arguments), default=str, ensure_ascii=False)
                    ),
                    result=_short(call.result or ""),
                    failed=call.failed,
                    status=status,
                )
            )
    return tuple(lines)


def loop_fate(
    trajectory: Trajectory, outcomes: Sequence[TurnReplay], threshold: int
) -> LoopFate | None:
    """What became of the run's real loops: the best fate over its looping turns, or None."""
    found: LoopFate | None = None
    for index, (turn, outcome) in enumerate(zip(trajectory.turns, outcomes, strict=True)):
        repeat = longest_repeat(
            turn,
            read_only=trajectory.read_only,
            waits=trajectory.waits,
            idempotent=trajectory.idempotent,
        )
        if repeat.times < threshold:
            continue
        # the reply with the last repeat never played, or played and the loop stopped there
        if outcome.played <= repeat.reply or (outcome.cut and outcome.played == repeat.reply + 1):
            return LoopFate("stopped", index, repeat)
        nudged = any(
            key == repeat.key and repeat.start <= reply <= repeat.reply
            for reply, key in outcome.replaced
        ) or any(repeat.start <= reply <= repeat.reply for reply in outcome.noted_after)
        if nudged and (found is None or found.fate == "missed"):
            found = LoopFate("nudged", index, repeat)
        elif found is None:
            found = LoopFate("missed", index, repeat)
    return found
