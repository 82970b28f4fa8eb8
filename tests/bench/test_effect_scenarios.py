"""Writes repeated, polls of tools that declare nothing, and waiting between polls."""

from __future__ import annotations

import dataclasses

from .scenario_runs import outcomes, run_all, tasks


def test_a_repeated_write_runs_twice_then_gets_the_note_then_stops() -> None:
    library = outcomes("repeated_writes", "objective", 6)
    assert {(run.stop, run.cycles, run.nudges, run.writes) for run in library} == {
        ("stalled", 4, 1, 2)
    }
    assert all(run.correct and run.answer_after_stop for run in library)
    # a voucher with a new id each time is the same write again
    assert [run.payments for run in library[::3]] == [2, 2]


def test_a_poll_of_a_tool_that_declares_nothing_reaches_its_answer() -> None:
    library = outcomes("undeclared_poll", "objective", 4)
    assert all(run.correct and run.nudges == 0 and run.tool_calls == 4 for run in library)


def test_sleeps_between_polls_let_a_ci_run_finish() -> None:
    library = outcomes("sleep_poll", "objective")
    assert all(run.correct and run.nudges == 0 for run in library)


def test_without_the_wait_between_calls_the_same_polls_stall() -> None:
    built = [
        dataclasses.replace(task, policy={"wait_gap": None}) for task in tasks("sleep_poll", 3)
    ]
    assert {run.stop for run in run_all(built, "objective")} == {"stalled"}
