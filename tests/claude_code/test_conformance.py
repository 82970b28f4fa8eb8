"""The conformance trajectories through the Claude Agent SDK adapter and the real Claude Code CLI.

The fake plays each trajectory's model; its tools are in-process SDK tools on one MCP
server, wrapped with `Convergence.tools`, each declaring its effect with MCP annotations
(none, where the trajectory has the caller leave a tool undeclared). Each trajectory must
end as convergent's loop ends it (see ``tests/adapters/test_conformance.py``), apart from
what Claude Code cannot express (`NOT_EXPRESSIBLE`, refused when the adapter is built)
and what it can only end another way (`DIFFERS`, with why).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from adapters.hosts import run_loop
from adapters.trajectories import (
    EFFECTS,
    MISTAKES,
    REPEATED_MISTAKES,
    TERMINAL,
    TRAJECTORIES,
    Cut,
    Ending,
    Report,
    Step,
    TestClock,
    Trajectory,
    World,
    ending,
    needs_citation,
    same,
)
from convergent import AnthropicModel, Effect, Limits, StopReason
from convergent.adapters import NotExpressible
from convergent.clock import use_clock
from convergent.output import OutputSpec

from .agent_sdk import converge
from .claude_cli import ClaudeCode
from .fake_anthropic import FakeAnthropic, Reply, Text, ToolUse

if TYPE_CHECKING:
    from claude_agent_sdk import SdkMcpTool
    from mcp.types import ToolAnnotations

    from convergent.adapters.claude_agent_sdk import Convergence

pytestmark = [pytest.mark.slow, pytest.mark.claude_code]

SERVER = "w"

_NO_TOKENS = "the hooks see no model request, so a token budget cannot be checked before one"

NOT_EXPRESSIBLE: dict[str, str] = {
    trajectory.name: _NO_TOKENS
    for trajectory in TRAJECTORIES
    if trajectory.limits.max_total_tokens is not None
}
"""Trajectories the Claude Agent SDK adapter refuses, and why."""

_UNHOOKED = (
    "Claude Code answers a call of a tool it does not have itself, before any hook: the "
    "adapter counts it from the messages, but no note reaches the model, and the stop "
    "comes with the model's next answer (or ends the session at its next such call)"
)
_NOTE_AFTER_CALLS = (
    "the hooks add a note only after a tool call: a budget note due before the first "
    "request is not sent"
)

DIFFERS: dict[str, tuple[Ending, str]] = {
    "unknown_tools": (
        Ending(StopReason.STALLED, MISTAKES + 1, "best answer", True, (), ran=0),
        _UNHOOKED,
    ),
    "unknown_tool_repeated": (
        Ending(StopReason.STALLED, REPEATED_MISTAKES + 2, "best answer", True, (), ran=0),
        _UNHOOKED,
    ),
    "small_cost_budget": (
        Ending(StopReason.BUDGET_EXHAUSTED, 1, "", False, ("final",), ran=1),
        _NOTE_AFTER_CALLS,
    ),
}
"""Trajectories Claude Code can only end another way: that ending, and why."""


def _named(name: str) -> str:
    return f"mcp__{SERVER}__{name}"


def _annotations(effect: Effect) -> ToolAnnotations | None:
    """The MCP annotations that declare ``effect``."""
    from mcp.types import ToolAnnotations

    return {
        Effect.READ: ToolAnnotations(readOnlyHint=True),
        Effect.IDEMPOTENT: ToolAnnotations(readOnlyHint=False, idempotentHint=True),
        Effect.WRITE: ToolAnnotations(destructiveHint=True),
        Effect.UNDECLARED: None,
    }[effect]


def _sdk_tool(world: World, name: str, effect: Effect) -> SdkMcpTool[Any]:
    from claude_agent_sdk import tool

    method = getattr(world, name)
    parameters = {
        parameter: kind
        for parameter, kind in inspect.get_annotations(method, eval_str=True).items()
        if parameter != "return"
    }

    async def call(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": method(**arguments)}]}

    return tool(name, method.__doc__ or name, parameters, annotations=_annotations(effect))(call)


def _reply(step: Step, usage: tuple[int, int]) -> Reply:
    """The fake's reply for one step, reporting ``usage`` (input and output tokens)."""
    tokens = {"input_tokens": usage[0], "output_tokens": usage[1]}
    if isinstance(step, str):
        stop = "max_tokens" if isinstance(step, Cut) else None
        return Reply([Text(step)] if step else [], stop_reason=stop, **tokens)
    return Reply([ToolUse(_named(name), dict(arguments)) for name, arguments in step], **tokens)


async def run_claude_code(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch, trajectory: Trajectory
) -> Ending:
    trajectory = _priced(trajectory)
    clock = TestClock()
    world = World(clock)
    with use_clock(clock):  # the hooks' driver reads it; the tools wait on it
        convergence = _convergence(trajectory)
    effects = trajectory.effects()
    tools = convergence.tools(*(_sdk_tool(world, name, effects[name]) for name in EFFECTS))
    replies = [_reply(step, trajectory.usage_at(n)) for n, step in enumerate(trajectory.steps)]
    with FakeAnthropic(replies) as fake:
        report = await converge(
            claude_code,
            monkeypatch,
            convergence,
            fake,
            "the task",
            server=(SERVER, tools),
            model=MODEL,
        )
    assert {request.body.get("model") for request in fake.requests} == {MODEL}
    seen = [(json.dumps(request.texts(None)), None) for request in fake.requests]
    return ending(
        report.reason, report.cycles, report.output, report.output_after_stop, seen, world.ran
    )


MODEL = "claude-sonnet-4-5"
"""The model the sessions ask for: Claude Code and the price table agree on its price."""


def _limits(limits: Limits) -> Limits:
    """The limits with per-tool caps under the names Claude Code gives the server's tools."""
    caps = limits.max_calls_per_tool
    if not isinstance(caps, Mapping):
        return limits
    return dataclasses.replace(limits, max_calls_per_tool={_named(n): c for n, c in caps.items()})


def _priced(trajectory: Trajectory) -> Trajectory:
    """The trajectory at Claude Code's price (it costs responses itself), for the loop too.

    Each response reports as many tokens as cost what it cost at the trajectory's price.
    """
    if trajectory.price is None:
        return trajectory
    known = AnthropicModel(MODEL, api_key="unused").price  # the price table's
    assert known is not None
    (given_in, given_out), (used_in, used_out) = trajectory.price, trajectory.usage
    usage = (round(used_in * given_in / known.input), round(used_out * given_out / known.output))
    growth = round(trajectory.growth * given_in / known.input)
    price = (known.input, known.output)
    return dataclasses.replace(trajectory, price=price, usage=usage, growth=growth)


def _convergence(trajectory: Trajectory) -> Convergence:
    from convergent.adapters.claude_agent_sdk import Convergence

    return Convergence(
        _limits(trajectory.limits),
        policy=trajectory.policy,
        # the tools' effects come from their MCP annotations, through Claude Code
        terminal_tools=[_named(name) for name in TERMINAL],
        verifier=needs_citation if trajectory.verifier else None,
        output=OutputSpec.of_type(Report) if trajectory.typed else None,
    )


@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=lambda t: t.name)
async def test_claude_code_ends_the_trajectory_as_the_loop_does(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch, trajectory: Trajectory
) -> None:
    if trajectory.name in NOT_EXPRESSIBLE:
        with pytest.raises(NotExpressible):
            await run_claude_code(claude_code, monkeypatch, trajectory)
        return
    got = await run_claude_code(claude_code, monkeypatch, trajectory)
    difference = DIFFERS.get(trajectory.name)
    wanted = difference[0] if difference else await run_loop(_priced(trajectory))
    wanted = dataclasses.replace(wanted, final_cap=None)  # Claude Code caps no answer
    assert same(got, wanted), f"{got}\n!=\n{wanted}"


def test_what_differs_is_never_a_completed_run_that_did_not_pass() -> None:
    assert all(
        ending.reason is not StopReason.COMPLETED
        for name, (ending, _) in DIFFERS.items()
        if any(t.name == name and (t.verifier or t.typed) for t in TRAJECTORIES)
    )
