"""Repeats judged by meaning, time, cycles, declarations and messages, as scenarios."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from convergent.bench._world import EXPORTS, World

from .scenario_runs import outcomes, run_all, tasks

SLOW_POLLS = ["slow_poll", "slow_poll_unannotated", "slow_poll_with_wait"]


@pytest.mark.parametrize("scenario", ["timestamped_status", "current_time_loop"])
def test_a_result_that_differs_only_in_its_time_is_a_repeat(scenario: str) -> None:
    library = outcomes(scenario, "objective", 5)
    # the note at the third call (the done cycle), the stop at the fourth
    assert {(run.stop, run.cycles, run.nudges) for run in library} == {("stalled", 4, 1)}
    assert all(run.correct and run.answer_after_stop for run in library)
    assert all("with the same result" in run.detail for run in library)


def test_the_timestamped_results_differ_byte_for_byte() -> None:
    task = tasks("timestamped_status", 1)[0]
    world = World()
    status = world.tools(["service_status"])[0]
    arguments = task.script[0]["tool_calls"][0]["arguments"]

    async def twice() -> list[str]:
        first = await status.call(arguments)
        world.clock.advance(2)
        return [first, await status.call(arguments)]

    first, second = asyncio.run(twice())
    assert first != second and first.split("(")[0] == second.split("(")[0]


@pytest.mark.parametrize("scenario", SLOW_POLLS)
def test_a_slow_poll_completes_within_its_budget(scenario: str) -> None:
    built = tasks(scenario)
    library = run_all(built, "objective")
    assert all(run.correct for run in library), library
    assert [run.cycles for run in library] == [task.done_cycle for task in built]
    assert [run.nudges for run in library] == [0] * len(built)
    # the same status text four times or more (a repeat without time), then done
    exports = [str(task.script[-2]["tool_calls"][0]["arguments"]["export"]) for task in built]
    assert max(EXPORTS[export] for export in exports) >= 4
    counting = run_all(built, "counting")
    assert all(run.false_positive for run in counting)


def test_instant_polls_of_an_unchanged_status_still_stall() -> None:
    built = [task for task in tasks("slow_poll") if task.done_cycle >= 6]  # 4+ running
    assert built
    instant = [replace(task, tool_seconds={}) for task in built]
    runs = run_all(instant, "objective")
    assert {(run.stop, run.cycles, run.nudges) for run in runs} == {("stalled", 4, 1)}


@pytest.mark.parametrize("period", [2, 3, 4, 5])
def test_a_cycle_stops_at_the_call_after_its_note(period: int) -> None:
    library = outcomes(f"cycle_of_{period}", "objective", 4)
    # the note at the first call of the third repetition, the stop at the next call
    assert {(run.stop, run.cycles, run.nudges) for run in library} == {
        ("stalled", 2 * period + 2, 1)
    }
    counting = outcomes(f"cycle_of_{period}", "counting", 4)
    assert {(run.stop, run.cycles) for run in counting} == {("stalled", 2 * period + 1)}


def test_moving_up_two_folders_is_not_a_loop() -> None:
    library = outcomes("cd_up_twice", "objective")
    assert all(run.correct and run.nudges == 0 for run in library)
    assert all(run.tool_calls == 4 for run in library)  # cd, cd .. twice, ls


def test_the_task_sent_again_after_every_step_does_not_hide_a_loop() -> None:
    library = outcomes("repeated_user_prompt", "objective", 5)
    assert {(run.stop, run.cycles, run.nudges, run.payments) for run in library} == {
        ("stalled", 4, 1, 2)
    }


def test_a_message_with_something_new_each_time_restarts_the_counts() -> None:
    built = tasks("repeated_user_prompt", 2)
    numbered = [
        replace(task, messages=tuple(f"{m} Reminder {n + 1}." for n, m in enumerate(task.messages)))
        for task in built
    ]
    runs = run_all(numbered, "objective")
    assert {(run.stop, run.payments) for run in runs} == {("max_cycles", 20)}


def test_a_new_instruction_restarts_the_counts() -> None:
    built = tasks("new_instruction", 5)
    library = run_all(built, "objective")
    assert all(run.correct and run.nudges == 0 for run in library)
    # without the instruction the fourth identical read is a loop
    silent = run_all([replace(task, messages=()) for task in built], "objective")
    assert {(run.stop, run.cycles, run.false_positive) for run in silent} == {("stalled", 4, True)}
