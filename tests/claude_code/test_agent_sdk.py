"""The Claude Agent SDK adapter's hooks in the real Claude Code CLI, the model played by the fake.

``claude-agent-sdk`` starts the pinned CLI (``cli_path``) in the harness's sealed
environment: the SDK passes its own process environment on, so the test empties that
first, and everything the CLI gets is the harness's. The hooks run in this process,
called by the CLI over the SDK's control protocol.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, create_sdk_mcp_server, query, tool

from convergent import Limits, StopReason
from convergent.adapters.claude_agent_sdk import Convergence
from convergent.driver import StopReport
from convergent.exceptions import ToolError
from convergent.extensions import Verification

from .claude_cli import ClaudeCode, UnexpectedTraffic, reap
from .fake_anthropic import FakeAnthropic, MessagesRequest, OutboundTrap, Reply, text, tool_use

pytestmark = [pytest.mark.slow, pytest.mark.claude_code]

NUDGE = "Not run: you have requested Read("


async def converge(
    claude_code: ClaudeCode,
    monkeypatch: pytest.MonkeyPatch,
    convergence: Convergence,
    fake: FakeAnthropic,
    prompt: str,
    server: tuple[str, list[SdkMcpTool[Any]]] | None = None,
    **options: Any,
) -> StopReport:
    """Run one SDK session with the adapter's options; return its report.

    ``server`` names an in-process MCP server and its tools, all of them allowed.
    """
    if server is not None:
        name, tools = server
        options["mcp_servers"] = {name: create_sdk_mcp_server(name, tools=tools)}
        options["allowed_tools"] = [f"mcp__{name}__{t.name}" for t in tools]
    with OutboundTrap() as trap:
        token = uuid.uuid4().hex
        environment = claude_code.environment(fake, trap, token)
        for name in list(os.environ):
            monkeypatch.delenv(name)
        monkeypatch.setenv("PATH", environment["PATH"])
        base = ClaudeAgentOptions(
            cli_path=claude_code.binary,
            cwd=claude_code.project,
            env=environment,
            setting_sources=[],
            **options,
        )
        try:
            async for message in query(prompt=prompt, options=convergence.options(base)):
                convergence.record(message)
        finally:
            monkeypatch.undo()
            leftovers = reap(token, claude_code.root)
        if trap.attempts:
            raise UnexpectedTraffic(f"claude tried to reach the outside: {trap.attempts}")
        assert leftovers == {}
    assert fake.problems == []
    assert convergence.report is not None
    return convergence.report


def tool_results(request: MessagesRequest) -> list[str]:
    """The texts of the tool results in the request's last user message."""
    last = [m for m in request.messages if m.get("role") == "user"][-1]
    found = []
    for block in last.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            content = block.get("content")
            if isinstance(content, list):
                content = "".join(str(part.get("text", "")) for part in content)
            found.append(str(content))
    return found


async def test_pre_tool_use_denies_a_stalled_call_with_the_nudge(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = claude_code.project / "notes.txt"
    notes.write_text("TODO: write the report\n")
    reads = [tool_use("Read", {"file_path": str(notes)}) for _ in range(4)]
    script = [*reads, text("never asked")]
    convergence = Convergence(Limits(max_cycles=20), tools={"Read": True})

    with FakeAnthropic(script) as fake:
        report = await converge(
            claude_code,
            monkeypatch,
            convergence,
            fake,
            "what do my notes say?",
            allowed_tools=["Read"],
        )

    assert len(fake.requests) == 4 and fake.unconsumed() == 1  # nothing after the stop
    assert [NUDGE in r for r in tool_results(fake.requests[2])] == [False]
    assert [r.startswith("1\tTODO: write the report") for r in tool_results(fake.requests[2])]
    denied = tool_results(fake.requests[3])
    assert len(denied) == 1 and NUDGE in denied[0]  # the reason the model reads
    assert "3 times, and it returned the same result each time" in denied[0]
    assert (report.reason, report.cycles) == (StopReason.STALLED, 4)  # as convergent's loop
    assert report.detail.startswith('Read(file_path="')
    assert report.usage.requests == 4 and report.usage.input_tokens == 4 * 20


@pytest.mark.parametrize("changing", [True, False], ids=["changing", "same"])
async def test_post_tool_use_records_results_for_progress(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch, changing: bool
) -> None:
    polls: list[int] = []

    @tool("poll", "The build's progress", {"job": str})
    async def poll(arguments: dict[str, Any]) -> dict[str, Any]:
        polls.append(1)
        done = min(25 * len(polls), 100) if changing else 25
        return {"content": [{"type": "text", "text": f"{arguments['job']}: {done}%"}]}

    calls = [tool_use("mcp__ci__poll", {"job": "build"}) for _ in range(5)]
    convergence = Convergence(tools={"mcp__ci__poll": True})

    with FakeAnthropic([*calls, text("the build finished")]) as fake:
        report = await converge(
            claude_code,
            monkeypatch,
            convergence,
            fake,
            "wait for the build",
            server=("ci", [poll]),
        )

    results = [tool_results(request) for request in fake.requests[1:]]
    if changing:  # results that change are progress: every poll runs
        assert len(polls) == 5 and results[-1] == ["build: 100%"]
        assert (report.reason, report.cycles, report.output) == (
            StopReason.COMPLETED,
            6,
            "the build finished",
        )
    else:  # the same result three times is a stall: nudged, then stopped
        assert len(polls) == 2 and NUDGE.replace("Read", "mcp__ci__poll") in results[2][0]
        assert (report.reason, report.cycles) == (StopReason.STALLED, 4)


async def test_the_stop_hook_runs_the_completion_checks(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str] = []

    def cites(answer: str) -> Verification:
        checked.append(answer)
        return Verification("[source]" in answer, "cite the source as [source]")

    convergence = Convergence(verifier=cites)
    script = [text("a draft"), text("the answer [source]"), text("never asked")]
    with FakeAnthropic(script) as fake:
        report = await converge(claude_code, monkeypatch, convergence, fake, "answer it")

    assert checked == ["a draft", "the answer [source]"]
    assert len(fake.requests) == 2
    feedback = fake.requests[1].last_user_texts[-1]
    assert "Verification failed: cite the source as [source]." in feedback
    assert (report.reason, report.cycles, report.output) == (
        StopReason.COMPLETED,
        2,
        "the answer [source]",
    )


async def test_a_fatal_tool_error_ends_the_session(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    @tool("pay", "Charge the card", {"amount": int})
    async def pay(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolError("the card was cancelled", fatal=True)

    convergence = Convergence()
    script: Sequence[Reply] = [tool_use("mcp__shop__pay", {"amount": 120}), text("never asked")]
    with FakeAnthropic(script) as fake:
        report = await converge(
            claude_code,
            monkeypatch,
            convergence,
            fake,
            "pay the invoice",
            server=("shop", convergence.tools(pay)),
        )

    assert len(fake.requests) == 1  # as in convergent's loop: no request after a fatal error
    assert (report.reason, report.cycles, report.detail) == (
        StopReason.TOOL_ERROR,
        1,
        "pay failed: the card was cancelled",
    )


async def test_a_tool_error_streak_is_nudged_then_ends_the_session_at_the_next_call(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code does not end a session from ``PostToolUseFailure``: the next call does."""
    fetched: list[str] = []

    @tool("fetch", "Fetch a page", {"url": str})
    async def fetch(arguments: dict[str, Any]) -> dict[str, Any]:
        fetched.append(arguments["url"])
        raise ConnectionError("503 service unavailable")

    convergence = Convergence()
    calls = [tool_use("mcp__web__fetch", {"url": f"https://x/{n}"}) for n in range(5)]
    with FakeAnthropic([*calls, text("never asked")]) as fake:
        report = await converge(
            claude_code,
            monkeypatch,
            convergence,
            fake,
            "fetch the pages",
            server=("web", convergence.tools(fetch)),
        )

    error = "fetch raised ConnectionError: 503 service unavailable"
    assert tool_results(fake.requests[1])[0].startswith(error)  # in convergent's words
    nudged = [r.mentions("Note: tool calls have failed in 3 steps in a row") for r in fake.requests]
    assert nudged == [False, False, False, True, True]
    assert fetched == [f"https://x/{n}" for n in range(4)]  # the fifth call never ran
    assert (report.reason, report.cycles) == (StopReason.TOOL_ERROR, 5)  # the loop: 4
    assert report.detail == f"tool calls failed in 4 steps in a row; the last: {error}"
