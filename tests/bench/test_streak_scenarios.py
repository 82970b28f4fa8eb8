"""Streaks of non-progress, recoveries, and replies that are not answers, as scenarios."""

from __future__ import annotations

import pytest

from convergent import StopPolicy

from .scenario_runs import outcomes, run_all, tasks

FAILING = StopPolicy().max_failing_steps or 0
MISTAKES = StopPolicy().max_mistakes or 0
STREAKS = {
    # scenario: (stop, cycle of the stop, words of its detail naming the kind): the note
    # at the streak's threshold, the stop at the next step
    "failing_steps": ("tool_error", FAILING + 1, f"failed in {FAILING + 1} steps in a row;"),
    "unknown_tools": ("stalled", MISTAKES + 1, "calls the run cannot make (tools it does not"),
    "malformed_arguments": (
        "stalled",
        MISTAKES + 1,
        f"calls past a tool-call cap) in {MISTAKES + 1} steps",
    ),
    "rejected_answers": ("stalled", 5, "the answer (the verifier) was rejected 4 times"),
    "schema_never_met": ("stalled", 5, "the answer (the output type) was rejected 4 times"),
}


@pytest.mark.parametrize("scenario", sorted(STREAKS))
def test_each_streak_stops_after_its_note_with_its_own_detail(scenario: str) -> None:
    stop, cycle, words = STREAKS[scenario]
    library = outcomes(scenario, "objective", 5)
    assert {(run.stop, run.cycles, run.nudges) for run in library} == {(stop, cycle, 1)}
    assert all(words in run.detail for run in library), library[0].detail
    assert all(run.correct and run.answer_after_stop for run in library)


def test_failing_steps_are_not_a_repeated_failure() -> None:
    library = outcomes("failing_steps", "objective", 3)
    # a new order id each step is a search: the steps' limit stops it, never the same call
    assert all(run.detail.startswith("tool calls failed in") for run in library)


@pytest.mark.parametrize("scenario", ["garbled_tool_names", "same_error_new_arguments"])
def test_a_streak_that_recovers_is_not_cut(scenario: str) -> None:
    library = outcomes(scenario, "objective")
    assert all(run.correct and run.answered for run in library), library
    # the garbled calls reach the mistake streak's threshold: a note, never a stop
    notes = 1 if scenario == "garbled_tool_names" else 0
    assert [run.nudges for run in library] == [notes] * 10
    counting = outcomes(scenario, "counting")
    assert all(run.false_positive for run in counting)


@pytest.mark.parametrize("scenario", ["empty_reply", "cut_reply"])
def test_a_reply_that_is_not_an_answer_is_continued(scenario: str) -> None:
    built = tasks(scenario)
    library = run_all(built, "objective")
    assert all(run.correct and run.answered for run in library), library
    assert [run.cycles for run in library] == [task.done_cycle for task in built]
    counting = run_all(built, "counting")
    assert all(run.false_positive and run.stop == "completed" for run in counting)


def test_a_cut_answer_is_the_parts_joined() -> None:
    for task in tasks("cut_reply"):
        cut = [item["content"] for item in task.script if item.get("finish_reason") == "length"]
        assert cut and all(task.answer not in part for part in cut), task.id


@pytest.mark.parametrize("scenario", ["empty_forever", "cut_forever"])
def test_a_reply_that_never_becomes_an_answer_stops_model_error(scenario: str) -> None:
    built = tasks(scenario, 5)
    library = run_all(built, "objective")
    assert [(run.stop, run.cycles) for run in library] == [
        ("model_error", task.done_cycle) for task in built
    ]
    assert all(run.correct and not run.answer_after_stop for run in library)
    # a cut reply's parts are the best text the run has (the answer's token spans them)
    assert all(run.answered for run in library) is (scenario == "cut_forever")


def test_the_same_failing_call_gets_one_note_whichever_rule_sees_it() -> None:
    library = outcomes("one_note", "objective", 5)
    assert {(run.stop, run.cycles, run.nudges) for run in library} == {("tool_error", 3, 1)}
    assert all(run.correct for run in library)
