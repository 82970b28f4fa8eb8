"""Properties of the objective rule over generated scripts (hypothesis)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convergent import Agent, Limits, ScriptedModel, StopPolicy, StopReason, calculator

self_reports = st.fixed_dictionaries(
    {},
    optional={
        "confidence": st.floats(min_value=0.0, max_value=1.0),
        "action": st.sampled_from(["finish", "done", "complete", "continue", "tool_use"]),
    },
)
batches = st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=3)


def tool_response(numbers: list[int], report: dict[str, Any]) -> dict[str, Any]:
    calls = [{"name": "calculator", "arguments": {"expression": f"{n} + 1"}} for n in numbers]
    return {"content": "working", "tool_calls": calls, **report}


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(batches, self_reports), max_size=8, unique_by=lambda s: tuple(s[0])),
    final=self_reports,
)
def test_the_run_stops_exactly_when_a_response_has_no_tool_calls(
    steps: list[tuple[list[int], dict[str, Any]]], final: dict[str, Any]
) -> None:
    distinct = [(sorted(set(numbers)), report) for numbers, report in steps]
    seen: set[int] = set()
    script = []
    for numbers, report in distinct:
        fresh = [n for n in numbers if n not in seen]
        if not fresh:
            continue
        seen.update(fresh)
        script.append(tool_response(fresh, report))
    script.append({"content": "answer", **final})
    model = ScriptedModel(script)
    limits = Limits(max_cycles=len(script) + 5)
    result = asyncio.run(Agent(model, [calculator], limits=limits).run("task"))

    # self-reported confidence or finish never ends the run early or keeps it going
    assert result.stop_reason is StopReason.COMPLETED
    assert result.cycles == len(script)
    executed = [record.arguments["expression"] for record in result.tool_calls]
    expected = [
        call["arguments"]["expression"] for step in script for call in step.get("tool_calls", [])
    ]
    assert executed == expected
    assert all(record.ok for record in result.tool_calls)
    model.assert_consumed()


@settings(max_examples=40, deadline=None)
@given(
    threshold=st.integers(min_value=1, max_value=5),
    nudges=st.integers(min_value=0, max_value=2),
    report=self_reports,
)
def test_a_repeated_call_stalls_after_its_nudges_whatever_the_model_claims(
    threshold: int, nudges: int, report: dict[str, Any]
) -> None:
    response = tool_response([7], report)
    model = ScriptedModel([response] * (threshold + nudges) + ["my best answer"])
    limits = Limits(max_cycles=threshold + nudges + 2)
    policy = StopPolicy(max_repeated_calls=threshold, notes=nudges)
    agent = Agent(model, [calculator], limits=limits, policy=policy)
    result = asyncio.run(agent.run("task"))

    assert result.stop_reason is StopReason.STALLED
    assert result.cycles == threshold + nudges
    # a read runs and is judged on its result: every request's call ran
    assert len(result.tool_calls) == threshold + nudges
    assert result.output == "my best answer" and result.output_after_stop
    model.assert_consumed()
