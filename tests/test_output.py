"""Typed output: a run completes only on an answer that validates, driven by `ScriptedModel`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from convergent import (
    Agent,
    AgentSpec,
    Limits,
    ScriptedModel,
    StopPolicy,
    UserError,
    Verification,
    build_agent,
    calculator,
)
from convergent.durability.sqlite import RunStore
from convergent.events import Verified
from convergent.output import OUTPUT_SECONDS, OutputCheck, OutputSpec
from convergent.resuming import resume
from convergent.stop import OUTPUT_FEEDBACK, StopReason
from convergent.testing import call, scripted, write_script
from convergent.testing.chat_server import ChatServer


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
    agent = Agent(
        model, output_type=City, limits=Limits(max_cycles=2), policy=StopPolicy(final_answer=False)
    )
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
        policy=StopPolicy(final_answer=False),
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
        agent = Agent(
            first,
            output_type=City,
            limits=Limits(max_cycles=1),
            policy=StopPolicy(final_answer=False),
        )
        stopped = await agent.run("x", run_id="r", store=store)
        assert stopped.stop_reason is StopReason.MAX_CYCLES
        assert store.get_run("r").output_data is None
        again = Agent(ScriptedModel([LIMA]), output_type=City, limits=Limits(max_cycles=3))
        resumed = await resume("r", store=store, agent=again)
        assert resumed.stop_reason is StopReason.COMPLETED and resumed.cycles == 2
        assert resumed.output_data == City(name="Lima", population=10_000_000)
        assert store.get_run("r").output_data == {"name": "Lima", "population": 10_000_000}
        assert store.load("r").output_json == {"name": "Lima", "population": 10_000_000}


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


# -- a schema and an answer from outside: the check stays bounded ---------------------

TREE = {
    "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
    "$ref": "#/$defs/node",
}


def nested(levels: int) -> str:
    return '{"child": ' * levels + "{}" + "}" * levels


def multiplying(levels: int) -> dict[str, object]:
    """A schema whose ``anyOf`` alternatives double at each of ``levels`` levels."""
    defs: dict[str, object] = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"a{levels}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/a0"}


async def test_an_answer_nested_too_deep_to_check_goes_back_to_the_model() -> None:
    # 400 levels used to exhaust the stack: RecursionError ended the run
    model = ScriptedModel([nested(400), nested(3)])
    result = await Agent(model, output_schema=TREE).run("a tree")
    assert result.stop_reason is StopReason.COMPLETED
    feedback = [m.content for m in result.messages if m.role == "user"][1]
    assert feedback == OUTPUT_FEEDBACK.format(
        errors="the answer cannot be checked against the schema: it is nested more than "
        "100 levels deep"
    )


def test_a_pattern_runs_in_linear_time() -> None:
    # Python's engine takes about 2**40 steps to refuse this answer
    spec = OutputSpec.of_schema({"type": "string", "pattern": "^(a+)+$"})
    assert spec.check('"' + "a" * 40 + '!"').errors == (
        "(answer): '" + "a" * 40 + "!' does not match '^(a+)+$'"
    )
    assert spec.check('"aaaa"').errors is None


def test_alternatives_that_multiply_end_within_the_step_budget() -> None:
    # 2**30 paths: without a budget the check ran for hours and took gigabytes
    spec = OutputSpec.of_schema(multiplying(30), seconds=None)
    errors = spec.check("1").errors
    assert errors == (
        "the answer cannot be checked against the schema: checking it took more than 100,000 "
        "steps (the schema's alternatives multiply)"
    )
    assert spec.check('"text"').errors is None  # the first path that fits is enough


def test_a_big_answer_gets_steps_in_proportion() -> None:
    items = {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    spec = OutputSpec.of_schema(items, seconds=None)
    answer = json.dumps([{"n": n} for n in range(30_000)])
    assert spec.check(answer).errors is None


def test_a_check_ends_at_its_deadline_before_its_steps() -> None:
    # 100,000 steps took 3.5 to 4.9 s: on the event loop, or in a Temporal workflow task
    assert OUTPUT_SECONDS < 2
    errors = OutputSpec.of_schema(multiplying(30), seconds=0.05).check("1").errors
    assert errors == (
        "the answer cannot be checked against the schema: checking it took more than 0.05s "
        "(the schema's alternatives multiply, or the value is too big)"
    )


def test_verdicts_given_elsewhere_are_taken_as_they_are() -> None:
    checked = {"1": None, '"text"': "(answer): not this one"}
    spec = OutputSpec.of_schema(multiplying(30), seconds=None, checked=checked)
    assert spec.check("1") == OutputCheck(None, 1, 1)  # not checked again: out of steps
    assert spec.check('"text"').errors == "(answer): not this one"
    assert spec.check('"other"').errors is None
    assert spec.check("one").errors is not None


def test_a_schema_that_refers_outside_itself_is_refused_and_nothing_is_fetched() -> None:
    with ChatServer() as server:
        for reference in (f"{server.url}/schema.json", "file:///etc/passwd", "#/$defs/none"):
            with pytest.raises(UserError) as raised:
                OutputSpec.of_schema({"$ref": reference})
            assert str(raised.value) == (
                f"the output schema refers to {reference!r}, which is not within it "
                "(references to other files or addresses are not followed)"
            )
        assert server.unrouted == []  # no GET reached it


def test_a_pattern_re2_cannot_run_is_refused() -> None:
    with pytest.raises(UserError) as raised:
        OutputSpec.of_schema({"type": "string", "pattern": "(a)\\1"})
    assert str(raised.value) == (
        "the output schema's pattern '(a)\\\\1' cannot be checked: patterns run on RE2, "
        "which has no backreferences or lookaround"
    )
