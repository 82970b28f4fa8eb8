from __future__ import annotations

import json
from pathlib import Path

from convergent import Agent, StopReason, calculator
from convergent.events import (
    JsonlTraceWriter,
    RunStarted,
    RunStopped,
    event_from_dict,
    event_to_dict,
)
from convergent.messages import Usage
from convergent.testing import call, scripted


def test_event_to_dict_is_json_with_type_first() -> None:
    event = RunStopped(
        run_id="r", cycle=2, reason=StopReason.STALLED, detail="d", output="o", usage=Usage()
    )
    data = event_to_dict(event)
    assert next(iter(data)) == "type"
    assert data["type"] == "run_stopped" and data["reason"] == "stalled"
    json.dumps(data)


async def test_jsonl_trace_has_one_line_per_event(tmp_path: Path) -> None:
    writer = JsonlTraceWriter(tmp_path / "t.jsonl")
    model = scripted(call("calculator", expression="1+2"), "3")
    result = await Agent(model, [calculator]).run("x", on_event=writer)
    writer.close()
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert len(lines) == len(result.events)
    finished = [json.loads(line) for line in lines if '"tool_finished"' in line]
    assert finished[0]["result"] == "3" and finished[0]["ok"] is True


async def test_the_run_start_shares_the_agents_tool_specs_and_serialises_them() -> None:
    agent = Agent(scripted("done"), [calculator])
    result = await agent.run("x")
    started = result.events[0]
    assert isinstance(started, RunStarted)
    # the agent's own specs, not a copy made at every run's start
    assert started.tool_specs is agent.tool_specs
    (spec,) = event_to_dict(started)["tool_specs"]
    assert spec == {
        "name": "calculator",
        "description": agent.tool_specs[0].description,
        "parameters": agent.tool_specs[0].parameters,
    }
    assert event_from_dict(event_to_dict(started)) == started
