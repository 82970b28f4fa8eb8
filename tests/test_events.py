from __future__ import annotations

import json
from pathlib import Path

from convergent import Agent, StopReason, calculator
from convergent.events import JsonlTraceWriter, RunStopped, event_to_dict
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
