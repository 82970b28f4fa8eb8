"""The loop's quick builders make the same frozen objects as the classes themselves."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from convergent._frozen import slot_setters
from convergent.loop.parts import record_of
from convergent.messages import (
    AssistantMessage,
    CallOutcome,
    ModelResponse,
    ToolResultMessage,
    tool_result_message,
)
from convergent.state import ToolCallRecord
from convergent.testing import call


@pytest.mark.parametrize("outcome", list(CallOutcome))
def test_a_record_and_its_message_are_the_classes_own(outcome: CallOutcome) -> None:
    made = call("lookup", customer="c1")
    record = record_of(made, outcome, "text", 3, 0.25, fatal=True)
    assert record == ToolCallRecord(
        cycle=3,
        id=made.id,
        name="lookup",
        arguments={"customer": "c1"},
        ok=outcome is CallOutcome.OK,
        outcome=outcome,
        result="text",
        duration=0.25,
        fatal=True,
    )
    assert record.to_message() == ToolResultMessage(
        tool_call_id=made.id,
        name="lookup",
        content="text",
        is_error=outcome is not CallOutcome.OK,
    )
    failed = outcome is not CallOutcome.OK
    assert hash(record.to_message()) == hash(tool_result_message(made.id, "lookup", "text", failed))
    with pytest.raises(AttributeError):
        record.result = "changed"  # type: ignore[misc]


def test_an_assistant_message_is_the_classes_own() -> None:
    response = ModelResponse(content="looking", tool_calls=(call("lookup", customer="c1"),))
    message = response.to_message()
    assert message == AssistantMessage(content="looking", tool_calls=response.tool_calls)
    assert message.role == "assistant"


def test_a_builder_that_would_leave_a_field_unset_is_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Two:
        first: int
        second: list[int] = field(default_factory=list)

    assert len(slot_setters(Two, ("first", "second"))) == 2
    with pytest.raises(TypeError, match="first', 'second"):
        slot_setters(Two, ("first",))
