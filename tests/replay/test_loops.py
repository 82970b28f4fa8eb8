"""The real-loop classifier: the same call, the same result, nothing changed in between."""

from __future__ import annotations

from typing import Any

from convergent.replay import RecordedCall, RecordedReply
from convergent.replay._loops import longest_repeat
from convergent.replay._recording import Turn

READS = frozenset({"get", "think"})


def call(name: str, result: str | None, failed: bool = False, **arguments: Any) -> RecordedCall:
    return RecordedCall(name, arguments, result, failed)


def turn(*calls: RecordedCall) -> Turn:
    return tuple(RecordedReply("", (item,)) for item in calls)


def test_the_same_read_with_the_same_result_is_a_loop() -> None:
    repeat = longest_repeat(turn(*[call("get", "A", id=1)] * 4), read_only=READS)
    assert (repeat.name, repeat.times, repeat.reply) == ("get", 4, 3)


def test_a_changing_result_is_progress() -> None:
    polls = turn(
        call("get", "running", id=1), call("get", "running 50%", id=1), call("get", "done", id=1)
    )
    assert longest_repeat(polls, read_only=READS).times == 1


def test_argument_order_does_not_matter_but_values_do() -> None:
    same = turn(
        RecordedCall("get", {"a": 1, "b": 2}, "A", False),
        RecordedCall("get", {"b": 2, "a": 1}, "A", False),
        RecordedCall("get", {"a": 1, "b": 3}, "A", False),
    )
    assert longest_repeat(same, read_only=READS).times == 2


def test_a_write_in_between_resets_the_count() -> None:
    verify = turn(
        call("get", "files: a b", path="/"),
        call("delete", "ok", path="/a"),
        call("get", "files: a b", path="/"),
        call("get", "files: a b", path="/"),
    )
    assert longest_repeat(verify, read_only=READS).times == 2


def test_a_failed_write_changes_nothing() -> None:
    retry = turn(
        call("book", "Error: no seats", failed=True, flight="F1"),
        call("think", "", thought="try again"),
        call("book", "Error: no seats", failed=True, flight="F1"),
        call("book", "Error: no seats", failed=True, flight="F1"),
    )
    repeat = longest_repeat(retry, read_only=READS)
    assert (repeat.name, repeat.times) == ("book", 3)


def test_the_same_write_repeated_with_the_same_result_is_a_loop() -> None:
    payments = turn(*[call("pay", "sent", amount=15)] * 3)
    assert longest_repeat(payments, read_only=READS).times == 3


def test_a_tool_not_known_to_read_counts_as_a_change() -> None:
    unknown = turn(
        call("get", "A", id=1),
        call("refresh", "ok"),
        call("get", "A", id=1),
        call("get", "A", id=1),
    )
    assert longest_repeat(unknown, read_only=READS).times == 2
    assert longest_repeat(unknown, read_only=READS | {"refresh"}).times == 3


def test_only_the_replies_asked_for_are_looked_at() -> None:
    reads = turn(*[call("get", "A", id=1)] * 5)
    assert longest_repeat(reads, replies=2, read_only=READS).times == 2


def test_calls_without_recorded_results_prove_no_loop() -> None:
    blind = turn(*[call("get", None, id=1)] * 4)
    assert longest_repeat(blind, read_only=READS).times == 1
