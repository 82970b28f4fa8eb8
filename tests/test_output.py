"""Typed output: a run completes only on an answer that validates, driven by `ScriptedModel`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pydantic import BaseModel

from convergent import (
    Agent,
    AgentSpec,
    Limits,
    ScriptedModel,
    UserError,
    Verification,
    build_agent,
    calculator,
)
from convergent.durability.sqlite import RunStore
from convergent.events import Verified
from convergent.output import OutputSpec
from convergent.resuming import resume
from convergent.stop import OUTPUT_FEEDBACK, StopReason
from convergent.testing import call, scripted, write_script


class City(BaseModel):
    name: str
    population: int


@dataclasses.dataclass
class Point:
    x: int
    y: int


SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "integer"}},
    "required": ["total"],
}


async def test_an_invalid_answer_goes_back_as_feedback_and_a_valid_one_completes() -> None:
    model = ScriptedModel(["Lima", '{"name": "Lima", "population": "many"}', LIMA])
    result = await Agent(model, output_type=City).run("Largest city of Peru?")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.cycles == 3  # each rejected answer was a cycle
    assert result.output_data == City(name="Lima", population=10_000_000)
    assert result.to_dict()["output_data"] == {"name": "Lima", "population": 10_000_000}
    notes = [m.content for m in result.messages if m.role == "user"][1:]
    assert notes == [
        OUTPUT_FEEDBACK.format(errors="(answer): Invalid JSON: expected value at line 1 column 1"),
        OUTPUT_FEEDBACK.format(
            errors="population: Input should be a valid integer, unable to parse string as "
            "an integer"
        ),
    ]
    verdicts = [(e.passed, e.feedback) for e in result.events if isinstance(e, Verified)]
    assert [passed for passed, _ in verdicts] == [False, False]
    assert verdicts[1][1].startswith("output: population:")
    model.assert_consumed()


LIMA = '{"name": "Lima", "population": 10000000}'


@pytest.mark.parametrize(
    ("output_type", "answer", "value"),
    [
        (list[int], "[1, 2, 3]", [1, 2, 3]),
        (Point, '```json\n{"x": 1, "y": 2}\n```', Point(x=1, y=2)),
        (dict[str, float], ' {"a": 1.5} ', {"a": 1.5}),
    ],
)
async def test_any_type_pydantic_validates_is_an_output_type(
    output_type: object, answer: str, value: object
) -> None:
    result = await Agent(ScriptedModel([answer]), output_type=output_type).run("x")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output_data == value


async def test_a_json_schema_checks_the_answer_and_gives_its_data() -> None:
    model = scripted(call("calculator", expression="1+1"), '{"total": "2"}', '{"total": 2}')
    result = await Agent(model, [calculator], output_schema=SCHEMA).run("1+1?")
    assert result.stop_reason is StopReason.COMPLETED and result.cycles == 3
    assert result.output_data == {"total": 2}
    assert "total: '2' is not of type 'integer'" in result.messages[-2].content


async def test_requests_carry_the_schema_except_the_final_answer_after_a_stop() -> None:
    model = ScriptedModel(["two", "still two", "my best guess: 2"])
    agent = Agent(model, output_schema=SCHEMA, limits=Limits(max_cycles=2))
    result = await agent.run("1+1?")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "my best guess: 2" and result.output_after_stop
    assert result.output_data is None
    schemas = [request.settings and request.settings.output_schema for request in model.requests]
    assert schemas == [SCHEMA, SCHEMA, None]


async def test_a_limit_reached_while_the_answer_is_invalid_stops_for_that_limit() -> None:
    model = ScriptedModel(["{}", "{}"])
    agent = Agent(model, output_type=City, limits=Limits(max_cycles=2), final_answer=False)
    result = await agent.run("x")
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.output == "{}" and not result.output_after_stop
    assert result.output_data is None


async def test_the_verifier_judges_only_a_valid_answer() -> None:
    judged: list[str] = []

    def verifier(answer: str) -> Verification:
        judged.append(answer)
        return Verification(passed='"Lima"' in answer, feedback="wrong city")

    model = ScriptedModel(["nope", '{"name": "Cusco", "population": 1}', LIMA])
    result = await Agent(model, output_type=City, verifier=verifier).run("x")
    assert result.stop_reason is StopReason.COMPLETED
    assert judged == ['{"name": "Cusco", "population": 1}', LIMA]
    assert result.output_data == City(name="Lima", population=10_000_000)


async def test_an_answer_that_validates_but_fails_the_verifier_gives_no_data() -> None:
    model = ScriptedModel([LIMA])
    agent = Agent(
        model,
        output_type=City,
        verifier=lambda answer: Verification(passed=False, feedback="no"),
        limits=Limits(max_cycles=1),
        final_answer=False,
    )
    result = await agent.run("x")
    assert result.stop_reason is StopReason.MAX_CYCLES and result.output_data is None


def test_the_agent_refuses_two_output_declarations_and_bad_ones() -> None:
    model = ScriptedModel([])
    with pytest.raises(UserError, match="output_type or output_schema, not both"):
        Agent(model, output_type=City, output_schema=SCHEMA)
    with pytest.raises(UserError, match="cannot be validated"):
        Agent(model, output_type=object())
    with pytest.raises(UserError, match="invalid output schema"):
        Agent(model, output_schema={"type": "no-such-type"})


def test_the_schema_of_a_type_is_pydantics() -> None:
    assert OutputSpec.of_type(City).schema == City.model_json_schema()
    assert Agent(ScriptedModel([]), output_type=City).settings is not None


async def test_a_durable_run_stores_the_data_and_resumes_with_its_type(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        first = ScriptedModel(["Lima"])
        agent = Agent(first, output_type=City, limits=Limits(max_cycles=1), final_answer=False)
        stopped = await agent.run("x", run_id="r", store=store)
        assert stopped.stop_reason is StopReason.MAX_CYCLES
        assert store.get_run("r").output_data is None
        again = Agent(ScriptedModel([LIMA]), output_type=City, limits=Limits(max_cycles=3))
        resumed = await resume("r", store=store, agent=again)
        assert resumed.stop_reason is StopReason.COMPLETED and resumed.cycles == 2
        assert resumed.output_data == City(name="Lima", population=10_000_000)
        assert store.get_run("r").output_data == {"name": "Lima", "population": 10_000_000}
        assert store.load("r").output_data == {"name": "Lima", "population": 10_000_000}


def test_the_agents_spec_carries_the_schema_of_its_output_type() -> None:
    agent = Agent(ScriptedModel([]), output_type=City, spec=AgentSpec().to_json())
    assert agent.spec is not None
    assert agent.spec["output_schema"] == City.model_json_schema()
    assert AgentSpec.from_json(agent.spec).output_schema == City.model_json_schema()


async def test_build_agent_checks_answers_against_the_specs_schema(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", "two", '{"total": 2}')
    agent = build_agent(AgentSpec(model=model, workspace=str(tmp_path), output_schema=SCHEMA))
    result = await agent.run("1+1?")
    assert result.stop_reason is StopReason.COMPLETED and result.cycles == 2
    assert result.output_data == {"total": 2}
