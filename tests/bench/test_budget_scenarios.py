"""Budgets a task needs more of than it has: cost, and tool-call caps, as scenarios."""

from __future__ import annotations

import pytest

from convergent.bench._budget_scenarios import MAX_COST

from .scenario_runs import outcomes, run_all, tasks


@pytest.mark.parametrize("scenario", ["cost_limit", "cost_limit_no_final_answer"])
def test_a_cost_budget_is_never_spent_past(scenario: str) -> None:
    built = tasks(scenario)
    library = run_all(built, "objective")
    assert {run.stop for run in library} == {"budget_exhausted"}
    assert max(run.cost for run in library) <= MAX_COST
    with_answer = scenario == "cost_limit"
    assert [run.answer_after_stop for run in library] == [with_answer] * 10
    # the whole task costs more than the budget: the model stops where counting overspends
    counting = run_all(built, "counting")
    assert max(run.cost for run in counting) > MAX_COST
    assert all(run.false_negative for run in counting)


def test_without_the_final_answer_the_note_comes_before_the_cost_stop() -> None:
    library = outcomes("cost_limit_no_final_answer", "objective", 5)
    assert all(run.correct and run.budget_notes == 1 for run in library)


def test_with_the_final_answer_the_note_comes_before_the_cost_stop() -> None:
    library = outcomes("cost_limit", "objective")
    assert [run.budget_notes for run in library] == [1] * 10
    assert all(run.correct for run in library)


def test_the_total_cap_on_tool_calls_holds_with_the_note_before_and_the_answer_after() -> None:
    built = tasks("max_tool_calls")
    library = run_all(built, "objective")
    for task, run in zip(built, library, strict=True):
        assert task.max_tool_calls is not None
        assert run.tool_calls == task.max_tool_calls  # every call up to the cap ran
        assert (run.stop, run.budget_notes, run.answer_after_stop) == ("budget_exhausted", 1, True)
        assert run.correct
    counting = run_all(built, "counting")
    assert all(run.false_negative and run.stop == "completed" for run in counting)


def test_the_cap_on_one_tools_calls_holds_and_the_answer_comes_after() -> None:
    library = outcomes("max_calls_per_tool", "objective")
    assert {(run.stop, run.cycles, run.tool_calls) for run in library} == {
        ("budget_exhausted", 4, 3)
    }
    assert all(run.answer_after_stop and not run.false_negative for run in library)


def test_the_note_comes_before_a_cap_on_one_tools_calls() -> None:
    library = outcomes("max_calls_per_tool", "objective")
    assert [run.budget_notes for run in library] == [1] * 10
    assert all(run.correct for run in library)


def test_the_note_comes_before_a_budget_the_provider_counts_faster_than_the_text() -> None:
    library = outcomes("provider_growth", "objective", 5)
    assert all(run.correct and run.budget_notes == 1 for run in library)
    assert max(run.tokens for run in library) <= 80_000


def test_a_cap_that_continues_refuses_its_calls_and_the_run_answers() -> None:
    library = outcomes("caps_continue", "objective")
    assert all(run.correct and run.stop == "completed" for run in library)
    # two weather calls, the order and the rate: the weather calls past the cap never ran
    assert {run.tool_calls for run in library} == {4}
