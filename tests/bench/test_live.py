"""The live suite, driven by scripted models standing in for a real one."""

from __future__ import annotations

from collections.abc import Sequence

from convergent.bench.live import live_tasks, run_live, run_live_task, summarize
from convergent.messages import Message, ModelResponse, ToolCall, ToolSpec
from convergent.models.scripted import ScriptedModel


async def test_a_premature_answer_is_caught_and_recovered() -> None:
    task = next(t for t in live_tasks(seed=0) if t.needed and t.scenario == "parallel_batch")
    calls = [
        {"name": name, "arguments": args}
        for item in task.script
        for name, args in ((c["name"], c["arguments"]) for c in item.get("tool_calls", []))
    ]
    model = ScriptedModel(
        [
            "I think it is probably fine.",
            {"tool_calls": calls},
            task.script[-1]["content"],
        ]
    )
    outcome = await run_live_task(model, task)
    assert outcome.checks == (False, True)
    assert outcome.premature and outcome.verified and not outcome.looped
    assert outcome.cycles == 3


async def test_a_model_that_never_answers_loops() -> None:
    task = next(t for t in live_tasks(seed=0) if t.scenario == "sequential")
    counter = iter(range(10**6))

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        n = next(counter)
        call = ToolCall(id=f"c{n}", name="calculator", arguments={"expression": f"{n} + 1"})
        return ModelResponse(tool_calls=(call,))

    outcome = await run_live_task(ScriptedModel(respond), task, max_cycles=5)
    assert outcome.looped and not outcome.answered and outcome.stop == "max_cycles"


async def test_summary_counts_premature_loops_and_catches() -> None:
    tasks = live_tasks(seed=0, per_scenario=1)
    assert {t.scenario for t in tasks} == {
        "sequential",
        "parallel_batch",
        "done_early",
        "no_tools",
        "tool_failure_recovered",
    }

    def lazy(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        return ModelResponse(content="no idea")

    result = await run_live(ScriptedModel(lazy), seed=0, per_scenario=1)
    assert result.skipped is None
    details = result.details
    assert details["stopped_prematurely"] == 5
    assert details["verification_caught_premature_stop"] == 5
    assert details["recovered_after_catch"] == 0
    assert details["looped"] == 5
    objective = result.policies["objective"]
    assert objective.false_positive_rate == 1.0 and objective.accuracy == 0.0
    verified = result.policies["objective_verified"]
    assert verified.false_positives == 0 and verified.false_negative_rate == 1.0


async def test_a_model_that_cannot_start_skips_the_suite() -> None:
    result = await run_live(ScriptedModel([]), seed=0, per_scenario=1)
    assert result.skipped is not None
    assert "not available" in result.skipped
    assert "\n" not in result.skipped


def test_summarize_of_no_runs_is_empty() -> None:
    result = summarize("m", [], 0.0)
    assert result.policies["objective"].tasks == 0
    assert result.details["looped"] == 0 and result.details["runs"] == []
