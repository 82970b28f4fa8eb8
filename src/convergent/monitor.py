"""`RunMonitor`: the counters behind a run's stop facts, kept between decisions.

`convergent.stop.decide` is pure; what it needs to know about the past (has this call
come back with the same result while nothing changed? do tool failures persist? is a
nudge still available? how much budget is left?) is counted here, one call at a time.
The loop uses one monitor per run, and so can an adapter for another framework: feed
it the calls and their results, and pass what it reports to `decide` inside `Facts`.

Progress, the rule behind stalls:

- An identical call (same name, same canonical arguments) counts while nothing has
  changed. Its count starts again when its result differs from its last one, or when
  a call that changed something ran since. A call whose result differs from its last
  one (a poll whose status moved) shows that the world changed, so every count starts
  again, whatever its tool declares.
- A call *changed something* when its tool is declared state-changing
  (``read_only=False``), or when its tool is unannotated (``read_only=None``) and its
  (call, result) pair is new since the last change: repeating an unannotated call and
  getting the same result evidently changed nothing. A read-only tool
  (``read_only=True``), a call to a tool the run does not have, a call rejected as the
  model's mistake and a call that failed never change anything.
- The request that would be the ``max_repeated_calls``-th identical call with the same
  results while nothing changed is a stall finding; so is the first call of a short
  cycle (2 or 3 calls) about to start its ``max_repeated_calls``-th repetition with
  every result unchanged, whatever the tools declare (nothing in such a cycle moves;
  found while ``max_repeated_calls`` is at most 11).
  Calls to a tool the run does not have are counted by name, whatever the arguments.
- Within one batch, calls count in call order, and a call that may change something
  (anything not read-only) lets the calls after it count afresh.

A nudge is given once per episode (``Limits.stall_nudges``): an episode ends when a
call brings something new (a call and result not among the last few calls).

Tool-error streaks count *steps* (one response's batch): a step fails when at least one
call failed and none succeeded; a success resets the streak. A failing step adds to it
when it repeats a call that already failed in this streak, or an error text already
seen in it (a broken tool fails the same way whatever the arguments); a step of new
calls failing with new errors is the model searching and does not add. The first
failing step starts the streak at 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import inf
from typing import TYPE_CHECKING, Literal
from zlib import crc32

from convergent.limits import Limits
from convergent.messages import CallOutcome, ToolCall, Usage
from convergent.stop import LimitReached, Nudge, Stall, StopReason, ToolFailure, canonical_call_key

if TYPE_CHECKING:
    from convergent.models._prices import TokenPrice

__all__ = [
    "CHARS_PER_MESSAGE",
    "FINAL_ANSWER_TOKENS",
    "MonitorState",
    "RunMonitor",
    "describe_call",
]

FINAL_ANSWER_TOKENS = 512
"""Output tokens the final answer after a stop may use (less when a budget is short)."""
FINAL_PROMPT_TOKENS = 200
"""Tokens kept for the final request's own prompt (the request and the stop's detail)."""
MIN_FINAL_ANSWER_TOKENS = 32
"""A final answer with less room than this is not requested."""
BUDGET_NOTE_AT = 0.8
"""The share of a budget after which the model is told what remains."""
OUTPUT_PRICE_FACTOR = 8
"""Assumed upper bound of the price of an output token over an input token, for
keeping a final answer within ``max_cost`` when only the blended price is known (a
model without a `TokenPrice` of its own that reports each response's cost)."""
CHARS_PER_TOKEN = 3
"""Characters counted as one token when estimating text no provider has counted yet
(on the high side for English text, so estimates err towards more tokens)."""
CHARS_PER_MESSAGE = 16
"""Characters added per message to its text when estimating, for the message's framing
(role, ids: a few tokens in every provider's format)."""

_STRETCH_SIZE = 32
"""Distinct calls remembered per stretch (the least recently seen goes first)."""
_RECENT_SIZE = 30
"""Calls remembered in order (short cycles are found for ``max_repeated_calls`` up to 11)."""
_ERRORS_KEPT = 32
"""Failed calls and error texts remembered per streak."""
_OBSERVED = frozenset({CallOutcome.OK, CallOutcome.FAILED, CallOutcome.INVALID})
_UNKNOWN_TOOL = "\x02"


@dataclass(slots=True, kw_only=True)
class MonitorState:
    """What a `RunMonitor` remembers between decisions; serialisable, kept in `RunState`."""

    stretch: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Calls seen since the last change, least recently seen first: canonical key ->
    (digest of its last result, how many times in a row it gave that result)."""
    recent: list[int] = field(default_factory=list)
    """The last calls, oldest first, each as one number: the digest of its canonical key
    times 2**64 plus the digest of its result (short cycles, and what is new)."""
    stall_nudges: int = 0
    """Stall nudges given in the current episode."""
    error_streak: int = 0
    """Failing steps in a row."""
    error_calls: list[str] = field(default_factory=list)
    """Canonical keys of the calls that failed in this streak."""
    error_texts: list[int] = field(default_factory=list)
    """Digests of the error texts seen in this streak."""
    error_nudges: int = 0
    """Tool-error nudges given in this streak."""
    budget_noted: bool = False
    """The model was told that most of a budget is used (once per run)."""
    child_cycles: int = 0
    """Cycles run by child agents this run called as tools; they count against
    ``max_cycles`` beside the run's own."""


@dataclass(slots=True)
class _Failure:
    key: str
    digest: int
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
    """Counts repeats, tool-error streaks, nudges and budget use for one run.

    Args:
        limits: The run's budgets and thresholds (default `Limits()`).
        tools: The tools the run offers, by name, with their ``read_only`` flag (True,
            False, or None when unknown); a call to another name is a call to a tool the
            run does not have. None: every name is a tool with an unknown flag.
        max_consecutive_tool_errors: Failing steps in a row that call for the
            tool-error policy; None never.
        on_tool_error: ``stop``: any failure ends the run; ``continue``: streaks count.
        state: The state to continue (a resumed run's), updated in place.
        price: The model's price: the cost kept for the next cycle and the final answer
            prices input and output tokens at it. None (or free): the last request's
            blended price, with output assumed `OUTPUT_PRICE_FACTOR` times dearer.
    """

    __slots__ = (
        "_failures",
        "_ok",
        "_cycle_span",
        "_recent_size",
        "_reviewed",
        "_tools",
        "_watch",
        "limits",
        "note_from",
        "max_errors",
        "policy",
        "price",
        "state",
    )

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        tools: Mapping[str, bool | None] | None = None,
        max_consecutive_tool_errors: int | None = 3,
        on_tool_error: Literal["continue", "stop"] = "continue",
        state: MonitorState | None = None,
        price: TokenPrice | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.price = price if price is not None and not price.free else None
        self._tools = tools
        self.max_errors = max_consecutive_tool_errors
        self.policy = on_tool_error
        self.state = state if state is not None else MonitorState()
        self._ok = False
        self._failures: list[_Failure] = []
        self._reviewed: Sequence[tuple[ToolCall, str, bool | None, int]] = ()
        """The calls last reviewed with their keys, for `observe` to reuse."""
        limits = self.limits
        self._recent_size = min(3 * limits.max_repeated_calls, _RECENT_SIZE)
        # the shortest history a cycle can show: two calls, repeated once less than the limit
        self._cycle_span = max(2 * (limits.max_repeated_calls - 1), 2)
        watched = (limits.max_total_tokens, limits.max_cost, limits.max_seconds)
        at_cycles = inf if limits.max_cycles is None else BUDGET_NOTE_AT * limits.max_cycles
        self._watch = (
            at_cycles,
            None
            if watched == (None, None, None)
            else tuple(inf if m is None else BUDGET_NOTE_AT * m for m in watched),
        )
        """Where each budget reaches its note: cycles, then tokens, cost and seconds (None
        when none of those three is set)."""
        if self.state.budget_noted:
            note_from = inf
        elif watched == (None, None, None):
            note_from = at_cycles
        else:
            note_from = 0.0
        self.note_from: float = note_from
        """The cycle from which `budget_note` may have a note (0: a token, cost or time
        budget is watched; infinite once it was given), so that a loop can skip asking."""

    # -- repeats ------------------------------------------------------------------------

    def _key(self, call: ToolCall) -> tuple[str, bool | None, int]:
        """The call's canonical key, its tool's ``read_only`` flag, and the key's digest."""
        for made, key, read_only, digest in self._reviewed:
            if made is call:
                return key, read_only, digest
        return self._new_key(call)

    def _new_key(self, call: ToolCall) -> tuple[str, bool | None, int]:
        tools, name = self._tools, call.name
        if tools is None:
            key, read_only = canonical_call_key(name, call.arguments), None
        elif name in tools:
            key, read_only = canonical_call_key(name, call.arguments), tools[name]
        else:  # a tool the run lacks: counted by name, and it cannot change anything
            key, read_only = _UNKNOWN_TOOL + name, True
        return key, read_only, _digest(key)

    def review(self, calls: Sequence[ToolCall]) -> Stall | None:
        """Whether the calls about to run would repeat without progress (a prediction).

        Returns the finding (which calls, how often, whether a nudge is left), or None.
        Nothing is recorded: `observe` records the calls that run.
        """
        state = self.state
        limit = self.limits.max_repeated_calls
        stretch = state.stretch
        reviewed: Sequence[tuple[ToolCall, str, bool | None, int]]
        if len(calls) == 1:  # the common case, without the batch's bookkeeping
            call = calls[0]
            key, read_only, digest = self._new_key(call)
            reviewed = self._reviewed = ((call, key, read_only, digest),)
            entry = stretch.get(key)
            recent = state.recent
            if (entry[1] + 1 if entry is not None else 1) < limit and (
                # only a call that starts the last period can start a cycle again
                len(recent) < self._cycle_span
                or not (
                    recent[-2] >> 64 == digest or (len(recent) > 2 and recent[-3] >> 64 == digest)
                )
            ):
                return None
        else:
            self._reviewed = ()
            reviewed = self._reviewed = [(call, *self._key(call)) for call in calls]
        fresh = False  # a call earlier in this batch may have changed something
        earlier: dict[str, int] = {}
        positions: list[int] = []
        what, times = "", 0
        for position, (call, key, read_only, digest) in enumerate(reviewed):
            entry = None if fresh else stretch.get(key)
            count = (entry[1] if entry is not None else 0) + earlier.get(key, 0) + 1
            period = 0 if position or count >= limit else self._cycle(digest)
            if count >= limit or period:
                positions.append(position)
                if not what:
                    shown = describe_call(call.name, call.arguments)
                    what = f"the cycle of {period} calls starting with {shown}" if period else shown
                    times = limit if period else count
            if read_only is True:
                earlier[key] = earlier.get(key, 0) + 1
            else:
                fresh, earlier = True, {key: count}
        if not positions:
            return None
        nudge = state.stall_nudges < self.limits.stall_nudges
        return Stall(what=what, times=times, nudge=nudge, positions=tuple(positions))

    def _cycle(self, call: int) -> int:
        """The period of the short cycle a call (its key's digest) would start again; 0: none.

        The call starts the ``max_repeated_calls``-th repetition of a cycle of 2 or 3
        calls whose every result was unchanged.
        """
        repetitions = self.limits.max_repeated_calls - 1
        recent = self.state.recent
        for period in (2, 3):
            span = repetitions * period
            if repetitions < 1 or len(recent) < span or recent[-period] >> 64 != call:
                continue
            tail = recent[-span:]
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
        reviewed = self._reviewed
        if reviewed and reviewed[0][0] is call:
            _, key, read_only, call_digest = reviewed[0]
        else:
            key, read_only, call_digest = self._key(call)
        digest = crc32(result.encode("utf-8", "surrogatepass")) | len(result) << 32
        state = self.state
        stretch = state.stretch
        entry = stretch.pop(key, None)
        pair = call_digest << 64 | digest
        recent = state.recent
        if state.stall_nudges and pair not in recent:
            state.stall_nudges = 0  # something new: a later stall is a new episode
        recent.append(pair)
        if len(recent) > self._recent_size:
            del recent[0]
        if entry is None:
            count, changed = 1, read_only is not True
        elif entry[0] == digest:
            count, changed = entry[1] + 1, read_only is False
        else:  # the same call answered differently: the world changed, whatever it is
            count, changed = 1, True
        if changed and outcome == CallOutcome.OK:  # a failed or rejected call changed nothing
            stretch.clear()
            stretch[key] = (digest, count)
        else:
            stretch[key] = (digest, count)
            if len(stretch) > _STRETCH_SIZE:
                del stretch[next(iter(stretch))]
        if outcome == CallOutcome.OK:
            self._ok = True
        elif outcome == CallOutcome.FAILED:
            self._failures.append(_Failure(key, digest, result, fatal))

    def changed(self) -> None:
        """Something outside the calls changed (new instructions): repeats count afresh."""
        state = self.state
        state.stretch.clear()
        state.recent.clear()
        state.stall_nudges = 0

    # -- tool-error streaks -------------------------------------------------------------

    def end_step(self) -> ToolFailure | None:
        """The batch recorded since the last step is complete: what its failures mean."""
        ok, failures = self._ok, self._failures
        self._ok = False
        if not failures:
            if ok and self.state.error_streak:
                self._reset_streak()
            return None
        self._failures = []
        fatal = next((f for f in failures if f.fatal), None)
        if fatal is not None:
            return ToolFailure(error=fatal.text, fatal=True)
        if self.policy == "stop":
            return ToolFailure(error=failures[0].text, policy=True)
        if ok:
            self._reset_streak()
            return None
        state = self.state
        known_calls, known_texts = state.error_calls, state.error_texts
        repeats = not state.error_streak or any(
            f.key in known_calls or f.digest in known_texts for f in failures
        )
        for failure in failures:
            if failure.key not in known_calls:
                known_calls.append(failure.key)
            if failure.digest not in known_texts:
                known_texts.append(failure.digest)
        del known_calls[:-_ERRORS_KEPT], known_texts[:-_ERRORS_KEPT]
        if not repeats:
            return None
        state.error_streak += 1
        if self.max_errors is None or state.error_streak < self.max_errors:
            return None
        return ToolFailure(
            error=failures[0].text,
            streak=state.error_streak,
            at_limit=True,
            nudge=state.error_nudges < self.limits.stall_nudges,
        )

    def _reset_streak(self) -> None:
        state = self.state
        if state.error_streak or state.error_calls:
            state.error_streak, state.error_nudges = 0, 0
            state.error_calls.clear()
            state.error_texts.clear()

    def reset_errors(self) -> None:
        """Forget the tool-error streak (a resumed run gets a fresh chance)."""
        self._reset_streak()

    def nudged(self, nudge: Nudge) -> None:
        """Record that the model got ``nudge`` (it uses up one of the episode's nudges)."""
        if nudge.reason is StopReason.STALLED:
            self.state.stall_nudges += 1
        else:
            self.state.error_nudges += 1

    # -- budgets ------------------------------------------------------------------------

    def limit(
        self,
        *,
        cycles: int,
        usage: Usage,
        elapsed: float,
        last: Usage | None = None,
        pending_chars: int = 0,
    ) -> LimitReached | None:
        """The budget that forbids another model request, if any.

        Args:
            cycles: Model requests made so far.
            usage: Usage so far.
            elapsed: Seconds since the run started.
            last: The previous request's usage, to keep room for one more cycle like it
                and for the final answer; None keeps no room (no final answer).
            pending_chars: Characters added to the conversation since that request
                (with `CHARS_PER_MESSAGE` more for each message).
        """
        limits = self.limits
        reserved_tokens, reserved_cost = 0, 0.0
        if last is not None and (
            limits.max_total_tokens is not None or limits.max_cost is not None
        ):
            # one more cycle like the last (its input grown by what came since), then the
            # final request: that conversation, what that cycle adds, the prompt, the answer
            size = _request_size(last, pending_chars)
            cycle = size + last.output_tokens
            final = cycle + _tokens(pending_chars) + FINAL_PROMPT_TOKENS
            answer = self._answer_allowance()
            reserved_tokens = cycle + final + answer
            if self.price is not None:
                reserved_cost = self.price.cost(size, last.output_tokens) + self.price.cost(
                    final, answer
                )
            else:
                reserved_cost = _price(last) * (cycle + final + OUTPUT_PRICE_FACTOR * answer)
        return limits.reached(
            cycles, usage.total_tokens, elapsed, usage.cost, reserved_tokens, reserved_cost
        )

    def _answer_allowance(self) -> int:
        budget = self.limits.max_total_tokens
        return FINAL_ANSWER_TOKENS if budget is None else min(FINAL_ANSWER_TOKENS, budget // 10)

    def final_answer_tokens(
        self, *, usage: Usage, last: Usage, pending_chars: int, wanted: int | None = None
    ) -> int:
        """Output tokens a final request may have within the budgets (0: it does not fit).

        Args:
            usage: Usage so far.
            last: The previous request's usage.
            pending_chars: Characters of the conversation since that request, the final
                request's own prompt included.
            wanted: The output tokens asked for (default `FINAL_ANSWER_TOKENS`).
        """
        limits = self.limits
        room = wanted if wanted is not None else FINAL_ANSWER_TOKENS
        size = _request_size(last, pending_chars)
        if limits.max_total_tokens is not None:
            room = min(room, limits.max_total_tokens - usage.total_tokens - size)
        if limits.max_cost is not None and self.price is not None:
            prompt = self.price.cost(size, 0)
            left = limits.max_cost - usage.cost - prompt
            if left < 0:
                return 0
            # a million output tokens, at the tier this request's input falls in
            output = self.price.cost(size, 1_000_000) - prompt
            if output:
                room = min(room, int(left * 1_000_000 / output))
        elif limits.max_cost is not None and last.cost > 0:
            price = _price(last)
            if not price:
                return 0  # a cost without token counts: the answer's cost cannot be bounded
            left = limits.max_cost - usage.cost - price * size
            room = min(room, int(left / (price * OUTPUT_PRICE_FACTOR)))
        return room if room >= MIN_FINAL_ANSWER_TOKENS else 0

    def budget_note(self, *, cycles: int, usage: Usage, elapsed: float) -> str | None:
        """Once per run, when 80 % of any budget is used: what remains, for the model."""
        state, limits = self.state, self.limits
        at_cycles, others = self._watch
        if state.budget_noted or (
            cycles < at_cycles
            and (
                others is None
                or (
                    usage.total_tokens < others[0]
                    and usage.cost < others[1]
                    and elapsed < others[2]
                )
            )
        ):
            return None
        parts: list[str] = []
        for used, maximum, unit in (
            (cycles, limits.max_cycles, "cycles"),
            (usage.total_tokens, limits.max_total_tokens, "tokens"),
            (usage.cost, limits.max_cost, "cost"),
            (elapsed, limits.max_seconds, "seconds"),
        ):
            if maximum is None or maximum <= 0:
                continue
            left = max(maximum - used, 0)
            shown = f"{left:.4g}" if unit == "cost" else f"{left:.0f}"
            parts.append(f"{shown} of {maximum:g} {unit}")
        if not parts:
            return None
        state.budget_noted = True
        self.note_from = inf
        return (
            "Budget note: this run has used 80% or more of its budget. Left: "
            + ", ".join(parts)
            + ". Plan to finish: give your best answer before the budget runs out."
        )


def _tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def _request_size(last: Usage, pending_chars: int) -> int:
    """Estimated input tokens of the next request: the last one, its reply, what came since."""
    return last.input_tokens + last.output_tokens + _tokens(pending_chars)


def _price(last: Usage) -> float:
    """The blended price per token of the last request (0 when unknown)."""
    return last.cost / last.total_tokens if last.total_tokens and last.cost else 0.0
