"""The stop-rule scenarios: progress must not stop, stuck models must, budgets hold."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import pytest

from convergent import StopPolicy
from convergent.bench._stop_scenarios import STOP_SCENARIOS
from convergent.bench._tasks import FINAL_ANSWER, scripted_model
from convergent.bench.convergence import SCENARIOS, Task, TaskOutcome, build_tasks, run_task
from convergent.messages import ToolSpec, UserMessage
from convergent.stop import StopReason

from .scenario_runs import outcomes

PROGRESS = [s.name for s in STOP_SCENARIOS if s.kind == "progress"]
CAUGHT = ["abab_loop", "repeated_payment", "broken_tool"]
RULES = [s.name for s in SCENARIOS if s.kind in ("progress", "stuck", "budget")]


def stops(runs: Sequence[TaskOutcome]) -> set[str]:
    return {run.stop for run in runs}


@pytest.mark.parametrize("scenario", PROGRESS)
def test_progress_is_never_stopped_by_the_library_and_always_by_counting(scenario: str) -> None:
    library = outcomes(scenario, "objective")
    assert all(run.correct for run in library), library
    assert stops(library) == {"completed"}
    counting = outcomes(scenario, "counting")
    assert all(run.false_positive for run in counting), counting
    expected = "tool_error" if scenario == "parallel_failures" else "stalled"
    assert stops(counting) == {expected}


def test_the_third_identical_read_gets_a_note_and_the_answer_still_comes() -> None:
    runs = outcomes("answer_after_third_read", "objective")
    assert [(run.stop, run.cycles, run.nudges) for run in runs] == [("completed", 4, 1)] * 10


@pytest.mark.parametrize("scenario", CAUGHT)
def test_a_stuck_model_is_stopped_one_cycle_after_its_note(scenario: str) -> None:
    expected = "tool_error" if scenario == "broken_tool" else "stalled"
    # the stop comes one cycle after the note; the note comes at the counting policy's stop
    # for a read cycle and for a payment (a write's repeat is judged before it runs); a
    # tool failing whatever the arguments (five spellings in turn) gets it when one of
    # them fails for the max_repeated_failures-th time
    repeated = StopPolicy().max_repeated_failures or 0
    extra = {"abab_loop": 1, "repeated_payment": 1, "broken_tool": 5 * (repeated - 1) - 1}
    extra = extra[scenario]
    library = outcomes(scenario, "objective")
    assert {(run.stop, run.extra_cycles, run.nudges) for run in library} == {(expected, extra, 1)}
    assert all(run.answer_after_stop for run in library)
    counting = outcomes(scenario, "counting")
    assert {(run.stop, run.extra_cycles, run.answer_after_stop) for run in counting} == {
        (expected, 0, False)
    }


def test_the_same_payment_is_sent_at_most_twice() -> None:
    assert [run.payments for run in outcomes("repeated_payment", "objective", 3)] == [2, 2, 2]
    assert [run.payments for run in outcomes("repeated_payment", "counting", 3)] == [2, 2, 2]


def test_a_payment_with_a_new_receipt_each_time_is_stopped_too() -> None:
    library = outcomes("repeated_payment_new_ids", "objective", 2)
    assert [(run.stop, run.correct, run.payments) for run in library] == [("stalled", True, 2)] * 2
    counting = outcomes("repeated_payment_new_ids", "counting", 2)
    assert [(run.stop, run.correct, run.payments) for run in counting] == [("stalled", True, 2)] * 2


def test_a_wait_between_polls_always_runs_and_the_run_completes() -> None:
    runs = outcomes("polling_with_wait", "objective")
    assert all(run.correct for run in runs)
    tasks = build_tasks(seed=0, per_scenario=10, scenarios=["polling_with_wait"])
    waits = [sum(item["tool_calls"][0]["name"] == "wait" for item in t.script[:-1]) for t in tasks]
    assert min(waits) >= 3  # enough waits that counting them would have nudged
    # each poll's new status shows the world moved, so no wait is replaced by a note
    assert [run.nudges for run in runs] == [0] * len(runs)


def test_the_budget_holds_and_the_library_still_answers() -> None:
    tasks = build_tasks(seed=0, per_scenario=10, scenarios=["hits_budget"])
    library = outcomes("hits_budget", "objective")
    counting = outcomes("hits_budget", "counting")
    for task, mine, theirs in zip(tasks, library, counting, strict=True):
        assert task.max_total_tokens is not None
        assert (mine.stop, mine.answer_after_stop) == ("budget_exhausted", True)
        assert mine.tokens <= task.max_total_tokens and not mine.false_negative
        assert theirs.stop == "budget_exhausted" and not theirs.answer_after_stop
        assert theirs.tokens > task.max_total_tokens and theirs.false_negative


def test_the_model_is_told_its_token_budget_before_it_stops_the_run() -> None:
    library = outcomes("hits_budget", "objective")
    assert [run.budget_notes for run in library] == [1] * 10
    assert all(run.correct for run in library)


def test_a_budget_task_cannot_be_finished_within_its_budget() -> None:
    for task in build_tasks(seed=0, per_scenario=10, scenarios=["hits_budget"]):
        unlimited = replace(task, max_total_tokens=None, scenario="sequential")
        outcome = asyncio.run(run_task(unlimited, "objective"))
        assert outcome.stop == "completed"
        assert task.max_total_tokens is not None and outcome.tokens > task.max_total_tokens


async def test_the_scripted_model_answers_a_request_without_tools_and_keeps_its_place() -> None:
    task = build_tasks(seed=0, per_scenario=1, scenarios=["abab_loop"])[0]
    model = scripted_model(task)
    spec = ToolSpec(name="x", description="x", parameters={"type": "object"})
    first = await model.request([UserMessage(content=task.prompt)], [spec])
    final = await model.request([UserMessage(content=task.prompt)], [])
    second = await model.request([UserMessage(content=task.prompt)], [spec])
    assert final.content == FINAL_ANSWER and not final.tool_calls
    assert first.tool_calls[0].name == task.script[0]["tool_calls"][0]["name"]
    assert second.tool_calls[0].name == task.script[1]["tool_calls"][0]["name"]
    assert first.usage.input_tokens > 200 and first.usage.output_tokens > 0


def _closing_text(task: Task) -> str:
    """The text of the replies after the last tool call, joined (a cut answer's parts)."""
    last_call = max(i for i, item in enumerate(task.script) if item.get("tool_calls"))
    return "".join(str(item["content"]) for item in task.script[last_call + 1 :])


def test_every_stop_rule_scenario_says_what_it_expects() -> None:
    stuck = (StopReason.STALLED, StopReason.TOOL_ERROR, StopReason.MODEL_ERROR)
    for task in build_tasks(seed=0, per_scenario=3, scenarios=RULES):
        kind = next(s.kind for s in SCENARIOS if s.name == task.scenario)
        if kind == "progress":
            assert task.expected_stop is StopReason.COMPLETED, task.id
            assert task.answer in _closing_text(task), task.id
        elif kind == "stuck":
            assert task.expected_stop in stuck, task.id
            assert task.done_cycle < len(task.script), task.id
        else:
            assert task.expected_stop is StopReason.BUDGET_EXHAUSTED, task.id
