"""The convergence suite: ground truth, the policies, and what the numbers must show."""

from __future__ import annotations

from collections import Counter

import pytest

from convergent.bench._baselines import RunEnd
from convergent.bench._world import World, dependent_plan, independent_plan
from convergent.bench.convergence import (
    SCENARIOS,
    Task,
    build_tasks,
    judge,
    run_convergence_async,
    run_task,
    subjective_converged,
)
from convergent.bench.report import SuiteResult
from convergent.stop import StopReason

STRUCTURAL = [s.name for s in SCENARIOS if s.kind in ("behaviour", "adversarial")]
ADVERSARIAL = [s.name for s in SCENARIOS if s.kind == "adversarial"]


@pytest.fixture(scope="module")
def suite() -> SuiteResult:
    import asyncio

    result, _ = asyncio.run(run_convergence_async(seed=0, per_scenario=10))
    return result


def test_at_least_100_tasks_over_every_scenario() -> None:
    tasks = build_tasks(seed=0)
    assert len(tasks) >= 100
    per_scenario = Counter(task.scenario for task in tasks)
    assert set(per_scenario) == {s.name for s in SCENARIOS}
    assert len({task.id for task in tasks}) == len(tasks)


def test_generation_is_seeded() -> None:
    assert build_tasks(seed=3) == build_tasks(seed=3)
    assert build_tasks(seed=3) != build_tasks(seed=4)


def test_ground_truth_is_consistent_with_the_scripts() -> None:
    for task in build_tasks(seed=0):
        calls = sum(len(item.get("tool_calls", [])) for item in task.script)
        if task.expected_stop in (StopReason.COMPLETED, StopReason.BUDGET_EXHAUSTED):
            assert task.done_cycle == len(task.script), task.id
            assert "tool_calls" not in task.script[-1], task.id
        else:
            assert task.done_cycle <= len(task.script), task.id
        if task.scenario in ("done_early", "no_tools"):
            assert task.needed == () and calls == 0
        else:
            assert task.needed, task.id


def test_sequential_tasks_need_one_to_six_calls() -> None:
    tasks = [t for t in build_tasks(seed=0, per_scenario=30) if t.scenario == "sequential"]
    counts = {sum(len(i.get("tool_calls", [])) for i in t.script) for t in tasks}
    assert min(counts) == 1 and max(counts) == 6


def test_parallel_batches_hold_several_calls() -> None:
    tasks = [t for t in build_tasks(seed=0) if t.scenario == "parallel_batch"]
    assert any(len(item.get("tool_calls", [])) >= 2 for t in tasks for item in t.script)


def test_plans_have_the_requested_number_of_calls() -> None:
    import random

    rng = random.Random(1)
    for n in range(1, 7):
        assert len(dependent_plan(rng, n).calls) == n
        plan = independent_plan(rng, n, 1)
        assert len(plan.batches) == 1 and len(plan.calls) == n


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"action": "finish"}, "finish"),
        ({"confidence": 0.7}, "confidence"),
        ({"confidence": 0.95, "action": "tool_use"}, "confidence"),
        ({"confidence": 0.69}, None),
        ({"action": "done", "confidence": 0.5}, None),
        ({}, None),
    ],
)
def test_subjective_rule_is_seed_000s(metadata: dict[str, object], expected: str | None) -> None:
    assert subjective_converged(metadata) == expected


@pytest.mark.slow
def test_objective_is_exact_on_every_behaviour_and_adversarial_scenario(
    suite: SuiteResult,
) -> None:
    for name in STRUCTURAL:
        stats = suite.breakdown[name]["objective"]
        assert stats.tasks == 10
        assert (stats.false_positives, stats.false_negatives, stats.correct) == (0, 0, 10), name
        verified = suite.breakdown[name]["objective_verified"]
        assert (verified.false_positives, verified.false_negatives) == (0, 0), name


@pytest.mark.slow
def test_subjective_is_measurably_worse_on_every_adversarial_scenario(
    suite: SuiteResult,
) -> None:
    for name in ADVERSARIAL:
        subjective = suite.breakdown[name]["subjective"]
        errors = subjective.false_positive_rate + subjective.false_negative_rate
        assert errors >= 0.9, name
        assert subjective.accuracy <= 0.1, name
    premature = {n: suite.breakdown[n]["subjective"].false_positive_rate for n in ADVERSARIAL}
    looping = {n: suite.breakdown[n]["subjective"].false_negative_rate for n in ADVERSARIAL}
    assert premature["hallucinated_confidence"] == 1.0
    assert premature["finish_with_pending_call"] == 1.0
    assert looping["no_finish_signal"] == 1.0
    assert looping["finish_synonym"] == 1.0


@pytest.mark.slow
def test_overall_rates_beside_each_other(suite: SuiteResult) -> None:
    structural = suite.details["structural"]
    # results compared by meaning: a payment whose receipt is new each time is stopped too
    assert suite.breakdown["repeated_payment_new_ids"]["objective"].false_negatives == 0
    assert structural["objective"]["false_positive_rate"] == 0.0
    assert structural["objective"]["false_negatives"] == 0
    # the rules before progress-aware stopping cut every run of the original progress cases
    for name in ("edit_then_test", "polling", "verify_after_write", "parallel_failures"):
        assert suite.breakdown[name]["counting"].false_positives == 10, name
        assert suite.breakdown[name]["objective"].false_positives == 0, name
    assert structural["counting"]["false_positives"] > structural["objective"]["false_positives"]
    # hallucinated confidence and a finish with a call pending stop the subjective policy
    # early; so does a rejected answer, which it takes as done
    for name in ("hallucinated_confidence", "finish_with_pending_call", "rejected_answers"):
        assert suite.breakdown[name]["subjective"].false_positives == 10, name
    assert structural["subjective"]["false_negative_rate"] > 0.1
    assert suite.policies["subjective"].mean_extra_cycles > 1.0


@pytest.mark.slow
def test_premature_answer_is_caught_only_by_verification(suite: SuiteResult) -> None:
    stats = suite.breakdown["premature_answer"]
    assert stats["objective"].false_positive_rate == 1.0
    assert stats["subjective"].false_positive_rate == 1.0
    assert stats["objective_verified"].accuracy == 1.0


@pytest.mark.parametrize("seed", [1, 2])
async def test_objective_holds_for_other_seeds(seed: int) -> None:
    for task in build_tasks(seed=seed, per_scenario=4, scenarios=STRUCTURAL):
        outcome = await run_task(task, "objective")
        assert outcome.correct, (task.id, outcome)


async def test_tool_failure_stops_at_the_failing_cycle() -> None:
    task = next(t for t in build_tasks(seed=0) if t.scenario == "tool_failure")
    outcome = await run_task(task, "objective")
    assert outcome.stop == "tool_error"
    assert outcome.cycles == task.done_cycle


def _task(done_cycle: int, needed: tuple[str, ...]) -> Task:
    return Task(
        id="t",
        scenario="sequential",
        prompt="p",
        tools=(),
        script=(),
        needed=needed,
        done_cycle=done_cycle,
        expected_stop=StopReason.COMPLETED,
        answer="x",
    )


def test_judge_flags_premature_and_unnecessary_cycles() -> None:
    world = World()
    world.attempts.append("weather:oslo")
    both = ("weather:oslo", "weather:lima")
    early = judge(_task(3, both), "objective", RunEnd("completed", 2), world)
    assert early.false_positive and not early.correct
    late = judge(_task(2, ("weather:oslo",)), "subjective", RunEnd("max_cycles", 20), world)
    assert late.false_negative and late.extra_cycles == 18
    exact = judge(_task(2, ("weather:oslo",)), "objective", RunEnd("completed", 2, "x"), world)
    assert exact.correct and not exact.false_positive and not exact.false_negative
    unanswered = judge(_task(2, ("weather:oslo",)), "objective", RunEnd("completed", 2), world)
    assert not unanswered.correct and not unanswered.answered
    wrong_reason = judge(_task(2, ("weather:oslo",)), "objective", RunEnd("stalled", 2), world)
    assert not wrong_reason.correct


async def test_world_tools_normalise_arguments_and_fail_on_schedule() -> None:
    world = World({"weather:oslo": 1})
    tools = {t.name: t for t in world.tools()}
    with pytest.raises(Exception, match="unavailable"):
        await tools["get_weather"].call({"city": "Oslo"})
    assert await tools["get_weather"].call({"city": "oslo, Norway"}) == "oslo, Norway: 7 °C"
    assert world.attempts == ["weather:oslo", "weather:oslo"]
    assert world.effects == ["weather:oslo"]
    assert world.has_effects(["weather:oslo"]) and not world.has_effects(["weather:lima"])
    assert await tools["calculator"].call({"expression": "250 * 163.3"}) == "40825"
    assert world.missing(["calc:40825", "read:notes.txt"]) == ["read:notes.txt"]
