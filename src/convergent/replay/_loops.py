"""Where a recording objectively repeats itself: the same call, the same result, nothing changed.

A call *repeats unchanged* when an earlier call had the same name and arguments, got the
same result (compared as the stop policy compares them, `same_result`: by their
differences, a time stamp or a request id set aside) or the same failure, and no other
call that may change state ran in between. Calls of tools known to only read, calls
that failed and the model's mistakes do not count as changes, nor does an idempotent
call that got a result it got before (the same call again changes nothing more); any
other call does, and so does a call of a tool that waits (time passed). A call without
a recorded result proves nothing, so it never repeats unchanged. A run of
``threshold`` such calls (the first one and its unchanged repeats) is a *real loop*:
stopping it is right whatever the policy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from convergent.replay._recording import RecordedCall, Turn
from convergent.replay._same import same_result

__all__ = ["Repeat", "longest_repeat"]


@dataclass(frozen=True, slots=True)
class Repeat:
    """The longest unchanged repetition of one call in a stretch of a recording."""

    name: str
    """The repeated tool ("" when nothing repeats)."""
    times: int
    """How often the call was made with the same result while nothing changed."""
    reply: int
    """The reply (0-based, within the turn) where the repetition reached ``times``."""
    key: str = ""
    """The repeated call (`RecordedCall.key`)."""
    start: int = -1
    """The reply (0-based) of the repetition's first call."""


def longest_repeat(
    turn: Turn,
    *,
    replies: int | None = None,
    read_only: Iterable[str],
    waits: Iterable[str] = (),
    idempotent: Iterable[str] = (),
) -> Repeat:
    """The call repeated unchanged most often in a turn (or its first ``replies`` replies)."""
    waiting = frozenset(waits)
    reads = frozenset(read_only) - waiting
    settles = frozenset(idempotent) - waiting
    settled: set[tuple[str, str | None]] = set()
    writes = 0
    seen: dict[str, tuple[int, str | None, bool, int, int]] = {}
    best = Repeat(name="", times=0, reply=-1)
    for index, reply in enumerate(turn[:replies]):
        for call in reply.calls:
            key = call.key
            before = seen.get(key)
            times, start = 1, index
            if before is not None and call.result is not None and call.name not in waiting:
                count, result, failed, writes_after, first = before
                if (
                    writes_after == writes
                    and failed == call.failed
                    and result is not None
                    and same_result(result, call.result)
                ):
                    times, start = count + 1, first
            changed = _may_change(call, reads)
            if changed and call.name in settles:
                # an idempotent call changes something only the first time it gets a result
                changed = (key, call.result) not in settled
                settled.add((key, call.result))
            writes += changed
            seen[key] = (times, call.result, call.failed, writes, start)
            if times > best.times:
                best = Repeat(name=call.name, times=times, reply=index, key=key, start=start)
    return best


def _may_change(call: RecordedCall, reads: frozenset[str]) -> bool:
    """Whether a call may have changed state.

    It may unless it failed, was the model's mistake, or its tool only reads.
    """
    return not call.failed and not call.mistake and call.name not in reads
