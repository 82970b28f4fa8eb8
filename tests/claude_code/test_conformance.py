"""The conformance trajectories through the Claude Agent SDK adapter and the real Claude Code CLI.

The fake plays each trajectory's model; its tools are in-process SDK tools on one MCP
server, wrapped with `Convergence.tools`. Each trajectory must end as convergent's loop
ends it (see ``tests/adapters/test_conformance.py``), apart from what Claude Code cannot
express (`NOT_EXPRESSIBLE`, refused when the adapter is built) and what it can only end
another way (`DIFFERS`, with why).
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from claude_agent_sdk import SdkMcpTool, tool

from adapters.hosts import run_loop
from adapters.trajectories import (
    READ_ONLY,
    TERMINAL,
    TRAJECTORIES,
    USAGE,
    Ending,
    Report,
    Step,
    Trajectory,
    World,
    ending,
    needs_citation,
)
from convergent import StopReason
from convergent.adapters import NotExpressible
from convergent.adapters.claude_agent_sdk import Convergence
from convergent.output import OutputSpec

from .agent_sdk import converge
from .claude_cli import ClaudeCode
from .fake_anthropic import FakeAnthropic, Reply, Text, ToolUse

pytestmark = [pytest.mark.slow, pytest.mark.claude_code]

SERVER = "w"

_NO_TOKENS = "the hooks see no model request, so a token budget cannot be checked before one"

NOT_EXPRESSIBLE: dict[str, str] = {
    trajectory.name: _NO_TOKENS
    for trajectory in TRAJECTORIES
    if trajectory.limits.max_total_tokens is not None
}
"""Trajectories the Claude Agent SDK adapter refuses, and why."""

_OWN_COST = "Claude Code ends the session at max_budget_usd, costed at its own prices"
_PER_CALL = (
    "Claude Code runs a call as soon as its block arrives, before the response's next one: "
    "a step is one call, and a parallel batch's failures are counted call by call"
)

_CAP_IN_HOOK = (
    "Claude Code refuses the call past a cap in its PreToolUse hook and asks the model "
    "once more: its next reply is the answer, one cycle later and without a final request"
)

DIFFERS: dict[str, tuple[Ending, str]] = {
    "tool_call_cap": (
        Ending(StopReason.BUDGET_EXHAUSTED, 4, "best answer", False, ("budget",)),
        _CAP_IN_HOOK,
    ),
    "parallel_failures": (
        Ending(StopReason.TOOL_ERROR, 4, "", False, ("tool_error", "final")),
        _PER_CALL,
    ),
    "tool_errors_plain": (Ending(StopReason.TOOL_ERROR, 4, "", False), _PER_CALL),
    "cost_budget": (Ending(StopReason.BUDGET_EXHAUSTED, 3, "", False), _OWN_COST),
    "cost_budget_plain": (Ending(StopReason.BUDGET_EXHAUSTED, 3, "", False), _OWN_COST),
}
"""Trajectories Claude Code can only end another way: that ending, and why."""


def _named(name: str) -> str:
    return f"mcp__{SERVER}__{name}"


def _sdk_tool(world: World, name: str) -> SdkMcpTool[Any]:
    method = getattr(world, name)
    parameters = {
        parameter: kind
        for parameter, kind in inspect.get_annotations(method, eval_str=True).items()
        if parameter != "return"
    }

    async def call(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": method(**arguments)}]}

    return tool(name, method.__doc__ or name, parameters)(call)


def _reply(step: Step) -> Reply:
    tokens = {"input_tokens": USAGE[0], "output_tokens": USAGE[1]}
    if isinstance(step, str):
        return Reply([Text(step)], **tokens)
    return Reply([ToolUse(_named(name), dict(arguments)) for name, arguments in step], **tokens)


async def run_claude_code(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch, trajectory: Trajectory
) -> Ending:
    world = World()
    convergence = Convergence(
        trajectory.limits,
        policy=trajectory.policy,
        tools={_named(name): flag for name, flag in READ_ONLY.items()},
        terminal_tools=[_named(name) for name in TERMINAL],
        verifier=needs_citation if trajectory.verifier else None,
        final_answer=trajectory.final_answer,
        output=OutputSpec.of_type(Report) if trajectory.typed else None,
    )
    tools = convergence.tools(*(_sdk_tool(world, name) for name in READ_ONLY))
    with FakeAnthropic([_reply(step) for step in trajectory.steps]) as fake:
        report = await converge(
            claude_code, monkeypatch, convergence, fake, "the task", server=(SERVER, tools)
        )
    seen = [(json.dumps(request.texts(None)), None) for request in fake.requests]
    return ending(report.reason, report.cycles, report.output, report.output_after_stop, seen)


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
    assert got == (difference[0] if difference else await run_loop(trajectory))


def test_what_differs_is_never_a_completed_run_that_did_not_pass() -> None:
    assert all(
        ending.reason is not StopReason.COMPLETED
        for name, (ending, _) in DIFFERS.items()
        if any(t.name == name and (t.verifier or t.typed) for t in TRAJECTORIES)
    )
