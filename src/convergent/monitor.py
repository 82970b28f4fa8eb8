"""`RunMonitor`: the counters behind a run's progress facts, kept between decisions.

`convergent.stop.decide` is pure; what it needs to know about the past (does this call
come back with a result of the same meaning while nothing changed? do failures,
mistakes or rejected answers persist? is a note still available?) is counted here, one
call at a time, under the rules of a `convergent.StopPolicy`. The loop uses one monitor
per run, and so does every adapter for another framework, through
`convergent.driver.CycleDriver`. Budgets are `convergent.budget.Budget`'s.

Progress, the rule behind stalls:

- A result is compared with the previous result of the same call by its differences
  (`convergent.meaning.compare`): one whose every difference is a time stamp, a
  duration, a request id or another value that changes while nothing happens is the
  same result. The previous text is kept in memory (by reference) for the last calls;
  the state keeps only digests, so after a resume a result counts as the same only when
  its bytes are, and any other counts as a change.
- An identical call (same name, same canonical arguments) counts while nothing has
  changed. Its count starts again when its result means something else than its last
  one, when a call that changed something ran since, or when real time passed since its
  last call started (``poll_gap`` seconds outside model requests: a wait between polls,
  a poll that waits itself, a pause). A slow command repeated without change is then
  bounded by the budgets, not by this rule.
  A call whose result moved shows that the world changed, so every count starts again,
  whatever its tool declares.
- A call *changed something* when its tool is declared state-changing
  (``read_only=False``), or when its tool is unannotated (``read_only=None``) and its
  (call, result) pair is new since the last change. A read-only tool, a call rejected as
  the model's mistake and a call that failed never change anything. Calls to a tool the
  run does not have are mistakes (see below), not repeats.
- The ``max_repeated_calls``-th identical call with the same meaning while nothing
  changed is a stall finding (for a call declared state-changing, one more: an action
  may be meant to repeat, such as moving up a folder twice); so is the first call of a cycle of 2 to
  ``max_cycle_length`` calls about to start its ``max_repeated_calls``-th repetition with
  every result unchanged. A cycle never spans a call declared state-changing, nor a call
  made after real time passed.
- A call that may change something (not declared read-only) is judged before it runs:
  at a finding it does not run. A read-only call always runs and is judged on its
  result: a poll that says something new is progress, never replaced by a note.
- Within one batch, calls count in call order, and a call that may change something
  lets the calls after it count afresh.

A note is given once per episode (``StopPolicy.notes``): an episode ends when a call
brings something new (a call and result not among the last few calls). After a note,
the next call of the same pattern (the repeated call, or any call of the cycle) stops
the run.

Streaks count *steps* (one response's batch) and answers:

- failing steps (at least one call failed, none succeeded): every one counts toward
  ``max_failing_steps``; one that repeats a call that already failed in the streak
  counts toward ``max_repeated_failures`` too (the first failing step starts both);
- mistakes (every call of the step was the model's mistake: an unknown tool, arguments
  that do not parse or validate) count toward ``max_mistakes``;
- answers rejected by the verifier or the output type count toward
  ``max_rejected_answers`` until a call brings something new.

A successful call ends the failure and mistake streaks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal
from zlib import crc32

from convergent.budget import BudgetState
from convergent.meaning import MAX_DIFFERENCES, compare, same_meaning
from convergent.messages import CallOutcome, ToolCall
from convergent.policy import DEFAULT_POLICY, StopPolicy
from convergent.stop import (
    Nudge,
    Stall,
    StallKind,
    StopReason,
    ToolFailure,
    Unfinished,
    canonical_call_key,
)

__all__ = ["MonitorState", "RunMonitor", "describe_call"]

_STRETCH_SIZE = 32
"""Distinct calls remembered per stretch (the least recently seen goes first)."""
_RECENT_SIZE = 40
"""Calls remembered in order (cycles, and what is new)."""
_ERRORS_KEPT = 32
"""Failed calls remembered per streak."""
_MESSAGES_KEPT = 64
"""Digests of the user's messages remembered, to tell a repeated one from a new one."""
_MESSAGE_TEXTS_KEPT = 8
"""The user's last messages kept as text, to tell one sent again with a new time stamp."""
_STEP_DIFFERENCES = 4 * MAX_DIFFERENCES
"""Differences examined over all the results of one step; past them, a result that
differs from its previous one is new (the work of a step is bounded)."""
_OBSERVED = frozenset({CallOutcome.OK, CallOutcome.FAILED, CallOutcome.INVALID})


@dataclass(slots=True, kw_only=True)
class MonitorState:
    """What a run's counters remember between decisions; serialisable, kept in `RunState`."""

    stretch: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Calls seen since the last change, least recently seen first: canonical key ->
    (the meaning of its last result, as in ``results``; how many times in a row it gave
    it)."""
    results: dict[str, tuple[int, int]] = field(default_factory=dict)
    """The last result of each recent call, least recently seen first: canonical key ->
    (the digest of its text; its meaning, the digest of the first of the results in a row
    that meant the same)."""
    started: dict[str, float] = field(default_factory=dict)
    """When each recent call last started, in seconds outside model requests (kept
    across changes: time passes whatever changed)."""
    recent: list[int] = field(default_factory=list)
    """The last calls, oldest first, each as one number: the digest of its canonical key
    times 2**64 plus its result's meaning, as in ``results`` (cycles, and what is new)."""
    since_break: int = 0
    """Calls since the last one a cycle may not span (declared state-changing, or made
    after real time passed)."""
    notes_given: int = 0
    """Stall notes given in the current episode."""
    watched: list[int] = field(default_factory=list)
    """Digests of the calls of the pattern a note was given for in this episode."""
    failing_steps: int = 0
    """Failing steps in a row."""
    repeated_failures: int = 0
    """Failing steps in a row that repeated a call that failed in the streak."""
    failed_calls: list[str] = field(default_factory=list)
    """Canonical keys of the calls that failed in this streak."""
    failure_notes: int = 0
    """Notes given for the failure streaks."""
    mistakes: int = 0
    """Steps in a row whose every call was the model's mistake."""
    mistake_notes: int = 0
    """Notes given for the mistake streak."""
    rejections: int = 0
    """Answers in a row rejected by the verifier or the output type."""
    rejection_notes: int = 0
    """Notes given for the rejected-answer streak."""
    continuations: int = 0
    """Replies in a row that were not an answer (empty, cut, refused)."""
    partial: str = ""
    """The text of the replies cut at the token limit so far, to be continued."""
    messages: list[int] = field(default_factory=list)
    """Digests of the user's messages (the task, steering), to tell a repeated one."""
    budget: BudgetState = field(default_factory=BudgetState)
    """What the run's budgets keep between decisions (`convergent.budget.Budget`)."""


@dataclass(slots=True)
class _Reviewed:
    call: ToolCall
    key: str
    read_only: bool | None
    digest: int
    timed: bool
    """Real time passed since the last identical call started."""
    mark: float | None
    """Seconds outside model requests when the call started (None: time does not count)."""


@dataclass(slots=True)
class _Failure:
    key: str
    text: str
    fatal: bool


def describe_call(name: str, arguments: Mapping[str, object], limit: int = 100) -> str:
    """``name(key="value", ...)``, clipped to ``limit`` characters, for notes and details."""
    shown = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False, default=str)}"
        for key, value in arguments.items()
    )
    text = f"{name}({shown})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


def _digest(text: str) -> int:
    """A stable digest of a text (the same in every process): its CRC-32 and length."""
    return crc32(text.encode("utf-8", "surrogatepass")) | len(text) << 32


class RunMonitor:
    """Counts repeats, streaks and notes for one run, under a `StopPolicy`.

    Args:
        policy: The rules (default `StopPolicy()`).
        tools: The tools the run offers, by name, with their ``read_only`` flag (True,
            False, or None when unknown); a call to another name is the model's mistake.
            None: every name is a tool with an unknown flag.
        state: The state to continue (a resumed run's), updated in place.
        idle: Seconds the run has spent outside model requests so far; None (or a
            function returning None): time never counts as progress.
    """

    __slots__ = (
        "_examined",
        "_failures",
        "_finding",
        "_invalid",
        "_last",
        "_messages",
        "_ok",
        "_recent_size",
        "_reviewed",
        "_tools",
        "_watch",
        "idle",
        "policy",
        "state",
    )

    def __init__(
        self,
        policy: StopPolicy | None = None,
        *,
        tools: Mapping[str, bool | None] | None = None,
        state: MonitorState | None = None,
        idle: Callable[[], float | None] | None = None,
    ) -> None:
        self.policy = policy if policy is not None else DEFAULT_POLICY
        self._tools = tools
        self.state = state if state is not None else MonitorState()
        self.idle: Callable[[], float | None] = idle or _no_time
        self._ok = False
        self._invalid = False
        self._failures: list[_Failure] = []
        self._reviewed: dict[int, _Reviewed] = {}
        self._finding: Stall | None = None
        """A stall found on a read's result, decided at the end of the step."""
        self._watch: tuple[int, ...] = ()
        """The calls of the pattern of the latest stall finding, watched once noted."""
        self._last: dict[str, str] = {}
        """The text of the last result of each call in ``state.results`` this process saw."""
        self._examined = 0
        """Differences between results examined in this step."""
        self._messages: list[str] = []
        """The user's last messages, their spaces collapsed (see `message`)."""
        self._recent_size = min(
            self.policy.max_repeated_calls * max(self.policy.max_cycle_length, 2) + 1,
            _RECENT_SIZE,
        )

    @property
    def tools(self) -> Mapping[str, bool | None] | None:
        """The tools the run offers, with their ``read_only`` flag (None: any name)."""
        return self._tools

    # -- repeats ------------------------------------------------------------------------

    def _review_one(self, call: ToolCall, idle: float | None) -> _Reviewed | None:
        """The call's key, flag, digest and whether time passed; None: not a known tool."""
        tools, name = self._tools, call.name
        if tools is None:
            read_only = None
        elif name in tools:
            read_only = tools[name]
        else:
            return None
        key = canonical_call_key(name, call.arguments)
        timed = False
        gap = self.policy.poll_gap
        if gap is not None and idle is not None:
            started = self.state.started.get(key)
            timed = started is not None and idle - started >= gap
        return _Reviewed(call, key, read_only, _digest(key), timed, idle)

    def review(self, calls: Sequence[ToolCall]) -> Stall | None:
        """Whether the calls about to run would repeat without progress (a prediction).

        Only calls that may change something are judged here (a read runs and is judged
        on its result, see `observe`). Returns the finding (which calls, how often,
        whether a note is left), or None. Nothing is recorded: `observe` records the
        calls that run.
        """
        idle = self.idle() if self.policy.poll_gap is not None else None
        state, limit = self.state, self.policy.max_repeated_calls
        reviewed = self._reviewed = {}
        fresh = False  # a call earlier in this batch may have changed something
        earlier: dict[str, int] = {}
        positions: list[int] = []
        finding: tuple[ToolCall, int, int, int, bool] | None = None
        for position, call in enumerate(calls):
            item = self._review_one(call, idle)
            if item is None:
                continue
            reviewed[id(call)] = item
            key = item.key
            if item.read_only is True:
                earlier[key] = earlier.get(key, 0) + 1
                continue
            entry = None if fresh or item.timed else state.stretch.get(key)
            count = (entry[1] if entry is not None else 0) + earlier.get(key, 0) + 1
            watched = not fresh and not item.timed and item.digest in state.watched
            # an action may be meant to repeat (moving up a folder twice): one more
            own = limit + 1 if item.read_only is False else limit
            period = 0
            if not watched and count < own and not position:
                period = self._cycle(item.digest, None)
            if watched or count >= own or period:
                positions.append(position)
                if finding is None:
                    finding = (call, item.digest, count, period, watched)
            fresh, earlier = True, {key: count}
        if finding is None:
            return None
        return self._stall(*finding, positions=tuple(positions))

    def _stall(
        self,
        call: ToolCall,
        digest: int,
        count: int,
        period: int,
        watched: bool,
        positions: tuple[int, ...] = (),
    ) -> Stall:
        """The finding for a call that repeats (alone, or starting a cycle of ``period``)."""
        shown = describe_call(call.name, call.arguments)
        limit = self.policy.max_repeated_calls
        kind: StallKind = "repeat"
        if watched:
            what, times = shown, max(count, limit)
        elif period:
            what, times, kind = f"the cycle of {period} calls starting with {shown}", limit, "cycle"
            self._watch = tuple({entry >> 64 for entry in self.state.recent[-period:]} | {digest})
        else:
            what, times = shown, count
            self._watch = (digest,)
        nudge = self.state.notes_given < self.policy.notes
        return Stall(what=what, times=times, nudge=nudge, positions=positions, kind=kind)

    def _cycle(self, call: int, pair: int | None) -> int:
        """The period of the cycle a call would start again; 0: none.

        The call would start the cycle's ``max_repeated_calls``-th repetition, every
        result unchanged.

        Args:
            call: The digest of the call's key.
            pair: Its (key, result) pair once it ran and was appended to the recent
                calls; None: a prediction (its result is taken to be the last one).
        """
        repetitions = self.policy.max_repeated_calls - 1
        recent = self.state.recent
        # a prediction counts the call itself as one more
        span_offset = 0 if pair is None else 1
        for period in range(2, self.policy.max_cycle_length + 1):
            span = repetitions * period
            have = len(recent) - span_offset
            if repetitions < 1 or have < span or self.state.since_break - span_offset < span:
                continue
            tail = recent[have - span : have]
            if tail[-period] >> 64 != call:
                continue
            if pair is not None and tail[-period] != pair:
                continue
            if any(tail[i] != tail[i + period] for i in range(span - period)):
                continue
            if len({entry >> 64 for entry in tail[:period]}) < 2:
                continue  # one call repeated: the identical-call rule counts it
            return period
        return 0

    def observe(
        self, call: ToolCall, outcome: CallOutcome, result: str, fatal: bool = False
    ) -> None:
        """Record one call that ran (``ok`` or ``failed``) or was rejected (``invalid``).

        Call it for each call of a batch in call order, then `end_step`. Calls that did
        not run (``not_executed``, ``interrupted``, ``needs_user``) are not recorded.
        """
        if outcome not in _OBSERVED:
            return
        if outcome is CallOutcome.OK:
            self._ok = True
        elif outcome is CallOutcome.FAILED:
            self._failures.append(
                _Failure(canonical_call_key(call.name, call.arguments), result, fatal)
            )
        else:
            self._invalid = True
        item = self._reviewed.get(id(call))
        if item is None:
            idle = self.idle() if self.policy.poll_gap is not None else None
            item = self._review_one(call, idle)
            if item is None:  # a tool the run does not have: a mistake, not a repeat
                return
        self._count(item, outcome, result)

    def _count(self, item: _Reviewed, outcome: CallOutcome, result: str) -> None:
        state = self.state
        read_only = item.read_only
        digest = self._meaning(item.key, result)
        stretch = state.stretch
        entry = stretch.pop(item.key, None)
        pair = item.digest << 64 | digest
        new = self._remember(item, pair)
        if entry is None:  # an unannotated call changes something only with a new result
            count, changed = 1, read_only is False or (read_only is None and new)
        elif entry[0] != digest:  # the same call answered otherwise: the world changed
            count, changed = 1, True
        elif item.timed:  # the same answer after real time passed: a fresh look
            count, changed = 1, False
        else:
            count, changed = entry[1] + 1, read_only is False
        if changed and outcome is CallOutcome.OK:  # a failed or rejected call changed nothing
            stretch.clear()
        stretch[item.key] = (digest, count)
        if len(stretch) > _STRETCH_SIZE:
            del stretch[next(iter(stretch))]
        if read_only is True and self._finding is None:
            self._finding = self._judge_read(item, count, pair)

    def _meaning(self, key: str, result: str) -> int:
        """The meaning of a call's result, as a number (see `MonitorState.results`).

        It is the previous result's when the two say the same
        (`convergent.meaning.compare`), else the digest of this text. Without the
        previous text (a resumed run), only the same bytes say the same.
        """
        results, last = self.state.results, self._last
        exact = _digest(result)
        kept = results.pop(key, None)
        before = last.pop(key, None)
        meant = exact
        if kept is not None and before is not None:  # compared by their differences
            if before == result:
                meant = kept[1]
            else:
                budget = min(MAX_DIFFERENCES, _STEP_DIFFERENCES - self._examined)
                found = compare(before, result, max_differences=max(budget, 0))
                self._examined += found.examined
                if found.same:
                    meant = kept[1]
        elif kept is not None and kept[0] == exact:  # resumed: only the same bytes
            meant = kept[1]
        results[key] = (exact, meant)
        last[key] = result
        if len(results) > _STRETCH_SIZE:
            oldest = next(iter(results))
            del results[oldest]
            last.pop(oldest, None)
        return meant

    def _remember(self, item: _Reviewed, pair: int) -> bool:
        """Record a call's (key, result) pair, and when it started; whether the pair is new.

        Something new ends the episode: a later stall gets a note again.
        """
        state = self.state
        recent = state.recent
        new = pair not in recent
        if new:
            if state.notes_given or state.watched:
                state.notes_given, state.watched = 0, []
            state.rejections = 0
        recent.append(pair)
        if len(recent) > self._recent_size:
            del recent[0]
        if item.timed:
            state.since_break = 1
        elif item.read_only is False:
            state.since_break = 0
        else:
            state.since_break += 1
        if item.mark is not None:
            marks = state.started
            marks.pop(item.key, None)
            marks[item.key] = item.mark
            if len(marks) > _STRETCH_SIZE:
                del marks[next(iter(marks))]
        return new

    def _judge_read(self, item: _Reviewed, count: int, pair: int) -> Stall | None:
        """A read that ran: whether its result repeats without progress.

        A noted pattern that goes on (nothing new came back: the episode did not end)
        stops; else the call's count, then a cycle it completes.
        """
        if item.digest in self.state.watched and not item.timed:
            return self._stall(item.call, item.digest, count, 0, True)
        if count >= self.policy.max_repeated_calls:
            return self._stall(item.call, item.digest, count, 0, False)
        period = self._cycle(item.digest, pair)
        if period:
            return self._stall(item.call, item.digest, count, period, False)
        return None

    def changed(self) -> None:
        """Something outside the calls changed (new instructions): repeats count afresh."""
        state = self.state
        state.stretch.clear()
        state.recent.clear()
        state.since_break = 0
        state.notes_given, state.watched = 0, []
        state.rejections = 0

    def message(self, text: str) -> bool:
        """A message from the user reached the run: whether it is new.

        A new instruction lets every count start again; a message that repeats one the
        run already had (a harness that sends the task again after every step, with a
        fresh time stamp maybe) does not. Messages are compared with their spaces
        collapsed: by their differences with the last few this process saw
        (`convergent.meaning.same_meaning`), and by digest with older ones (a resumed
        run's), where only the same text is the same.
        """
        return not self._known(text)

    def task(self, text: str) -> None:
        """Remember the run's task, so that the same text sent again is not new."""
        self._known(text)

    def _known(self, text: str) -> bool:
        """Whether the run had this message already; it is remembered either way."""
        flat = " ".join(text.split())
        digest = _digest(flat)
        seen, texts = self.state.messages, self._messages
        known = digest in seen or any(same_meaning(before, flat) for before in texts)
        if digest not in seen:
            seen.append(digest)
            del seen[:-_MESSAGES_KEPT]
        if flat not in texts:
            texts.append(flat)
            del texts[:-_MESSAGE_TEXTS_KEPT]
        return known

    # -- streaks ------------------------------------------------------------------------

    def end_step(self) -> tuple[ToolFailure | None, Stall | None]:
        """The batch recorded since the last step is complete: what it means.

        Returns the tool failure that calls for the tool-error policy, and a stall: a read
        that repeated without progress, or a streak of the model's mistakes.
        """
        ok, invalid, failures = self._ok, self._invalid, self._failures
        finding, self._finding = self._finding, None
        self._ok = self._invalid = False
        self._failures = []
        self._reviewed = {}
        self._examined = 0
        state, policy = self.state, self.policy
        if failures:
            fatal = next((f for f in failures if f.fatal), None)
            if fatal is not None:
                return ToolFailure(error=fatal.text, fatal=True), finding
            if policy.on_tool_error == "stop":
                return ToolFailure(error=failures[0].text, policy=True), finding
        if ok:
            self._reset_failures()
            state.mistakes = state.mistake_notes = 0
            return None, finding
        if failures:
            state.mistakes = 0
            return self._failed(failures), finding
        if not invalid:
            return None, finding
        state.mistakes += 1
        limit = policy.max_mistakes
        if finding is None and limit is not None and state.mistakes >= limit:
            finding = Stall(
                what="calls the run cannot make (tools it does not have, arguments that do "
                "not parse or validate)",
                times=state.mistakes,
                nudge=state.mistake_notes < policy.notes,
                kind="mistakes",
            )
        return None, finding

    def _failed(self, failures: list[_Failure]) -> ToolFailure | None:
        state, policy = self.state, self.policy
        known = state.failed_calls
        repeats = not state.failing_steps or any(f.key in known for f in failures)
        for failure in failures:
            if failure.key not in known:
                known.append(failure.key)
        del known[:-_ERRORS_KEPT]
        state.failing_steps += 1
        if repeats:
            state.repeated_failures += 1
        nudge = state.failure_notes < policy.notes
        repeated, steps = policy.max_repeated_failures, policy.max_failing_steps
        kind: Literal["repeated", "steps"]
        if repeats and repeated is not None and state.repeated_failures >= repeated:
            streak, kind = state.repeated_failures, "repeated"
        elif steps is not None and state.failing_steps >= steps:
            streak, kind = state.failing_steps, "steps"
        else:
            return None
        return ToolFailure(
            error=failures[0].text, streak=streak, at_limit=True, nudge=nudge, kind=kind
        )

    def _reset_failures(self) -> None:
        state = self.state
        if state.failing_steps or state.failed_calls:
            state.failing_steps = state.repeated_failures = state.failure_notes = 0
            state.failed_calls.clear()

    def reset_errors(self) -> None:
        """Forget the failure streaks (a resumed run gets a fresh chance)."""
        self._reset_failures()

    def rejected(self, why: str) -> Stall | None:
        """An answer was rejected (verifier or output type): the streak, at its threshold."""
        state, policy = self.state, self.policy
        state.rejections += 1
        limit = policy.max_rejected_answers
        if limit is None or state.rejections < limit:
            return None
        return Stall(
            what=f"the answer ({why})",
            times=state.rejections,
            nudge=state.rejection_notes < policy.notes,
            kind="rejected",
        )

    def unfinished(self, kind: Literal["empty", "cut", "refused"], text: str) -> Unfinished:
        """A reply without tool calls that is not an answer: empty, cut or refused."""
        state = self.state
        state.continuations += 1
        if kind == "cut":
            state.partial += text
        return Unfinished(
            kind=kind,
            times=state.continuations,
            left=state.continuations <= self.policy.max_continuations,
            text=state.partial or text,
        )

    def finished_reply(self, text: str) -> str:
        """A reply that is an answer or calls tools: the text it completes (cut parts first)."""
        state = self.state
        joined = state.partial + text if state.partial else text
        state.continuations, state.partial = 0, ""
        return joined

    def noted(self, nudge: Nudge) -> None:
        """Record that the model got ``nudge`` (it uses up a note of its kind)."""
        state = self.state
        if nudge.reason is StopReason.TOOL_ERROR:
            state.failure_notes += 1
            return
        match nudge.kind:
            case "mistakes":
                state.mistake_notes += 1
            case "rejected":
                state.rejection_notes += 1
            case _:
                state.notes_given += 1
                state.watched = sorted(set(state.watched) | set(self._watch))


def _no_time() -> float | None:
    return None
