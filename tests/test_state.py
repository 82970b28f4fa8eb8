from __future__ import annotations

import json

from convergent import Agent, RunState, calculator
from convergent.state import STATE_SCHEMA_VERSION
from convergent.stop import StopReason
from convergent.testing import call, scripted


async def test_state_round_trips_through_json() -> None:
    agent = Agent(
        scripted(call("calculator", expression="1+2"), "3"),
        [calculator],
        system_prompt="sys",
    )
    state = agent.new_state("add")
    await agent.run(state=state)
    data = json.loads(json.dumps(state.to_jsonable()))
    again = RunState.from_jsonable(data)
    assert again == state
    assert again.stop_reason is StopReason.COMPLETED
    assert again.schema_version == STATE_SCHEMA_VERSION == 8
    assert again.stop_rule == "answered"
    assert [m.role for m in again.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert again.pending_calls() == []
