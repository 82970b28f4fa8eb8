"""`convergent.testing`'s script helpers drive the real loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import convergent
from convergent import Agent, ScriptedModel, StopReason, Usage, calculator
from convergent.durability.sqlite import RunStore
from convergent.exceptions import ModelError
from convergent.messages import ToolResultMessage
from convergent.testing import answer, call, scripted, step, write_script


def test_a_call_has_the_same_id_wherever_it_is_made() -> None:
    made = call("calculator", expression="2+2")
    assert made.id == call("calculator", expression="2+2").id
    assert made.id != call("calculator", expression="2+3").id
    assert made.id != call("echo", expression="2+2").id
    assert call("calculator", call_id="c9", expression="1").id == "c9"
    assert (made.name, made.arguments) == ("calculator", {"expression": "2+2"})


def test_repeated_calls_in_one_step_get_distinct_ids() -> None:
    twice = step(call("calculator", expression="1+1"), call("calculator", expression="1+1"))
    first, second = twice.tool_calls
    assert second.id == f"{first.id}-2"
    assert twice.finish_reason == "tool_calls"
    assert twice.usage == Usage()


def test_an_answer_has_no_calls_and_stops() -> None:
    final = answer("done", usage=Usage(input_tokens=3, output_tokens=1, requests=1))
    assert (final.content, final.tool_calls, final.finish_reason) == ("done", (), "stop")
    assert final.usage.total_tokens == 4


def test_a_scripted_model_replays_steps_calls_lists_and_strings_in_order() -> None:
    model = scripted(
        step(call("calculator", expression="2+2"), content="adding"),
        call("calculator", expression="3*3"),
        [call("calculator", expression="1+1"), call("calculator", expression="5-1")],
        "4, 9, 2 and 4",
        name="maths",
    )
    result = Agent(model, tools=[calculator]).run_sync("sums")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.output == "4, 9, 2 and 4"
    assert model.name == "maths"
    results = [m.content for m in model.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert results == ["4", "9", "2", "4"]


def test_the_helpers_are_not_part_of_the_core_api() -> None:
    assert not {"call", "answer", "step", "scripted"} & set(convergent.__all__)


def test_a_written_script_replays_the_same_responses_from_its_file(tmp_path: Path) -> None:
    adding = call("calculator", expression="2+2")
    model_name = write_script(
        tmp_path / "script.json",
        step(adding, content="adding", usage=Usage(input_tokens=7, output_tokens=2, requests=1)),
        "4",
    )
    assert model_name == f"scripted:{tmp_path / 'script.json'}"
    replayed = ScriptedModel.from_file(tmp_path / "script.json")
    result = Agent(replayed, tools=[calculator]).run_sync("2+2?")
    assert result.stop_reason is StopReason.COMPLETED and result.output == "4"
    assert [record.id for record in result.tool_calls] == [adding.id]
    assert result.usage.input_tokens == 7 and result.usage.output_tokens == 2
    first, last = ScriptedModel.from_file(tmp_path / "script.json").unconsumed
    assert (first.content, first.tool_calls, last.content) == ("adding", (adding,), "4")


def test_metadata_of_a_response_is_recorded_and_survives_its_script_file(tmp_path: Path) -> None:
    thinking = step(call("calculator", expression="1+1"), metadata={"confidence": 0.9})
    done = answer("2", metadata={"confidence": 0.2, "action": "finish"})
    assert (thinking.metadata, done.metadata) == (
        {"confidence": 0.9},
        {"confidence": 0.2, "action": "finish"},
    )
    write_script(tmp_path / "script.json", thinking, done)
    first, last = ScriptedModel.from_file(tmp_path / "script.json").unconsumed
    assert first.metadata == {"confidence": 0.9}
    assert last.metadata == {"confidence": 0.2, "action": "finish"}


def test_a_scripted_model_error_stops_the_run_model_error_and_a_resume_goes_on(
    tmp_path: Path,
) -> None:
    model = write_script(
        tmp_path / "script.json",
        call("calculator", expression="6*7"),
        ModelError("HTTP 503: overloaded"),
        "42",
    )
    spec = convergent.AgentSpec(model=model, tools=("calculator",), workspace=str(tmp_path))
    with RunStore(tmp_path / "runs.db") as store:
        failed = convergent.build_agent(spec).run_sync("6*7?", run_id="r", store=store)
        assert (failed.stop_reason, failed.stop_detail) == (
            StopReason.MODEL_ERROR,
            "HTTP 503: overloaded",
        )
        resumed = asyncio.run(convergent.resume("r", store=store))
    assert (resumed.stop_reason, resumed.output, resumed.cycles) == (StopReason.COMPLETED, "42", 3)
