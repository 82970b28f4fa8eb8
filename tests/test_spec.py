"""Agent specs: the one validator of what an agent is, and every stored form still loads."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

import convergent
from convergent import (
    Agent,
    AgentSpec,
    Limits,
    StopPolicy,
    StopReason,
    Usage,
    UserError,
    build_agent,
    calculator,
)
from convergent.durability.sqlite import RunStore
from convergent.resuming import spec_of
from convergent.spec import BUILTIN_TOOLS, SPEC_VERSION, AgentToolSpec, GateSpec
from convergent.testing import answer, call, step, write_script

FROZEN = Path(__file__).with_name("fixtures") / "specs"


def test_a_spec_round_trips_through_json() -> None:
    spec = AgentSpec(
        model="scripted:x.json",
        tools=("calculator", "write_file"),
        gate=GateSpec(threshold=0.7),
        limits=Limits(max_cycles=7, max_cost=1.5, max_tool_calls=9),
        policy=StopPolicy(on_tool_error="stop", max_repeated_calls=4),
    )
    assert AgentSpec.from_json(spec.model_dump_json()) == spec
    assert AgentSpec.from_json(spec.model_dump(mode="json")) == spec
    assert AgentSpec.from_json(spec.to_json()) == spec


def test_a_spec_from_a_newer_version_is_refused() -> None:
    data = AgentSpec().model_dump(mode="json") | {"version": SPEC_VERSION + 1, "new": 1}
    newer = rf"version {SPEC_VERSION + 1}; this convergent reads up to {SPEC_VERSION} \(upgrade"
    with pytest.raises(UserError, match=newer):
        AgentSpec.from_json(data)


def test_a_version_1_spec_still_loads_with_the_new_fields_at_their_defaults() -> None:
    data = AgentSpec().model_dump(mode="json")
    data["version"] = 1
    del data["policy"]
    spec = AgentSpec.from_json(data)
    assert spec.policy == StopPolicy() and spec.policy.final_answer is True


def test_a_version_5_spec_moves_its_stop_rules_into_the_policy_without_a_warning() -> None:
    data = AgentSpec().model_dump(mode="json")
    del data["policy"]
    data["version"] = 5
    data["limits"] |= {"max_repeated_calls": 4, "stall_nudges": 0}
    data |= {"on_tool_error": "stop", "max_consecutive_tool_errors": 2}
    spec = AgentSpec.from_json(data)
    assert spec.policy == StopPolicy(
        max_repeated_calls=4, notes=0, on_tool_error="stop", max_repeated_failures=2
    )
    assert spec.limits == Limits()


def test_a_version_6_spec_moves_its_final_answer_into_the_policy_without_a_warning() -> None:
    data = AgentSpec().model_dump(mode="json")
    data["version"] = 6
    data["final_answer"] = False
    spec = AgentSpec.from_json(data)
    assert spec.policy == StopPolicy(final_answer=False)
    assert "final_answer" not in spec.model_dump(mode="json")


def test_a_spec_written_now_with_final_answer_warns_and_keeps_it_in_the_policy() -> None:
    with pytest.warns(DeprecationWarning, match=r"final_answer.*moved to AgentSpec\(policy="):
        spec = AgentSpec(final_answer=False)  # type: ignore[call-arg]
    assert spec.policy.final_answer is False


def test_the_earlier_spellings_of_a_spec_warn() -> None:
    with pytest.warns(DeprecationWarning, match="policy"):
        spec = AgentSpec(on_tool_error="stop")  # type: ignore[call-arg]
    assert spec.policy.on_tool_error == "stop"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"limits": {"max_cycles": -1}}, "invalid agent spec: limits.max_cycles"),
        ({"policy": {"on_tool_error": "ignore"}}, "invalid agent spec: policy.on_tool_error"),
        ({"policy": {"notes": -1}}, r"invalid agent spec: policy.notes must be >= 0, got -1"),
        ({"surprise": True}, "invalid agent spec: surprise"),
        ("{not json", r"invalid agent spec: not valid JSON \(line 1, column 2"),
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "invalid agent spec: nested too deeply"),
        ({"tools": ["calculator", "rm_rf"]}, "invalid agent spec: tools: unknown tool 'rm_rf'"),
        ({"tools": ["shop:"]}, r"tools: tool 'shop:': an import path is package.module:attr"),
        ({"gate": {"threshold": 1.5}}, r"invalid agent spec: gate.threshold must be <= 1, got 1.5"),
        ({"price": [-1, 4]}, r"invalid agent spec: price.0 must be >= 0, got -1"),
        ({"price": [1]}, r"invalid agent spec: price.1 is required"),
    ],
)
def test_a_malformed_spec_is_one_user_error(data: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        AgentSpec.from_json(data)


def test_limits_are_validated_in_one_place_wherever_they_are_built() -> None:
    with pytest.raises(UserError, match=r"^max_cycles must be >= 0, got -1$"):
        Limits(max_cycles=-1)
    with pytest.raises(UserError, match=r"^notes must be >= 0, got -2$"):
        StopPolicy(notes=-2)
    with pytest.raises(UserError, match=r"^max_seconds must be a finite number, got inf$"):
        Limits(max_seconds=float("inf"))
    with pytest.raises(UserError, match=r"^max_turns is not a known field$"):
        Limits(max_turns=3)  # type: ignore[call-arg]
    # inside a spec, the same rule says where the bad value is
    with pytest.raises(ValidationError) as raised:
        AgentSpec.model_validate({"policy": {"max_repeated_calls": 0}})
    assert raised.value.errors()[0]["loc"] == ("policy", "max_repeated_calls")
    assert AgentSpec(limits={"max_cycles": 4}).limits == Limits(max_cycles=4)  # type: ignore[arg-type]


def test_every_built_in_tool_name_builds(tmp_path: Path) -> None:
    from convergent.builder import resolve_tools

    tools = resolve_tools(BUILTIN_TOOLS, tmp_path)
    assert [t.name for t in tools] == [n for n in BUILTIN_TOOLS if n != "ask_user"]


def frozen(name: str, folder: Path) -> str:
    """A frozen stored form, with this machine's paths in place of its placeholders."""
    text = (FROZEN / name).read_text()
    for token, path in (
        ("@SCRIPT@", folder / "script.json"),
        ("@SCORER@", folder / "scorer.json"),
        ("@WORKSPACE@", folder),
    ):
        text = text.replace(token, str(path))
    return text


USAGE = Usage(input_tokens=1000, output_tokens=100)
"""What each of the model's responses reports using."""


def scripts(folder: Path) -> None:
    """A model that calculates twice, and a scorer that approves every step."""
    write_script(
        folder / "script.json",
        step(call("calculator", expression="2*3"), usage=USAGE),
        step(call("calculator", expression="4*5"), usage=USAGE),
        answer("6 and 20", usage=USAGE),
    )
    approve = json.dumps({"clarity": 0.9, "certainty": 0.9, "reason": "-"})
    write_script(folder / "scorer.json", *[approve] * 4)


@pytest.mark.parametrize(
    ("name", "price", "cost"),
    [
        ("spec.v1.json", None, 0.0),
        ("spec.v2.json", None, 0.0),
        # three requests of 1,000 input tokens at $1 and 100 output tokens at $4 per million
        ("spec.v3.json", (1.0, 4.0), 3 * 1400 / 1e6),
        ("spec.v4.json", (1.0, 4.0), 3 * 1400 / 1e6),
        ("spec.v6.json", (1.0, 4.0), 3 * 1400 / 1e6),
    ],
)
async def test_a_run_stored_with_an_older_spec_loads_and_resumes(
    name: str, price: tuple[float, float] | None, cost: float, tmp_path: Path
) -> None:
    scripts(tmp_path)
    stored = json.loads(frozen(name, tmp_path))
    spec = AgentSpec.from_json(stored)
    assert spec.gate == GateSpec(threshold=0.5, model=f"scripted:{tmp_path / 'scorer.json'}")
    assert spec.limits.max_cycles == 10 and spec.workspace == str(tmp_path)
    assert spec.price == price
    assert spec.policy.final_answer is (name == "spec.v1.json")  # v1 had no final_answer
    db = tmp_path / "runs.db"
    with RunStore(db) as store:
        # the first part runs one cycle, and stores the spec exactly as it was written
        agent = build_agent(
            spec, spec=stored, limits=Limits(max_cycles=1), policy=StopPolicy(final_answer=False)
        )
        first = await agent.run("calculate", run_id="old", store=store)
        assert first.stop_reason is StopReason.MAX_CYCLES
        assert store.get_run("old").spec == stored
    result = await convergent.resume("old", store=db)
    assert result.stop_reason is StopReason.COMPLETED and result.output == "6 and 20"
    assert [c.arguments["expression"] for c in result.tool_calls] == ["2*3", "4*5"]
    assert result.usage.cost == pytest.approx(cost)


async def test_a_run_stored_with_convergent_0_1_settings_loads_and_resumes(
    tmp_path: Path,
) -> None:
    scripts(tmp_path)
    settings = json.loads(frozen("settings.v0.1.json", tmp_path))
    db = tmp_path / "runs.db"
    with RunStore(db) as store:
        model = convergent.ScriptedModel.from_file(tmp_path / "script.json")
        agent = Agent(
            model, [calculator], limits=Limits(max_cycles=1), policy=StopPolicy(final_answer=False)
        )
        first = await agent.run("calculate", run_id="old", store=store)
        assert first.stop_reason is StopReason.MAX_CYCLES
    with sqlite3.connect(db) as connection:  # what 0.1 left: settings, no spec
        connection.execute(
            "UPDATE runs SET config = ? WHERE run_id = 'old'", [json.dumps(settings)]
        )
    with RunStore(db) as store:
        spec = spec_of(store.get_run("old"))
    assert spec.tools == (
        "calculator", "read_file", "list_dir", "ask_user", "fail", "write_file", "edit_file"
    )  # fmt: skip
    assert spec.policy.on_tool_error == "stop" and spec.system_prompt == "You are careful."
    assert spec.gate == GateSpec(threshold=0.5, model=f"scripted:{tmp_path / 'scorer.json'}")
    result = await convergent.resume("old", store=db)
    assert result.stop_reason is StopReason.COMPLETED and result.output == "6 and 20"


def test_an_output_schema_travels_in_the_spec_and_a_bad_one_is_refused() -> None:
    schema = {"type": "object", "required": ["total"]}
    stored = AgentSpec(output_schema=schema).to_json()
    assert AgentSpec.from_json(stored).output_schema == schema
    with pytest.raises(UserError, match="output_schema: .*invalid output schema"):
        AgentSpec.from_json({"output_schema": {"type": 12}})


def test_agents_called_as_tools_travel_in_the_spec_and_clashing_names_are_refused() -> None:
    child = AgentToolSpec(name="helper", description="Helps.", agent=AgentSpec(model="m"))
    stored = AgentSpec(agents=(child,)).to_json()
    assert AgentSpec.from_json(stored).agents == (child,)
    # a version 4 spec, from before ``agents``, loads without any
    assert AgentSpec.from_json({"version": 4, "model": "m"}).agents == ()
    with pytest.raises(UserError, match="two agents are named 'helper'"):
        AgentSpec.from_json({"agents": [child.model_dump(), child.model_dump()]})
    with pytest.raises(UserError, match="agents.0.name"):
        AgentSpec.from_json({"agents": [child.model_dump() | {"name": "no spaces"}]})
