"""Running one call: timers only for tools that wait, and threads that outlive a timeout."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from convergent import Agent, ScriptedModel, StopReason, ToolCall, tool
from convergent.loop import executor as _executor
from convergent.loop.executor import invoke
from convergent.messages import CallOutcome
from convergent.testing import answer, call, step


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float | None]]:
    """Every timeout the executor arms."""
    seen: list[float | None] = []
    real = asyncio.timeout

    def counting(delay: float | None) -> AbstractAsyncContextManager[Any]:
        seen.append(delay)
        return real(delay)

    monkeypatch.setattr(_executor.asyncio, "timeout", counting)
    yield seen


@tool(timeout=5.0)
async def quick(n: int) -> int:
    """Answer at once.

    Args:
        n: A number.
    """
    return n * 2


@tool(timeout=5.0)
async def waits(n: int) -> int:
    """Answer after yielding to the event loop.

    Args:
        n: A number.
    """
    await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    return n + 1


@tool(timeout=0.05)
async def hangs() -> str:
    """Never answer."""
    await asyncio.Event().wait()
    return "unreachable"


def the(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=name, name=name, arguments=arguments)


TOOLS = {t.name: t for t in (quick, waits, hangs)}


async def test_a_tool_that_never_waits_arms_no_timer(armed: list[float | None]) -> None:
    assert await invoke(the("quick", n=4), TOOLS) == (CallOutcome.OK, "8", False)
    assert armed == []


async def test_a_tool_that_waits_gets_its_timeout(armed: list[float | None]) -> None:
    assert await invoke(the("waits", n=4), TOOLS) == (CallOutcome.OK, "5", False)
    assert armed == [5.0]


async def test_a_tool_that_hangs_after_waiting_times_out(armed: list[float | None]) -> None:
    kind, text, _ = await invoke(the("hangs"), TOOLS)
    assert (kind, text) == (CallOutcome.FAILED, "hangs timed out after 0.05s")


async def test_cancelling_the_run_reaches_a_waiting_tool() -> None:
    started, cleaned = asyncio.Event(), asyncio.Event()

    @tool(timeout=None)
    async def slow() -> str:
        """Wait until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.set()
        return "unreachable"

    task = asyncio.ensure_future(invoke(the("slow"), {"slow": slow}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set()


async def test_a_file_tool_waits_for_a_timed_out_one_still_writing(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    release = threading.Event()

    @tool(timeout=0.05, modifies_files=True)
    def slow_write(path: str) -> str:
        """Write a file slowly.

        Args:
            path: File name.
        """
        release.wait(5)
        time.sleep(0.05)
        (tmp_path / path).write_text("complete")
        return "written"

    @tool(modifies_files=True)
    def check(path: str) -> str:
        """Report what the file holds.

        Args:
            path: File name.
        """
        return (tmp_path / path).read_text() if (tmp_path / path).exists() else "missing"

    def script(messages: Any, tools: Any) -> Any:
        turns = sum(m.role == "assistant" for m in messages)
        if turns == 0:
            return step(call("slow_write", path="out.txt"))
        if turns == 1:
            release.set()
            return step(call("check", path="out.txt"))
        return answer("done")

    result = await Agent(ScriptedModel(script), [slow_write, check]).run("t")
    assert result.stop_reason is StopReason.COMPLETED
    assert [r.result for r in result.tool_calls] == [
        "slow_write timed out after 0.05s",
        "complete",
    ]
    assert target.read_text() == "complete"
