"""`decide`: the one place a stop is chosen, pinned by properties over generated facts."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convergent import stop
from convergent.stop import (
    CONTINUE,
    STOP_PRIORITY,
    Continue,
    Facts,
    HandOff,
    Interrupted,
    LimitReached,
    Nudge,
    Paused,
    RollOver,
    Stall,
    Stop,
    StopReason,
    ToolFailure,
    Unfinished,
    decide,
)

texts = st.sampled_from(["", "why", "disk full"])
limits = st.builds(
    LimitReached,
    limit=st.sampled_from(
        [
            "max_cycles",
            "max_total_tokens",
            "max_seconds",
            "max_cost",
            "max_tool_calls",
            "max_calls_per_tool",
        ]
    ),
    used=st.integers(0, 100),
    maximum=st.integers(0, 100),
    reserved=st.sampled_from([0, 10]),
)
failures = st.builds(
    ToolFailure,
    error=texts,
    fatal=st.booleans(),
    policy=st.booleans(),
    streak=st.integers(0, 5),
    at_limit=st.booleans(),
    nudge=st.booleans(),
    kind=st.sampled_from(["repeated", "steps"]),
    call=st.sampled_from(["", "pay(n=1)"]),
)
stalls = st.builds(
    Stall,
    what=st.just('read(path="a")'),
    times=st.integers(1, 5),
    nudge=st.booleans(),
    kind=st.sampled_from(["repeat", "cycle", "mistakes", "repeated_mistake", "rejected"]),
    write=st.booleans(),
)
facts = st.builds(
    Facts,
    stop_requested=st.booleans(),
    stop_text=texts,
    redirect=st.none() | texts,
    paused=st.booleans(),
    roll_over=st.booleans(),
    limit=st.none() | limits,
    model_error=st.none() | texts,
    answered=st.booleans(),
    verdict=st.none() | st.booleans(),
    feedback=texts,
    output_errors=st.none() | texts,
    handed_off=st.none() | st.builds(HandOff, tool=st.just("transfer"), result=texts),
    tool_failure=st.none() | failures,
    stall=st.none() | stalls,
    needs_user=st.none() | texts,
)


def holds(reason: StopReason, f: Facts) -> bool:
    """When each stop condition holds, written out independently of `decide`."""
    failure, stall, limit = f.tool_failure, f.stall, f.limit
    return {
        StopReason.STOPPED: f.stop_requested,
        StopReason.COMPLETED: f.answered and f.verdict is not False and f.output_errors is None,
        StopReason.HANDED_OFF: f.handed_off is not None,
        StopReason.TOOL_ERROR: failure is not None
        and (failure.fatal or failure.policy or (failure.at_limit and not failure.nudge)),
        StopReason.STALLED: stall is not None and not stall.nudge,
        StopReason.MAX_CYCLES: limit is not None and limit.limit == "max_cycles",
        StopReason.BUDGET_EXHAUSTED: limit is not None and limit.limit != "max_cycles",
        StopReason.MODEL_ERROR: f.model_error is not None,
        StopReason.NEEDS_USER: f.needs_user is not None,
    }[reason]


def rule_of(reason: StopReason, f: Facts) -> str:
    """The rule each stop names, written out independently of `decide`."""
    failure, stall, limit = f.tool_failure, f.stall, f.limit
    match reason:
        case StopReason.TOOL_ERROR:
            assert failure is not None
            if failure.fatal:
                return "fatal"
            if failure.policy:
                return "on_tool_error"
            return "max_repeated_failures" if failure.kind == "repeated" else "max_failing_steps"
        case StopReason.STALLED:
            assert stall is not None
            return {
                "repeat": "max_repeated_calls",
                "cycle": "max_cycle_length",
                "mistakes": "max_mistakes",
                "repeated_mistake": "max_repeated_mistakes",
                "rejected": "max_rejected_answers",
            }[stall.kind]
        case StopReason.MAX_CYCLES | StopReason.BUDGET_EXHAUSTED:
            assert limit is not None
            return limit.limit
        case StopReason.MODEL_ERROR:
            return "model_error" if f.model_error is not None else "max_continuations"
    return {
        StopReason.STOPPED: "stop_requested",
        StopReason.COMPLETED: "answered",
        StopReason.HANDED_OFF: "handed_off",
        StopReason.NEEDS_USER: "needs_user",
    }[reason]


def holding(f: Facts) -> list[StopReason]:
    return [reason for reason in STOP_PRIORITY if holds(reason, f)]


def nudgeable(f: Facts) -> list[StopReason]:
    """The stops a nudge stands in for: they would hold without the nudge."""
    found = []
    failure = f.tool_failure
    if failure is not None and failure.at_limit and failure.nudge:
        if not (failure.fatal or failure.policy):
            found.append(StopReason.TOOL_ERROR)
    if f.stall is not None and f.stall.nudge:
        found.append(StopReason.STALLED)
    return found


def a_stop_is_the_first_reason_of_the_priority_order_that_holds(f: Facts) -> None:
    decision = decide(f)
    reasons = holding(f)
    interrupted = f.roll_over or f.redirect is not None
    if reasons and (reasons[0] is StopReason.STOPPED or not interrupted):
        assert isinstance(decision, Stop)
        assert decision.reason is reasons[0]
        assert decision.rule == rule_of(reasons[0], f)
    else:
        assert not isinstance(decision, Stop)


def a_stop_request_beats_everything_and_roll_over_or_messages_beat_other_stops(f: Facts) -> None:
    decision = decide(f)
    if f.stop_requested:
        assert decision == Stop(
            StopReason.STOPPED, f.stop_text or "stop requested", rule="stop_requested"
        )
    elif f.roll_over:
        assert isinstance(decision, RollOver)
    elif f.redirect is not None:
        assert decision == Interrupted(f.redirect)


def a_nudge_replaces_only_a_stall_or_tool_error_stop_with_a_nudge_left(f: Facts) -> None:
    decision = decide(f)
    if not isinstance(decision, Nudge):
        return
    assert decision.reason in nudgeable(f)
    assert not holding(f) and not f.roll_over and f.redirect is None
    # a rejected answer is answered before a pause, and the nudge goes with that answer
    rejected = f.answered and (f.output_errors is not None or f.verdict is False)
    assert not f.paused or (rejected and f.unfinished is None)
    # the same facts without the nudge stop the run for that reason
    if decision.reason is StopReason.TOOL_ERROR:
        assert f.tool_failure is not None
        spent = dataclasses.replace(
            f, tool_failure=dataclasses.replace(f.tool_failure, nudge=False)
        )
    else:
        assert f.stall is not None
        spent = dataclasses.replace(f, stall=dataclasses.replace(f.stall, nudge=False))
    stopped = decide(spent)
    assert isinstance(stopped, Stop) and stopped.reason is decision.reason
    assert stopped.rule == rule_of(decision.reason, spent)


def continue_only_when_nothing_holds(f: Facts) -> None:
    quiet = not (
        holding(f)
        or f.roll_over
        or f.redirect is not None
        or (f.answered and (f.verdict is False or f.output_errors is not None))
        or f.paused
        or nudgeable(f)
    )
    assert (decide(f) == CONTINUE) is quiet


def decide_is_deterministic(f: Facts) -> None:
    again = dataclasses.replace(f)
    assert again is not f
    assert decide(f) == decide(again) == decide(f)


PROPERTIES = (
    a_stop_is_the_first_reason_of_the_priority_order_that_holds,
    a_stop_request_beats_everything_and_roll_over_or_messages_beat_other_stops,
    a_nudge_replaces_only_a_stall_or_tool_error_stop_with_a_nudge_left,
    continue_only_when_nothing_holds,
    decide_is_deterministic,
)
"""What `decide` keeps for any facts; one test checks them all on the same facts, since
drawing the facts costs far more than checking them."""


@settings(max_examples=400, deadline=None)
@given(facts)
def test_decide_keeps_every_property_on_generated_facts(f: Facts) -> None:
    for check in PROPERTIES:
        check(f)


def test_nothing_known_is_continue() -> None:
    assert decide(Facts()) == Continue()
    assert decide(stop.NO_FACTS) is CONTINUE


def test_decide_follows_stop_priority_as_it_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    both = Facts(
        stall=Stall(what="x()", times=3),
        limit=LimitReached(limit="max_cycles", used=5, maximum=5),
    )
    assert decide(both).reason is StopReason.STALLED  # type: ignore[union-attr]
    monkeypatch.setattr(stop, "STOP_PRIORITY", tuple(reversed(STOP_PRIORITY)))
    assert decide(both).reason is StopReason.MAX_CYCLES  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("f", "expected"),
    [
        (
            Facts(stop_requested=True),
            Stop(StopReason.STOPPED, "stop requested", rule="stop_requested"),
        ),
        (
            Facts(stop_requested=True, stop_text="user pressed stop", redirect="more"),
            Stop(StopReason.STOPPED, "user pressed stop", rule="stop_requested"),
        ),
        (
            Facts(answered=True),
            Stop(StopReason.COMPLETED, "the model answered without tool calls", rule="answered"),
        ),
        (
            Facts(answered=True, verdict=True),
            Stop(
                StopReason.COMPLETED,
                "answered without tool calls; verifier passed",
                rule="answered",
            ),
        ),
        (
            Facts(answered=True, verdict=False, feedback="expected 42"),
            Interrupted("Verification failed: expected 42. Continue working on the task."),
        ),
        (
            Facts(answered=True, output_errors="total: Field required", verdict=False),
            Interrupted(stop.OUTPUT_FEEDBACK.format(errors="total: Field required")),
        ),
        (
            Facts(handed_off=HandOff(tool="transfer", result="sent to Ann")),
            Stop(
                StopReason.HANDED_OFF,
                "transfer handed the run off: sent to Ann",
                "sent to Ann",
                rule="handed_off",
            ),
        ),
        (
            Facts(tool_failure=ToolFailure(error="pay failed: revoked", fatal=True)),
            Stop(StopReason.TOOL_ERROR, "pay failed: revoked", rule="fatal"),
        ),
        (
            Facts(
                tool_failure=ToolFailure(error="e", streak=4, at_limit=True, call="f(x=1)", times=3)
            ),
            Stop(
                StopReason.TOOL_ERROR,
                "f(x=1) failed 3 times in 4 failing steps in a row; the last error: e",
                rule="max_repeated_failures",
            ),
        ),
        (
            Facts(stall=Stall(what='read(path="a")', times=4)),
            Stop(
                StopReason.STALLED,
                'read(path="a") was requested 4 times with the same result and nothing '
                "changed in between",
                rule="max_repeated_calls",
            ),
        ),
        (
            Facts(limit=LimitReached(limit="max_cycles", used=4, maximum=4)),
            Stop(StopReason.MAX_CYCLES, "reached max_cycles=4", rule="max_cycles"),
        ),
        (
            Facts(limit=LimitReached(limit="max_total_tokens", used=700, maximum=1000)),
            Stop(
                StopReason.BUDGET_EXHAUSTED,
                "used 700 tokens of max_total_tokens=1000",
                rule="max_total_tokens",
            ),
        ),
        (
            Facts(
                limit=LimitReached(limit="max_total_tokens", used=600, maximum=1000, reserved=450)
            ),
            Stop(
                StopReason.BUDGET_EXHAUSTED,
                "used 600 tokens of max_total_tokens=1000 (450 tokens kept for the next "
                "request and the final answer)",
                rule="max_total_tokens",
            ),
        ),
        (
            Facts(limit=LimitReached(limit="max_cost", used=1.2, maximum=1.0)),
            Stop(StopReason.BUDGET_EXHAUSTED, "cost 1.2000 reached max_cost=1.0", rule="max_cost"),
        ),
        (
            Facts(model_error="HTTP 503"),
            Stop(StopReason.MODEL_ERROR, "HTTP 503", rule="model_error"),
        ),
        (
            Facts(needs_user="Which file?"),
            Stop(StopReason.NEEDS_USER, "Which file?", rule="needs_user"),
        ),
        (
            Facts(tool_failure=ToolFailure(error="e", streak=12, at_limit=True, kind="steps")),
            Stop(
                StopReason.TOOL_ERROR,
                "tool calls failed in 12 steps in a row; the last: e",
                rule="max_failing_steps",
            ),
        ),
        (
            Facts(tool_failure=ToolFailure(error="declined", policy=True)),
            Stop(StopReason.TOOL_ERROR, "declined", rule="on_tool_error"),
        ),
        (
            Facts(stall=Stall(what="f(x=1)", times=4, kind="repeated_mistake")),
            Stop(
                StopReason.STALLED,
                "the model made f(x=1), a call the run cannot make, 4 times in one streak of "
                "mistakes",
                rule="max_repeated_mistakes",
            ),
        ),
        (
            Facts(limit=LimitReached(limit="max_tool_calls", used=20, maximum=20)),
            Stop(
                StopReason.BUDGET_EXHAUSTED,
                "made 20 tool calls of max_tool_calls=20",
                rule="max_tool_calls",
            ),
        ),
        (
            Facts(answered=True, unfinished=Unfinished(kind="empty", times=3, left=False)),
            Stop(
                StopReason.MODEL_ERROR,
                "the model's reply was empty 3 times in a row",
                rule="max_continuations",
            ),
        ),
        (Facts(paused=True, roll_over=True), RollOver()),
        (Facts(paused=True, redirect="new plan"), Interrupted("new plan")),
        (Facts(paused=True), Paused()),
        (
            Facts(paused=True, answered=True, verdict=False, feedback="expected 42"),
            Interrupted("Verification failed: expected 42. Continue working on the task."),
        ),
    ],
)
def test_each_decision_and_its_words(f: Facts, expected: object) -> None:
    assert decide(f) == expected


def test_a_rejected_answer_is_answered_before_a_pause_with_the_stall_note_beside() -> None:
    stall = Stall(what='read(path="a")', times=1, nudge=True)
    rejected = Facts(paused=True, answered=True, output_errors="total: missing", stall=stall)
    told = decide(rejected)
    assert isinstance(told, Nudge) and told.reason is StopReason.STALLED
    assert told.note.startswith(stop.OUTPUT_FEEDBACK.format(errors="total: missing"))
    assert 'read(path="a")' in told.note
    assert decide(dataclasses.replace(rejected, answered=False)) == Paused()


def test_nudge_notes_say_what_repeated_how_often_and_what_to_do() -> None:
    stalled = decide(Facts(stall=Stall(what='read(path="a")', times=3, nudge=True)))
    assert isinstance(stalled, Nudge) and stalled.reason is StopReason.STALLED
    assert 'read(path="a") 3 times' in stalled.note
    assert "change your approach, or answer" in stalled.note
    failing = decide(
        Facts(tool_failure=ToolFailure(error="db down", streak=3, at_limit=True, nudge=True))
    )
    assert isinstance(failing, Nudge) and failing.reason is StopReason.TOOL_ERROR
    assert "3 steps in a row" in failing.note and "db down" in failing.note
    # a fatal failure or the stop policy is never nudged
    fatal = ToolFailure(error="x", fatal=True, streak=3, at_limit=True, nudge=True)
    assert isinstance(decide(Facts(tool_failure=fatal)), Stop)


def test_notes_must_not_be_negative() -> None:
    from convergent import StopPolicy, UserError

    with pytest.raises(UserError, match="notes"):
        StopPolicy(notes=-1)


_SCALAR = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)


@given(
    name=st.text(max_size=8),
    arguments=st.dictionaries(st.text(max_size=6), _SCALAR | st.lists(_SCALAR), max_size=4),
)
def test_a_calls_key_is_its_name_and_the_repr_of_its_sorted_scalar_arguments(
    name: str, arguments: dict[str, object]
) -> None:
    """The key stored runs' counters were keyed by (their digests too): it never changes."""
    key = stop.canonical_call_key(name, arguments)
    items = sorted(arguments.items())
    if all(type(value) is not list for _, value in items):
        assert key == f"{name}\x00{items!r}"
    else:
        assert key.startswith(name + "\x01")
    assert stop.canonical_call_key(name, dict(reversed(arguments.items()))) == key
