"""`Budget`: one run's budgets: what is used, what is left, what must be kept, the note.

`convergent.Limits` says what a run may spend (cycles, tokens, seconds, cost, tool
calls); a `Budget` counts what it spent and answers the questions the loop asks before
each model request and each batch of calls:

- may another request be made (`limit`), and how many output tokens may it have
  (`request_tokens`) and how many seconds (`seconds_left`), so that the run never
  spends past a budget, with room kept for the answer after a stop;
- which calls of a batch may run within the tool-call caps (`admit`);
- is it time to tell the model what is left (`note`), always before a budget can stop
  the run;
- how much may an answer after the stop have (`final_request_tokens`), and what is left
  for a child run called as a tool (`remaining`).

Token and cost figures of the next request are estimates (`CHARS_PER_TOKEN`
characters a token, on the high side for English text and code): a text of one token
per character can still overshoot (see ``docs/loop.md``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from math import inf
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from convergent.exceptions import UserError
from convergent.limits import Limits
from convergent.messages import NO_USAGE, AssistantMessage, Message, ToolCall, Usage
from convergent.models._prices import priced
from convergent.state import BudgetState
from convergent.stop import LimitReached

if TYPE_CHECKING:
    from convergent.models._prices import TokenPrice

__all__ = [
    "Admission",
    "BUDGET_NOTE_AT",
    "Budget",
    "CHARS_PER_MESSAGE",
    "CHARS_PER_TOKEN",
    "FINAL_ANSWER_TOKENS",
    "NOTHING_REFUSED",
    "RunTally",
    "SpentRun",
    "Tally",
    "added",
    "budgets_used",
    "check_room",
    "message_chars",
    "renewed",
]

FINAL_ANSWER_TOKENS = 512
"""Output tokens the answer after a stop may use (less when a budget is short), and the
most kept for it."""
ANSWER_ROOM_FACTOR = 2
"""Room kept for the answer after a stop, in the run's longest reply so far: a reply in
words is at most twice the longest reply before it in 90 % of 5,248 such replies of the
τ²-bench conversations (median 0.81x, 95th percentile 2.7x)."""
FINAL_PROMPT_TOKENS = 200
"""Tokens kept for the final request's own prompt (the request and the stop's detail)."""
MIN_FINAL_ANSWER_TOKENS = 32
"""An answer after a stop with less room than this is not requested."""
MIN_REPLY_TOKENS = 32
"""A request with less room than this for its reply is not made."""
REQUEST_TOKENS_CEILING = 8192
"""A request's output is capped to what a budget leaves only below this (a larger
``max_tokens`` than the model supports is an error at some providers)."""
BUDGET_NOTE_AT = 0.8
"""The share of a budget after which the model is told what remains."""
OUTPUT_PRICE_FACTOR = 8
"""Assumed upper bound of the price of an output token over an input token, for
keeping a request within ``max_cost`` when only the blended price is known."""
CHARS_PER_TOKEN = 3
"""Characters counted as one token when estimating text no provider has counted yet."""
CHARS_PER_MESSAGE = 16
"""Characters added per message to its text when estimating, for the message's framing."""
FINAL_TIME_SHARE = 0.25
"""At most this share of ``max_seconds`` is kept for the answer after a stop."""


class Tally(Protocol):
    """Where a run's requests and usage are counted (`convergent.RunState` is one)."""

    cycles: int
    """Model requests made so far (a final answer's request is not one)."""
    usage: Usage
    """Usage reported so far, the final answer's included."""


@dataclass(slots=True)
class RunTally:
    """A `Tally` of its own, for a host that keeps no run state of convergent's."""

    cycles: int = 0
    """Model requests made so far."""
    usage: Usage = NO_USAGE
    """Usage reported so far."""


_N = TypeVar("_N", int, float)


@dataclass(frozen=True, slots=True)
class Admission:
    """What the tool-call caps make of a batch (`Budget.admit`)."""

    refused: Mapping[int, LimitReached] = field(default_factory=dict)
    """Calls past a cap whose policy is ``continue``, by position: they do not run, and
    the run goes on."""
    stop: tuple[int, LimitReached] | None = None
    """The first call past a cap whose policy is ``stop`` and that cap: it and the calls
    after it do not run, and the run stops."""


NOTHING_REFUSED = Admission()
"""Every call of the batch may run."""


class Budget:
    """The budgets of one run, counted as it goes.

    Args:
        limits: What the run may spend (default `Limits()`).
        tally: Where requests and usage are counted (a run's `RunState`); default a
            fresh `RunTally`.
        state: What the budget kept so far (a resumed run's), updated in place.
        clock: Monotonic seconds.
        elapsed_before: Seconds the run took before this process took it over.
        price: The model's price: usage that reports no cost is costed at it, and so is
            the room kept; None: only reported costs count, and the room is estimated
            from the latest request's blended price.
        final_answer: Keep room for one answer after a stop.
    """

    __slots__ = (
        "_before",
        "_bracketed",
        "_predicted",
        "_unseen",
        "_clock",
        "_in_request",
        "_last_batch",
        "_last_cycle",
        "_started",
        "final_answer",
        "last",
        "_limits",
        "counts_text",
        "price",
        "state",
        "tally",
    )

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        tally: Tally | None = None,
        state: BudgetState | None = None,
        clock: Callable[[], float] = time.monotonic,
        elapsed_before: float = 0.0,
        price: TokenPrice | None = None,
        final_answer: bool = True,
    ) -> None:
        self.counts_text = False
        """Whether a budget is measured in tokens or cost, estimated from the text.

        Without one, the characters a caller passes to `limit`, `note` and
        `start_request` are never read, and need not be counted."""
        self.limits = limits if limits is not None else Limits()
        self.tally: Tally = tally if tally is not None else RunTally()
        self.state = state if state is not None else BudgetState()
        self.price = price if price is not None and not price.free else None
        self.final_answer = final_answer
        self._clock = clock
        self._started = clock()
        self._before = elapsed_before
        self._bracketed = True
        self._in_request: float | None = None
        self._last_cycle = 0.0
        self._last_batch = 0
        self.last: Usage = NO_USAGE
        """The latest request's usage (none yet: estimates count the whole conversation)."""
        self._predicted = 0
        """The text's estimate of the input of the request in flight (0: none)."""
        self._unseen = 0
        """Input tokens the provider counted for the latest request beyond the text's
        estimate of it (what the text does not show: tool definitions resent, hidden
        reasoning, results counted otherwise); each later request is taken to grow by
        as much again."""

    # -- what was spent -----------------------------------------------------------------

    @property
    def cycles(self) -> int:
        """Model requests made so far (the final answer's request is not one)."""
        return self.tally.cycles

    def cycles_used(self) -> int:
        """Cycles counted against ``max_cycles``: the run's own and its child runs'."""
        return self.tally.cycles + self.state.child_cycles

    @property
    def limits(self) -> Limits:
        """What the run may spend."""
        return self._limits

    @limits.setter
    def limits(self, limits: Limits) -> None:
        self._limits = limits
        self.counts_text = limits.max_total_tokens is not None or limits.max_cost is not None

    def elapsed(self) -> float:
        """Seconds the run has taken."""
        return self._before + self._clock() - self._started

    def idle(self) -> float | None:
        """Seconds the run spent outside model requests (tools, waits, pauses).

        None when a request was reported without being started first (`requested`):
        the time of requests is then unknown.
        """
        if not self._bracketed:
            return None
        return self._before + self._clock() - self._started - self.state.model_seconds

    def start_request(self, pending_chars: int = 0) -> int:
        """A model request is about to be made: returns its cycle number.

        Args:
            pending_chars: Characters added to the conversation since the last response
                (its estimate is compared with the input the provider reports).
        """
        tally = self.tally
        tally.cycles += 1
        self._in_request = self._clock()
        self._predicted = self._text_size(pending_chars) if self.last.input_tokens else 0
        return tally.cycles

    def responded(self, usage: Usage) -> Usage:
        """The request was answered, with this usage; returns it costed at the price."""
        started = self._in_request
        if started is not None:
            took = self._clock() - started
            state = self.state
            state.model_seconds += took
            state.longest_request = max(state.longest_request, took)
            self._last_cycle = took
            self._in_request = None
        if usage is NO_USAGE:  # nothing counted (a scripted or local model): nothing to add
            self._predicted = 0
            self.last = usage
            return usage
        usage = priced(usage, self.price)
        if self._predicted and usage.input_tokens:
            self._unseen = max(usage.input_tokens - self._predicted, 0)
        self._predicted = 0
        self.last = usage
        if usage.output_tokens > self.state.longest_reply:
            self.state.longest_reply = usage.output_tokens
        if usage.requests or usage.input_tokens or usage.output_tokens or usage.cost:
            tally = self.tally
            tally.usage = tally.usage + usage
        return usage

    def requested(self, usage: Usage = NO_USAGE, pending_chars: int = 0) -> int:
        """A request was made and answered, reported after the fact (its time is unknown)."""
        cycle = self.start_request(pending_chars)
        self._in_request = None
        self._bracketed = False
        self.responded(usage)
        return cycle

    def add_usage(self, usage: Usage, cycles: int = 0, tool_calls: int = 0) -> None:
        """Count usage that is not a cycle's: a final answer's, or a child run's.

        A final answer's usage that reports no cost is costed at the price; a child
        run's (``cycles`` > 0) counts as its own run reported it, and so do its cycles
        and tool calls, against ``max_cycles`` and ``max_tool_calls``.
        """
        if not cycles:
            usage = priced(usage, self.price)
        tally = self.tally
        tally.usage = tally.usage + usage
        self.state.child_cycles += cycles
        self.state.tool_calls += tool_calls

    # -- before a request ---------------------------------------------------------------

    def _text_size(self, pending_chars: int) -> int:
        """The next request's input as the text shows it: the last, its reply, what came since."""
        last = self.last
        return last.input_tokens + last.output_tokens + _tokens(pending_chars)

    def _request_size(self, pending_chars: int) -> int:
        """Estimated input tokens of the next request.

        The text's estimate, and what the provider counted beyond the text's estimate of
        the latest request.
        """
        return self._text_size(pending_chars) + self._unseen

    def _final_tokens(
        self, size: int, reply: int, pending_chars: int, after_cycles: bool = False
    ) -> int:
        """Tokens kept for the answer after a stop: its request, then the answer.

        Nothing before the first request (there is nothing to answer from yet), unless
        the cycles looked ahead come first (``after_cycles``).
        """
        if not self.final_answer or not (self.tally.cycles or after_cycles):
            return 0
        return size + reply + _tokens(pending_chars) + FINAL_PROMPT_TOKENS + self._answer_room()

    def _answer_room(self) -> int:
        """Output tokens kept for the answer after a stop, sized from the run's replies.

        `ANSWER_ROOM_FACTOR` times the longest reply so far, at least
        `MIN_FINAL_ANSWER_TOKENS`, at most `FINAL_ANSWER_TOKENS` and a tenth of a token
        budget; before any reply, the most. The answer may use more when more is left.
        """
        longest = self.state.longest_reply
        room = (
            FINAL_ANSWER_TOKENS
            if not longest
            else min(
                max(ANSWER_ROOM_FACTOR * longest, MIN_FINAL_ANSWER_TOKENS), FINAL_ANSWER_TOKENS
            )
        )
        budget = self._limits.max_total_tokens
        return room if budget is None else min(room, budget // 10)

    def _reply_tokens(self) -> int:
        """Output tokens one more cycle is taken to need: the last reply's, at least a few."""
        return max(self.last.output_tokens, MIN_REPLY_TOKENS)

    def _final_seconds(self) -> float:
        maximum = self._limits.max_seconds
        if not self.final_answer or maximum is None:
            return 0.0
        share = FINAL_TIME_SHARE * maximum
        longest = self.state.longest_request
        # before any request has come back, how long one takes is unknown: keep the share
        return min(longest, share) if longest else share

    def limit(self, pending_chars: int = 0, *, ahead: int = 1) -> LimitReached | None:
        """The budget that forbids another model request, if any.

        Room is kept for the request (its input, a reply like the last) and, with a
        final answer, for that answer; ``ahead`` counts more cycles (the note looks one
        cycle further). Each cycle after the next is taken to grow the conversation as
        much as the last one did (its reply, what came after it, and what the provider
        counted beyond the text), so a run whose results are long, or whose requests
        grow for reasons the text does not show, is told early enough.

        Args:
            pending_chars: Characters added to the conversation since the last response
                (with `CHARS_PER_MESSAGE` more for each message).
            ahead: Cycles that must still fit.
        """
        limits = self._limits
        cycles = self.tally.cycles + self.state.child_cycles
        if limits.max_cycles is not None and cycles + ahead - 1 >= limits.max_cycles:
            return LimitReached(limit="max_cycles", used=cycles, maximum=limits.max_cycles)
        usage = self.tally.usage
        tokens, cost = limits.max_total_tokens, limits.max_cost
        if tokens is not None or cost is not None:
            reply = self._reply_tokens()
            growth = reply + _tokens(pending_chars) + self._unseen
            sizes = [self._request_size(pending_chars) + step * growth for step in range(ahead)]
            final = self._final_tokens(sizes[-1], reply, pending_chars, ahead > 1)
            kept_tokens = sum(sizes) + ahead * reply + final
            if tokens is not None and usage.total_tokens + kept_tokens >= tokens:
                return LimitReached(
                    limit="max_total_tokens",
                    used=usage.total_tokens,
                    maximum=tokens,
                    reserved=kept_tokens,
                )
            if cost is not None:
                kept = sum(self._cost(size, reply) for size in sizes)
                kept += self._final_cost(final)
                if usage.cost + kept >= cost:
                    return LimitReached(
                        limit="max_cost", used=usage.cost, maximum=cost, reserved=kept
                    )
        seconds = limits.max_seconds
        if seconds is not None:
            elapsed = self.elapsed()
            kept = self._final_seconds() + (ahead - 1) * self._last_cycle
            if elapsed + kept >= seconds:
                return LimitReached(
                    limit="max_seconds", used=elapsed, maximum=seconds, reserved=kept
                )
        return None

    def _cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of a request of this size, at the price (or the last blended price)."""
        if self.price is not None:
            return self.price.cost(input_tokens, output_tokens)
        return _blended(self.last) * (input_tokens + OUTPUT_PRICE_FACTOR * output_tokens)

    def _final_cost(self, final: int) -> float:
        if not final:
            return 0.0
        answer = self._answer_room()
        return self._cost(final - answer, answer)

    def request_tokens(self, pending_chars: int = 0, wanted: int | None = None) -> int | None:
        """The output cap that keeps the next request within the token and cost budgets.

        None: no cap is needed (no such budget, or what is left is above ``wanted`` and
        `REQUEST_TOKENS_CEILING`).

        Args:
            pending_chars: Characters added to the conversation since the last response.
            wanted: The request's own output setting, if any.
        """
        limits = self._limits
        tokens, cost = limits.max_total_tokens, limits.max_cost
        if tokens is None and cost is None:
            return None
        usage = self.tally.usage
        size = self._request_size(pending_chars)
        room = inf
        if tokens is not None:
            room = tokens - usage.total_tokens - size
        if cost is not None:
            left = cost - usage.cost - self._cost(size, 0)
            per_token = self._cost(size, 1_000_000) - self._cost(size, 0)
            if per_token > 0:
                room = min(room, left * 1_000_000 / per_token)
        ceiling = min(wanted or REQUEST_TOKENS_CEILING, REQUEST_TOKENS_CEILING)
        if room >= ceiling:
            return wanted
        return max(int(room), 1)

    def seconds_left(self) -> float | None:
        """Seconds the next request or batch may take (None: no time budget)."""
        seconds = self._limits.max_seconds
        if seconds is None:
            return None
        return max(seconds - self.elapsed() - self._final_seconds(), 0.0)

    def note(self, pending_chars: int = 0) -> str | None:
        """Once per run, before a budget could stop the run: what is left, for the model.

        It is due when 80 % of a budget (or of a tool's call cap) is used, or when one
        more cycle, grown like the last, would leave no room for the next (so it comes
        before a budget stop whenever a response has come back to foresee it from).
        """
        state, limits = self.state, self._limits
        if state.noted:
            return None
        cycles = self.tally.cycles + state.child_cycles
        if not self._note_due(cycles, pending_chars):
            return None
        usage = self.tally.usage
        elapsed = self.elapsed() if limits.max_seconds is not None else 0.0
        capped = state.calls_by_tool
        parts: list[str] = []
        for used, maximum, unit in (
            (cycles, limits.max_cycles, "cycles"),
            (usage.total_tokens, limits.max_total_tokens, "tokens"),
            (usage.cost, limits.max_cost, "cost"),
            (elapsed, limits.max_seconds, "seconds"),
            (state.tool_calls, limits.max_tool_calls, "tool calls"),
        ):
            if maximum is None or maximum <= 0:
                continue
            left = max(maximum - used, 0)
            shown = f"{left:.4g}" if unit == "cost" else f"{left:.0f}"
            parts.append(f"{shown} of {maximum:g} {unit}")
        for name, used in sorted(capped.items()):
            cap = limits.tool_cap(name)
            if cap is not None and cap > 0:
                parts.append(f"{max(cap - used, 0)} of {cap} calls of {name}")
        if not parts:
            return None
        state.noted = True
        return (
            "Budget note: this run is near the end of its budget. Left: "
            + ", ".join(parts)
            + ". Plan to finish: give your best answer before the budget runs out."
        )

    def _note_due(self, cycles: int, pending_chars: int) -> bool:
        """Whether the note is due (see `note`): a budget 80 % used, or one cycle from its end."""
        limits, state = self._limits, self.state
        maximum = limits.max_cycles
        if _at(cycles, maximum):
            return True
        calls = limits.max_tool_calls
        if (
            calls is None
            and limits.max_calls_per_tool is None
            and limits.max_seconds is None
            and not self.counts_text
        ):
            # only the cycle budget is set: `limit` looking a cycle further is this
            return maximum is not None and cycles + 1 >= maximum
        usage = self.tally.usage
        elapsed = self.elapsed() if limits.max_seconds is not None else 0.0
        return (
            _at(usage.total_tokens, limits.max_total_tokens)
            or _at(usage.cost, limits.max_cost)
            or _at(elapsed, limits.max_seconds)
            or _at(state.tool_calls, calls)
            or (calls is not None and state.tool_calls + self._last_batch >= calls)
            or any(_at(used, limits.tool_cap(name)) for name, used in state.calls_by_tool.items())
            or self.limit(pending_chars, ahead=2) is not None
        )

    # -- tool calls ---------------------------------------------------------------------

    def admit(self, calls: Sequence[ToolCall], skipped: Collection[int] = ()) -> Admission:
        """Count the calls of a batch against the tool-call caps.

        Calls at positions in ``skipped`` do not run and are not counted. A call past a
        cap whose policy is ``continue`` is refused (it does not run, is not counted)
        and the calls after it are still counted; the first call past a cap whose
        policy is ``stop`` ends the admission: it and the calls after it do not run.
        """
        limits, state = self._limits, self.state
        total, per_tool = limits.max_tool_calls, limits.max_calls_per_tool
        if total is None and per_tool is None:
            ran = len(calls)
            if skipped:
                ran = sum(1 for index in range(ran) if index not in skipped)
            self._last_batch = ran
            state.tool_calls += ran
            return NOTHING_REFUSED
        running = [index for index in range(len(calls)) if index not in skipped]
        self._last_batch = len(running)
        counted = state.calls_by_tool
        refused: dict[int, LimitReached] = {}
        for index in running:
            name = calls[index].name
            cap = limits.tool_cap(name)
            reached: LimitReached | None = None
            if total is not None and state.tool_calls >= total:
                reached = LimitReached(limit="max_tool_calls", used=state.tool_calls, maximum=total)
            elif cap is not None and counted.get(name, 0) >= cap:
                used = counted.get(name, 0)
                reached = LimitReached(
                    limit="max_calls_per_tool", used=used, maximum=cap, tool=name
                )
            if reached is not None:
                if limits.cap_policy(reached.limit) == "stop":
                    return Admission(refused, (index, reached))
                refused[index] = reached
                continue
            state.tool_calls += 1
            if cap is not None:
                counted[name] = counted.get(name, 0) + 1
        return Admission(refused, None) if refused else NOTHING_REFUSED

    # -- after a stop -------------------------------------------------------------------

    def final_request_tokens(self, pending_chars: int, wanted: int | None = None) -> int:
        """Output tokens an answer after the stop may have within the budgets (0: none fits).

        Args:
            pending_chars: Characters of the conversation since the last request, the
                final request's own prompt included.
            wanted: The output tokens asked for (default `FINAL_ANSWER_TOKENS`).
        """
        limits, usage = self._limits, self.tally.usage
        room = wanted if wanted is not None else FINAL_ANSWER_TOKENS
        size = self._request_size(pending_chars)
        if limits.max_total_tokens is not None:
            room = min(room, limits.max_total_tokens - usage.total_tokens - size)
        if limits.max_cost is not None:
            left = limits.max_cost - usage.cost - self._cost(size, 0)
            if left < 0:
                return 0
            per_token = self._cost(size, 1_000_000) - self._cost(size, 0)
            if per_token:
                room = min(room, int(left * 1_000_000 / per_token))
            elif self.price is None and usage.cost > 0:
                return 0  # a cost without token counts: the answer's cost cannot be bounded
        return room if room >= MIN_FINAL_ANSWER_TOKENS else 0

    def time_up(self, during: str = "", *, force: bool = False) -> LimitReached | None:
        """``max_seconds`` as a limit reached, once the run's time is up (or ``force``)."""
        maximum, elapsed = self._limits.max_seconds, self.elapsed()
        if maximum is None or (elapsed < maximum and not force):
            return None
        return LimitReached(limit="max_seconds", used=elapsed, maximum=maximum, during=during)

    def final_seconds(self) -> float | None:
        """Seconds the answer after a stop may take (None: no time budget)."""
        seconds = self._limits.max_seconds
        if seconds is None:
            return None
        return max(seconds - self.elapsed(), 0.0)

    def remaining(self) -> Limits:
        """What is left of each budget now (a child run called as a tool gets at most this)."""
        limits, usage = self._limits, self.tally.usage
        return dataclasses.replace(
            limits,
            max_cycles=_left(limits.max_cycles, self.cycles_used()),
            max_total_tokens=_left(limits.max_total_tokens, usage.total_tokens),
            max_seconds=_left(limits.max_seconds, self.elapsed()),
            max_cost=_left(limits.max_cost, usage.cost),
            max_tool_calls=_left(limits.max_tool_calls, self.state.tool_calls),
        )


class _Monitored(Protocol):
    @property
    def budget(self) -> BudgetState: ...


class SpentRun(Protocol):
    """What a stored run has spent, as its resumption's budgets count it (`RunState` is one)."""

    @property
    def run_id(self) -> str:
        """The run."""

    @property
    def cycles(self) -> int:
        """Model requests it made."""

    @property
    def usage(self) -> Usage:
        """Its usage."""

    @property
    def elapsed(self) -> float:
        """Seconds it ran."""

    @property
    def monitor(self) -> _Monitored:
        """Its counters, the budget's among them."""


_BUDGETS = ("max_cycles", "max_total_tokens", "max_seconds", "max_cost", "max_tool_calls")
"""The budgets of `Limits` counted from the run's start (a cap per tool is kept as it is)."""


def budgets_used(state: SpentRun) -> dict[str, Any]:
    """What a run has used of each budget: cycles (its children's too), tokens, time, calls."""
    budget = state.monitor.budget
    return {
        "max_cycles": state.cycles + budget.child_cycles,
        "max_total_tokens": state.usage.total_tokens,
        "max_seconds": state.elapsed,
        "max_cost": state.usage.cost,
        "max_tool_calls": budget.tool_calls,
    }


def renewed(limits: Limits, state: SpentRun) -> Limits:
    """``limits`` with each budget the run has used up granted once more, from where it is.

    A run that stopped ``max_cycles`` after 50 of 50 cycles may go on to 100; a budget
    with room left, or none set, stays as it is.
    """
    used = budgets_used(state)
    more: dict[str, Any] = {}
    for name in _BUDGETS:
        maximum = getattr(limits, name)
        if maximum is not None and maximum > 0 and used[name] >= maximum:
            more[name] = used[name] + maximum
    return dataclasses.replace(limits, **more) if more else limits


def added(limits: Limits, state: SpentRun, more: Mapping[str, Any]) -> Limits:
    """``limits`` with ``more`` of some budgets (by field name) on top of what the run used."""
    used = budgets_used(state)
    return dataclasses.replace(limits, **{name: used[name] + more[name] for name in more})


def check_room(limits: Limits, state: SpentRun) -> None:
    """Refuse budgets that would stop the run before its first request.

    Raises:
        UserError: Naming the budget the run has used up under ``limits``.
    """
    used = budgets_used(state)
    for name in _BUDGETS:
        maximum = getattr(limits, name)
        if maximum is not None and used[name] >= maximum:
            raise UserError(
                f"run {state.run_id!r} has used {used[name]:g} of {name}={maximum:g}: budgets "
                "count from the run's start, so give a larger one (resume(limits=...); on "
                "the command line --max-* counts from the start, --more-* adds)"
            )


def _left(budget: _N | None, used: _N) -> _N | None:
    return None if budget is None else max(budget - used, 0)


def _at(used: float, maximum: float | None) -> bool:
    """Whether ``used`` reached the note's share of ``maximum``."""
    return maximum is not None and maximum > 0 and used >= BUDGET_NOTE_AT * maximum


def _tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def _blended(last: Usage) -> float:
    """The blended price per token of the last request (0 when unknown)."""
    return last.cost / last.total_tokens if last.total_tokens and last.cost else 0.0


def message_chars(message: Message) -> int:
    """Characters of a message as a model sees it: its text, call arguments and framing."""
    if isinstance(message, AssistantMessage) and message.tool_calls:
        return (
            CHARS_PER_MESSAGE
            + len(message.content)
            + sum(
                CHARS_PER_MESSAGE + len(call.name) + len(str(call.arguments))
                for call in message.tool_calls
            )
        )
    return CHARS_PER_MESSAGE + len(message.content)
