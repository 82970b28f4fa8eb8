"""What a tool declares decides how its repeats count: `Effect`, from ``read_only`` and
``idempotent``, in the loop."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from convergent import Agent, Effect, ScriptedModel, StopReason, ToolError, tool
from convergent.effects import annotated_effect, as_effect, effect_of
from convergent.events import Nudged
from convergent.messages import ToolResultMessage
from convergent.testing import call, step


@pytest.mark.parametrize(
    ("read_only", "idempotent", "effect"),
    [
        (True, False, Effect.READ),
        (True, True, Effect.READ),
        (False, False, Effect.WRITE),
        (False, True, Effect.IDEMPOTENT),
        (None, True, Effect.IDEMPOTENT),
        (None, False, Effect.UNDECLARED),
    ],
)
def test_the_flags_declare_the_effect(
    read_only: bool | None, idempotent: bool, effect: Effect
) -> None:
    assert effect_of(read_only, idempotent) is effect

    @tool(read_only=read_only, idempotent=idempotent)
    def probe() -> str:
        """A probe."""
        return "ok"

    assert probe.effect is effect


def test_the_older_flag_is_still_accepted() -> None:
    assert [as_effect(flag) for flag in (True, False, None)] == [
        Effect.READ,
        Effect.WRITE,
        Effect.UNDECLARED,
    ]
    assert as_effect(Effect.IDEMPOTENT) is Effect.IDEMPOTENT


@pytest.mark.parametrize(
    ("hints", "effect"),
    [
        ({"readOnlyHint": True}, Effect.READ),
        ({"readOnlyHint": True, "idempotentHint": False}, Effect.READ),
        ({"readOnlyHint": False}, Effect.WRITE),
        ({"readOnlyHint": False, "idempotentHint": True}, Effect.IDEMPOTENT),
        # the hints that mean something only for a tool that is not read-only declare one
        ({"idempotentHint": True}, Effect.IDEMPOTENT),
        ({"destructiveHint": False}, Effect.WRITE),
        ({"destructiveHint": True, "idempotentHint": True}, Effect.IDEMPOTENT),
        ({"title": "Lookup", "openWorldHint": True}, Effect.UNDECLARED),
        ({}, Effect.UNDECLARED),
    ],
)
def test_mcp_annotations_declare_the_same_effect_in_every_form(
    hints: dict[str, object], effect: Effect
) -> None:
    """A host hands MCP annotations over as the protocol's keys, or as the MCP SDK's
    attributes (``read_only_hint``...): both read the same."""
    snake = {
        "".join(f"_{c.lower()}" if c.isupper() else c for c in key): value
        for key, value in hints.items()
    }
    assert annotated_effect(hints) is effect
    assert annotated_effect(snake) is effect
    assert annotated_effect(SimpleNamespace(**snake)) is effect


def test_a_tool_without_annotations_is_undeclared() -> None:
    assert annotated_effect(None) is Effect.UNDECLARED


def notes(result: object) -> list[str]:
    return [e.note for e in result.events if isinstance(e, Nudged)]  # type: ignore[attr-defined]


async def test_a_profile_updated_identically_runs_twice_then_gets_the_note() -> None:
    updates: list[str] = []

    @tool(read_only=False)
    def update_profile(user: str, email: str) -> str:
        """Update a user's profile.

        Args:
            user: The user.
            email: The new address.
        """
        updates.append(email)
        return f"profile of {user} updated"

    same = step(call("update_profile", user="u1", email="a@b.example"))
    result = await Agent(ScriptedModel([same] * 4 + ["updated"]), [update_profile]).run("go")
    assert result.stop_reason is StopReason.STALLED and result.cycles == 4
    assert len(updates) == 2
    [note] = notes(result)
    assert note.startswith("Not run: you have requested update_profile(") and "3 times" in note


async def test_a_failing_booking_retried_gets_one_note_before_its_third_try() -> None:
    tries: list[str] = []

    @tool(read_only=False)
    def book(flight: str) -> str:
        """Book a flight.

        Args:
            flight: The flight.
        """
        tries.append(flight)
        raise ToolError("the fare class is sold out")

    script = [step(call("book", flight="UA 100"))] * 4 + ["could not book"]
    result = await Agent(ScriptedModel(script), [book]).run("book UA 100")
    assert result.stop_reason is StopReason.STALLED and result.cycles == 4
    assert tries == ["UA 100", "UA 100"]
    assert len(notes(result)) == 1


async def test_an_undeclared_status_poll_reaches_its_answer() -> None:
    states = iter(["queued", "running", "running", "succeeded"])

    @tool
    def job_status(job: str) -> str:
        """A job's status.

        Args:
            job: The job.
        """
        return next(states)

    script = [step(call("job_status", job="j1"))] * 4 + ["j1 succeeded"]
    result = await Agent(ScriptedModel(script), [job_status]).run("wait for j1")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.result for r in result.tool_calls] == ["queued", "running", "running", "succeeded"]
    assert notes(result) == []


async def test_an_idempotent_call_runs_again_after_its_note_then_stops() -> None:
    runs: list[int] = []

    @tool(read_only=False, idempotent=True)
    def set_status(value: str) -> str:
        """Set the status.

        Args:
            value: The new status.
        """
        runs.append(1)
        return f"status is {value}"

    script = [step(call("set_status", value="done"))] * 5 + ["set"]
    result = await Agent(ScriptedModel(script), [set_status]).run("set it")
    # a repeat adds nothing, so it runs and is judged on its result, like a read
    assert result.stop_reason is StopReason.STALLED and result.cycles == 4
    assert len(runs) == 4 and len(notes(result)) == 1
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results] == ["status is done"] * 4
