"""`RunMonitor`: the counters behind a run's progress facts, kept between decisions.

`convergent.stop.decide` is pure; what it needs to know about the past (does this call
come back with a result of the same meaning while nothing changed? do failures,
mistakes or rejected answers persist? is a note still available?) is counted here, one
call at a time, under the rules of a `convergent.StopPolicy`. The loop uses one monitor
per run, and so does every adapter for another framework, through
`convergent.loop.driver.CycleDriver`. Budgets are `convergent.loop.budget.Budget`'s.

Progress, the rule behind stalls:

- A result is compared with the previous result of the same call by its differences
  (`convergent.meaning.compare`): one whose every difference is a time stamp, a
  duration, a request id or another value that changes while nothing happens is the
  same result. The previous text is kept in memory (by reference) for the last calls;
  the state keeps only digests, so after a resume a result counts as the same only when
  its bytes are, and any other counts as a change.
- What a call does comes from its tool's declared `convergent.effects.Effect`: a read
  (``read_only=True``) changes nothing; an idempotent call (``idempotent=True``) may
  change something, but not again when repeated; a write (``read_only=False``)
  changes something each time; an undeclared tool changes something only when its
  (call, result) pair is new since the last change. A call rejected as the model's
  mistake and a call that failed never change anything. Calls to a tool the run does
  not have are mistakes (see below), not repeats.
- A read, an idempotent call and an undeclared call run and are judged on their
  result. An identical call (same name, same canonical arguments) counts while
  nothing has changed; its count starts again when its result means something else
  than its last one (for a call that may change something, every count starts again;
  a read changes nothing, so only its own count does), when a call that changed
  something ran since, or when real time passed: ``poll_gap`` seconds outside
  model requests since it last started (a poll that waits itself, a slow job), or
  ``wait_gap`` seconds outside model requests between its last end and this start (a
  wait or sleep between polls, a pause). Real time passing starts every count again:
  the world had time to change. A slow command repeated without change is then
  bounded by the budgets, not by this rule.
- A write is judged before it runs, and its count is every identical call since the
  last other change, whatever its results and however long ago: the repeat itself is
  the harm (a voucher issued again with a new id is a second voucher).
- The ``max_repeated_calls``-th identical call with the same meaning while nothing
  changed (for a write: the ``max_repeated_calls``-th identical call) is a stall
  finding; so is the first call of a cycle of 2 to ``max_cycle_length`` calls about to
  start its ``max_repeated_calls``-th repetition with every result unchanged. A cycle
  never spans a write, nor a call made after real time passed.
- A write at a finding does not run; a call judged on its result gets the note after
  it ran. After a note, the next call of the same pattern stops the run: a read runs
  first (a poll that says something new is progress), an undeclared call does not run
  unless real time passed (it may be a write).
- Within one batch, calls count in call order, and a call that may change something
  lets the calls after it count afresh.

A note is given once per stretch without progress, whichever rule finds it first
(``StopPolicy.notes``): the stretch ends when a call succeeds with something new (a
call and result not among the last few calls). The repeat rules also keep one note
per episode: an episode ends when a call brings something new. After a note, the
next finding of any rule in the stretch stops the run.

Streaks count *steps* (one response's batch) and answers:

- failing steps (at least one call failed, none succeeded): every one counts toward
  ``max_failing_steps`` (a search that tries something new each step, a tool that is
  down); a call that fails again within the streak counts toward
  ``max_repeated_failures`` (a loop: the same call again);
- mistakes (every call of the step was the model's mistake: an unknown tool,
  arguments that do not parse or validate, a call past a tool-call cap whose policy is
  ``continue``): every such step counts toward ``max_mistakes``, and the same mistaken
  call made again within the streak toward ``max_repeated_mistakes``;
- answers rejected by the verifier or the output type count toward
  ``max_rejected_answers`` until a call brings something new.

A successful call ends the failure and mistake streaks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from convergent.digest import call_digest, text_digest
from convergent.effects import Declared, Effect, as_effect
from convergent.meaning import MAX_DIFFERENCES, compare, same_meaning
from convergent.messages import CallOutcome, ToolCall
from convergent.policy import DEFAULT_POLICY, StopPolicy
from convergent.state import MonitorState
from convergent.stop import (
    Nudge,
    Stall,
    StallKind,
    StopReason,
    ToolFailure,
    Unfinished,
    canonical_call_key,
)

__all__ = ["RunMonitor", "describe_call"]

_NO_EFFECTS: Mapping[str, Effect] = MappingProxyType({})
"""The effects learned of a run whose tools were never named, before any is learned."""
_STRETCH_SIZE = 32
"""Distinct calls remembered per stretch (the least recently seen goes first)."""
_RECENT_SIZE = 40
"""Calls remembered in order (cycles, and what is new)."""
_KEYS_KEPT = 64
"""Failed (or mistaken) calls remembered per streak, one entry per step each was in."""
_MESSAGES_KEPT = 64
"""Digests of the user's messages remembered, to tell a repeated one from a new one."""
_MESSAGE_TEXTS_KEPT = 8
"""The user's last messages kept as text, to tell one sent again with a new time stamp."""
_STEP_DIFFERENCES = 4 * MAX_DIFFERENCES
"""Differences examined over all the results of one step; past them, a result that
differs from its previous one is new (the work of a step is bounded)."""
_OBSERVED = frozenset({CallOutcome.OK, CallOutcome.FAILED, CallOutcome.INVALID})


@dataclass(slots=True)
class _Reviewed:
    call: ToolCall
    read_only: bool | None
    """True for a read, False for a write, None otherwise (`Effect`)."""
    digest: int
    """The call's digest (`call_digest`)."""
    timed: bool
    """Real time passed since the last identical call (``poll_gap``, ``wait_gap``)."""
    mark: float | None
    """Seconds outside model requests when the call started (None: time does not count)."""
    effect: Effect = Effect.UNDECLARED
    """What the call does, as its tool declares it."""


@dataclass(slots=True)
class _Failure:
    call: ToolCall
    digest: int
    text: str
    fatal: bool


_FLAGS: dict[Effect, bool | None] = {
    Effect.READ: True,
    Effect.WRITE: False,
    Effect.IDEMPOTENT: None,
    Effect.UNDECLARED: None,
}
"""The ``read_only`` flag the comparison of results reads, by effect (an idempotent
call changes nothing when repeated: a cycle may span it)."""
_RESULT_JUDGED = frozenset({Effect.READ, Effect.IDEMPOTENT, Effect.UNDECLARED})
"""Effects whose calls run, and are judged on their result."""
_MISTAKES = (
    "calls the run cannot make (tools it does not have, arguments that do not parse or "
    "validate, calls past a tool-call cap)"
)


def describe_call(name: str, arguments: Mapping[str, object], limit: int = 100) -> str:
    """``name(key="value", ...)``, clipped to ``limit`` characters, for notes and details."""
    shown = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False, default=str)}"
        for key, value in arguments.items()
    )
    text = f"{name}({shown})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


class RunMonitor:
    """Counts repeats, streaks and notes for one run, under a `StopPolicy`.

    Args:
        policy: The rules (default `StopPolicy()`).
        tools: The tools the run offers, by name, with what each declares: an
            `convergent.effects.Effect`, or the older ``read_only`` flag (True: a read,
            False: a write, None: undeclared); a call to another name is the model's
            mistake. None: every name is an undeclared tool.
        state: The state to continue (a resumed run's), updated in place.
        idle: Seconds the run has spent outside model requests so far; None (or a
            function returning None): time never counts as progress.
    """

    __slots__ = (
        "_effects",
        "_examined",
        "_failures",
        "_finding",
        "_invalid",
        "_last",
        "_messages",
        "_mistaken",
        "_ok",
        "_other",
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
        tools: Mapping[str, Declared] | None = None,
        state: MonitorState | None = None,
        idle: Callable[[], float | None] | None = None,
    ) -> None:
        self.policy = policy if policy is not None else DEFAULT_POLICY
        self.declare(tools)
        self.state = state if state is not None else MonitorState()
        self.idle: Callable[[], float | None] = idle or _no_time
        self._ok = False
        self._invalid = False
        self._failures: list[_Failure] = []
        self._mistaken: dict[int, ToolCall] = {}
        """The step's mistaken calls, by digest."""
        self._reviewed: dict[int, _Reviewed] = {}
        self._finding: Stall | None = None
        """A stall found on a call's result, decided at the end of the step."""
        self._watch: tuple[int, ...] = ()
        """The calls of the pattern of the latest stall finding, watched once noted."""
        self._last: dict[int, str] = {}
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
    def tools(self) -> Mapping[str, Declared] | None:
        """The tools the run offers, with what each declares (None: any name)."""
        return self._tools

    def declare(self, tools: Mapping[str, Declared] | None) -> None:
        """The run's tools changed (a host learns them once the run started): these, now.

        Between steps; the counters and the results kept for comparison stay.
        """
        self._tools = tools
        self._effects: Mapping[str, Effect] = (
            _NO_EFFECTS if tools is None else {name: as_effect(f) for name, f in tools.items()}
        )
        self._other: Effect | None = Effect.UNDECLARED if tools is None else None
        """What a tool not in ``_effects`` is: undeclared while any name goes, else none."""

    def learn(self, name: str, declared: Declared) -> None:
        """A tool the host came upon during the run (a graph's tool node's), with its effect.

        It joins the tools the run was told of, unless they name it already (the caller's
        declaration stands); when they were never named (any name goes), the tools not
        learned stay undeclared.
        """
        if self._tools is not None:
            if name not in self._tools:
                self.declare({**self._tools, name: declared})
            return
        effect = as_effect(declared)
        if self._effects.get(name, Effect.UNDECLARED) is not effect:
            self._effects = {**self._effects, name: effect}

    def effect(self, name: str) -> Effect | None:
        """What a call of the tool ``name`` does (None: the run has no such tool)."""
        return self._effects.get(name, self._other)

    # -- repeats ------------------------------------------------------------------------

    def _now(self) -> float | None:
        """Seconds outside model requests now (None: time does not count)."""
        policy = self.policy
        if policy.poll_gap is None and policy.wait_gap is None:
            return None
        return self.idle()

    def _review_one(self, call: ToolCall, idle: float | None) -> _Reviewed | None:
        """The call's effect, digest and whether time passed; None: not a known tool."""
        effect = self._effects.get(call.name, self._other)
        if effect is None:
            return None
        digest = text_digest(canonical_call_key(call.name, call.arguments))
        timed = idle is not None and self._waited(digest, idle)
        return _Reviewed(call, _FLAGS[effect], digest, timed, idle, effect)

    def _waited(self, digest: int, idle: float) -> bool:
        """Whether real time passed since the identical call (``poll_gap``, ``wait_gap``)."""
        policy, state = self.policy, self.state
        gap, started = policy.poll_gap, state.started.get(digest)
        if gap is not None and started is not None and idle - started >= gap:
            return True
        wait, ended = policy.wait_gap, state.ended.get(digest)
        return wait is not None and ended is not None and idle - ended >= wait

    def review(self, calls: Sequence[ToolCall]) -> Stall | None:
        """Whether the calls about to run would repeat without progress (a prediction).

        Writes are judged here, and undeclared calls the model was told repeat (a call
        judged on its result runs first, see `observe`). Returns the finding (which
        calls, how often, whether a note is left), or None. Nothing is recorded:
        `observe` records the calls that run.
        """
        idle = self._now()
        state = self.state
        reviewed = self._reviewed
        reviewed.clear()
        fresh = False  # a call earlier in this batch may have changed something
        earlier: dict[int, int] | None = None  # a write earlier in the batch, and its count
        positions: list[int] = []
        finding: tuple[ToolCall, int, int, int, bool] | None = None
        for position, call in enumerate(calls):
            item = self._review_one(call, idle)
            if item is None:
                continue
            reviewed[id(call)] = item
            digest, effect = item.digest, item.effect
            if effect is Effect.READ:
                continue
            entry = None if fresh else state.stretch.get(digest)
            count = (entry[1] if entry is not None else 0) + 1
            if earlier:
                count += earlier.get(digest, 0)
            if effect is Effect.WRITE:
                # a write's repeat is the harm: neither its results nor time reset it
                watched = not fresh and digest in state.watched
                found = watched or count >= self.policy.max_repeated_calls
                earlier = {digest: count}
            else:  # it runs, unless the model was told it repeats and no time passed
                watched = not fresh and not item.timed and digest in state.watched
                found = watched and effect is Effect.UNDECLARED
                earlier = None
            if found:
                positions.append(position)
                if finding is None:
                    finding = (call, digest, count, 0, watched)
            fresh = True
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
        nudge = self.state.notes_given < self.policy.notes and self._may_note()
        write = self.effect(call.name) is Effect.WRITE
        return Stall(
            what=what,
            times=times,
            nudge=nudge,
            positions=positions,
            kind=kind,
            write=write,
            wait=None if write else self._wait_advice(),
        )

    def _wait_advice(self) -> float | None:
        """Seconds to wait before a call so that it is a fresh look (None: time never counts)."""
        policy = self.policy
        return policy.poll_gap if policy.poll_gap is not None else policy.wait_gap

    def _may_note(self) -> bool:
        """Whether a note is still left in this stretch without progress (any rule's)."""
        return self.state.stretch_notes < self.policy.notes

    def _cycle(self, call: int, pair: int) -> int:
        """The period of the cycle a call that ran starts again; 0: none.

        The call starts the cycle's ``max_repeated_calls``-th repetition, every result
        unchanged.

        Args:
            call: The call's digest.
            pair: Its (call, result) pair, just appended to the recent calls.
        """
        policy, state = self.policy, self.state
        repetitions = policy.max_repeated_calls - 1
        if repetitions < 1:
            return 0
        recent = state.recent
        # the recent calls before this one, since the last call a cycle may not span
        have = len(recent) - 1
        room = min(have, state.since_break - 1)
        for period in range(2, policy.max_cycle_length + 1):
            span = repetitions * period
            if room < span:
                break  # a longer period spans more still
            if recent[have - period] != pair:
                continue
            start = have - span
            if any(recent[i] != recent[i + period] for i in range(start, have - period)):
                continue
            if len({entry >> 64 for entry in recent[start : start + period]}) < 2:
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
        item = self._reviewed.get(id(call))
        if item is None:
            item = self._review_one(call, self._now())
        digest = item.digest if item is not None else call_digest(call.name, call.arguments)
        if outcome is CallOutcome.OK:
            self._ok = True
        elif outcome is CallOutcome.FAILED:
            self._failures.append(_Failure(call, digest, result, fatal))
        else:
            self._invalid = True
            self._mistaken.setdefault(digest, call)
        if item is None:  # a tool the run does not have: a mistake, not a repeat
            return
        self._count(item, outcome, result)

    def refused(self, calls: Sequence[ToolCall]) -> None:
        """Calls of the step did not run: past a tool-call cap the model was told of.

        They are the model's mistakes (calls the run cannot make), not repeats.
        """
        for call in calls:
            self._invalid = True
            self._mistaken.setdefault(call_digest(call.name, call.arguments), call)

    def _count(self, item: _Reviewed, outcome: CallOutcome, result: str) -> None:
        """Count a call that ran: its result's meaning, whether the pair is new, its count."""
        state = self.state
        digest = item.digest
        meaning = self._meaning(digest, result)
        pair = digest << 64 | meaning
        new = self._remember(item, pair)
        stretch = state.stretch
        entry = stretch.pop(digest, None)
        effect, ok = item.effect, outcome is CallOutcome.OK
        if effect is Effect.WRITE:  # the repeat itself is the harm, whatever it returns
            count, changed = (entry[1] if entry is not None else 0) + 1, True
        elif entry is None:  # another call changes something only with a new result
            count, changed = 1, effect is not Effect.READ and new
        elif entry[0] != meaning:  # answered otherwise: its own count starts again, and a
            # call that may change something may have changed it (a read never does)
            count, changed = 1, effect is not Effect.READ
        elif item.timed:  # the same answer after real time passed: a fresh look
            count, changed = 1, False
        else:
            count, changed = entry[1] + 1, False
        # time passed, or a call changed something (a failed or rejected one did not):
        # every count starts again
        if item.timed or (changed and ok):
            stretch.clear()
        stretch[digest] = (meaning, count)
        if len(stretch) > _STRETCH_SIZE:
            del stretch[next(iter(stretch))]
        now = self._now()
        if now is not None:  # when it ended: the wait before the same call again
            _keep(state.ended, digest, now)
        if ok and new:  # something new came back: a stretch with progress
            state.stretch_notes = 0
        if effect in _RESULT_JUDGED and self._finding is None:
            self._finding = self._judge_read(item, count, pair)

    def _remember(self, item: _Reviewed, pair: int) -> bool:
        """Record a call's (call, result) pair, and when it started; whether the pair is new.

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
            _keep(state.started, item.digest, item.mark)
        return new

    def _meaning(self, digest: int, result: str) -> int:
        """The meaning of a call's result, as a number (see `MonitorState.results`).

        It is the previous result's when the two say the same
        (`convergent.meaning.compare`), else the digest of this text. Without the
        previous text (a resumed run), only the same bytes say the same.
        """
        results, last = self.state.results, self._last
        exact = text_digest(result)
        kept = results.pop(digest, None)
        before = last.pop(digest, None)
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
        results[digest] = (exact, meant)
        last[digest] = result
        if len(results) > _STRETCH_SIZE:
            oldest = next(iter(results))
            del results[oldest]
            last.pop(oldest, None)
        return meant

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
        state.stretch_notes = 0

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
        digest = text_digest(flat)
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

        Returns the tool failure that calls for the tool-error policy, and a stall: a call
        that repeated without progress, or a streak of the model's mistakes.
        """
        ok, invalid, failures = self._ok, self._invalid, self._failures
        mistaken = self._mistaken
        finding, self._finding = self._finding, None
        self._ok = self._invalid = False
        if failures:
            self._failures = []
        if mistaken:
            self._mistaken = {}
        self._reviewed.clear()
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
            self._reset_mistakes()
            return None, finding
        if failures:  # a failure is not a mistake: the mistake streak is broken
            state.mistakes = 0
            state.mistaken_calls.clear()
            return self._failed(failures), finding
        if not invalid:
            return None, finding
        mistakes = self._mistakes(mistaken)
        return None, finding if finding is not None else mistakes

    def _failed(self, failures: list[_Failure]) -> ToolFailure | None:
        state, policy = self.state, self.policy
        state.failing_steps += 1
        calls = {failure.digest: failure.call for failure in failures}
        key, times = _most_repeated(state.failed_calls, list(calls))
        state.repeated_failures = max(state.repeated_failures, times)
        nudge = state.failure_notes < policy.notes and self._may_note()
        repeated, steps = policy.max_repeated_failures, policy.max_failing_steps
        error = next(f.text for f in failures if f.digest == key)
        if repeated is not None and times >= repeated:
            call = calls[key]
            return ToolFailure(
                error=error,
                streak=state.failing_steps,
                at_limit=True,
                nudge=nudge,
                kind="repeated",
                call=describe_call(call.name, call.arguments),
                times=times,
            )
        if steps is not None and state.failing_steps >= steps:
            return ToolFailure(
                error=failures[0].text,
                streak=state.failing_steps,
                at_limit=True,
                nudge=nudge,
                kind="steps",
            )
        return None

    def _mistakes(self, mistaken: dict[int, ToolCall]) -> Stall | None:
        """A step of nothing but the model's mistakes: the streak, at a threshold."""
        state, policy = self.state, self.policy
        state.mistakes += 1
        key, times = _most_repeated(state.mistaken_calls, list(mistaken))
        nudge = state.mistake_notes < policy.notes and self._may_note()
        repeated, steps = policy.max_repeated_mistakes, policy.max_mistakes
        if key and repeated is not None and times >= repeated:
            call = mistaken[key]
            return Stall(
                what=describe_call(call.name, call.arguments),
                times=times,
                nudge=nudge,
                kind="repeated_mistake",
            )
        if steps is not None and state.mistakes >= steps:
            return Stall(what=_MISTAKES, times=state.mistakes, nudge=nudge, kind="mistakes")
        return None

    def _reset_failures(self) -> None:
        state = self.state
        if state.failing_steps or state.failed_calls:
            state.failing_steps = state.repeated_failures = state.failure_notes = 0
            state.failed_calls.clear()

    def _reset_mistakes(self) -> None:
        state = self.state
        if state.mistakes or state.mistake_notes or state.mistaken_calls:
            state.mistakes = state.mistake_notes = 0
            state.mistaken_calls.clear()

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
            nudge=state.rejection_notes < policy.notes and self._may_note(),
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
        if not state.partial and not state.continuations:
            return text
        joined = state.partial + text if state.partial else text
        state.continuations, state.partial = 0, ""
        return joined

    def noted(self, nudge: Nudge) -> None:
        """Record that the model got ``nudge``.

        It uses up a note of its kind, and the stretch's note.
        """
        state = self.state
        state.stretch_notes += 1
        if nudge.reason is StopReason.TOOL_ERROR:
            state.failure_notes += 1
            return
        match nudge.kind:
            case "mistakes" | "repeated_mistake":
                state.mistake_notes += 1
            case "rejected":
                state.rejection_notes += 1
            case _:
                state.notes_given += 1
                state.watched = sorted(set(state.watched) | set(self._watch))


def _no_time() -> float | None:
    return None


def _keep(marks: dict[int, float], digest: int, when: float) -> None:
    """Record ``when`` for the call, as the latest of the bounded marks."""
    marks.pop(digest, None)
    marks[digest] = when
    if len(marks) > _STRETCH_SIZE:
        del marks[next(iter(marks))]


def _most_repeated(streak: list[int], step: list[int]) -> tuple[int, int]:
    """Add the step's calls (each once) to the streak's: the step's call made most often.

    Returns that call's digest and how often it was made in the streak (0 and 0: none).
    """
    streak.extend(step)
    del streak[:-_KEYS_KEPT]
    best, times = 0, 0
    for key in step:
        made = streak.count(key)
        if made > times:
            best, times = key, made
    return best, times
