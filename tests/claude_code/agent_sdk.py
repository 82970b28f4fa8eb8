"""One Claude Agent SDK session with the adapter, the real CLI sealed off as `ClaudeCode` runs it.

``claude-agent-sdk`` starts the pinned CLI (``cli_path``) in the harness's sealed
environment: the SDK passes its own process environment on, so the session empties it
first, and everything the CLI gets is the harness's. The hooks run in this process,
called by the CLI over the SDK's control protocol.
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from convergent.loop.ending import StopReport

from .claude_cli import ClaudeCode, UnexpectedTraffic, reap
from .fake_anthropic import FakeAnthropic, OutboundTrap

if TYPE_CHECKING:
    from claude_agent_sdk import SdkMcpTool

    from convergent.adapters.claude_agent_sdk import Convergence

__all__ = ["converge"]


async def converge(
    claude_code: ClaudeCode,
    monkeypatch: pytest.MonkeyPatch,
    convergence: Convergence,
    fake: FakeAnthropic,
    prompt: str,
    server: tuple[str, list[SdkMcpTool[Any]]] | None = None,
    *,
    env: dict[str, str] | None = None,
    **options: Any,
) -> StopReport:
    """Run one SDK session through `Convergence.query`; return its report.

    ``server`` names an in-process MCP server and its tools, all of them allowed;
    ``env`` is added to the CLI's environment.
    """
    from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server

    if server is not None:
        name, tools = server
        options["mcp_servers"] = {name: create_sdk_mcp_server(name, tools=tools)}
        options["allowed_tools"] = [f"mcp__{name}__{t.name}" for t in tools]
    with OutboundTrap() as trap:
        token = uuid.uuid4().hex
        environment = {**claude_code.environment(fake, trap, token), **(env or {})}
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
            async for _ in convergence.query(prompt=prompt, options=base):
                pass
        finally:
            monkeypatch.undo()
            leftovers = reap(token, claude_code.root)
        if trap.attempts:
            raise UnexpectedTraffic(f"claude tried to reach the outside: {trap.attempts}")
        assert leftovers == {}
    assert fake.problems == []
    assert convergence.report is not None
    return convergence.report
