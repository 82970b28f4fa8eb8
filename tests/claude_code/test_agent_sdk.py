"""The Claude Agent SDK adapter's hooks in the real Claude Code CLI, played by the fake."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from convergent import Limits, StopPolicy, StopReason
from convergent.exceptions import ToolError
from convergent.extensions import Verification

from .agent_sdk import converge
from .claude_cli import ClaudeCode
from .fake_anthropic import FakeAnthropic, MessagesRequest, Reply, text, tool_use

pytestmark = [pytest.mark.slow, pytest.mark.claude_code]

NUDGE = "Not run: you have requested Read("
NOTE = "Note: you have requested Read("
ASKED = "The run has stopped ("


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


async def test_a_repeated_read_gets_the_note_then_the_request_for_the_answer(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    notes = claude_code.project / "notes.txt"
    notes.write_text("TODO: write the report\n")
    reads = [tool_use("Read", {"file_path": str(notes)}) for _ in range(4)]
    script = [*reads, text("The notes say the report is to be written."), text("never asked")]
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

    assert len(fake.requests) == 5 and fake.unconsumed() == 1  # the answer, then nothing
    noted = [r.mentions(NOTE) for r in fake.requests]
    assert noted == [False, False, False, True, True]  # a read runs; the note follows it
    assert [r.startswith("1\tTODO: write the report") for r in tool_results(fake.requests[3])]
    assert fake.requests[4].mentions(ASKED)  # the request for the answer after the stop
    assert (report.reason, report.cycles) == (StopReason.STALLED, 4)  # as convergent's loop
    assert report.detail.startswith('Read(file_path="')
    assert (report.output, report.output_after_stop) == (
        "The notes say the report is to be written.",
        True,
    )
    assert report.usage.requests == 5 and report.usage.input_tokens == 5 * 20


@pytest.mark.parametrize("changing", [True, False], ids=["changing", "same"])
async def test_post_tool_use_records_results_for_progress(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch, changing: bool
) -> None:
    from claude_agent_sdk import tool

    from convergent.adapters.claude_agent_sdk import Convergence

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
    else:  # the same result three times is a stall: noted, then stopped
        assert len(polls) == 4  # a read runs, and is judged on its result
        noted = [r.mentions(NOTE.replace("Read", "mcp__ci__poll")) for r in fake.requests]
        assert noted == [False, False, False, True, True]
        assert fake.requests[4].mentions(ASKED)
        assert (report.reason, report.cycles) == (StopReason.STALLED, 4)
        assert (report.output, report.output_after_stop) == ("", False)  # a call, not an answer


async def test_the_stop_hook_runs_the_completion_checks(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

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


async def test_a_fatal_tool_error_stops_the_run_and_asks_for_the_answer(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claude_agent_sdk import tool

    from convergent.adapters.claude_agent_sdk import Convergence

    @tool("pay", "Charge the card", {"amount": int})
    async def pay(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolError("the card was cancelled", fatal=True)

    convergence = Convergence()
    script: Sequence[Reply] = [
        tool_use("mcp__shop__pay", {"amount": 120}),
        text("Nothing was paid: the customer needs to give another card."),
    ]
    with FakeAnthropic(script) as fake:
        report = await converge(
            claude_code,
            monkeypatch,
            convergence,
            fake,
            "pay the invoice",
            server=("shop", convergence.tools(pay)),
        )

    assert len(fake.requests) == 2 and fake.requests[1].mentions(ASKED)
    assert (report.reason, report.cycles, report.detail) == (
        StopReason.TOOL_ERROR,
        1,  # as in convergent's loop: no cycle after a fatal error
        "pay failed: the card was cancelled",
    )
    assert report.output == "Nothing was paid: the customer needs to give another card."
    assert report.output_after_stop


async def test_a_tool_error_streak_is_nudged_then_the_answer_asked_for(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claude_agent_sdk import tool

    from convergent.adapters.claude_agent_sdk import Convergence

    fetched: list[str] = []

    @tool("fetch", "Fetch a page", {"url": str})
    async def fetch(arguments: dict[str, Any]) -> dict[str, Any]:
        fetched.append(arguments["url"])
        raise ConnectionError("503 service unavailable")

    convergence = Convergence()
    failing = StopPolicy().max_failing_steps or 0
    calls = [tool_use("mcp__web__fetch", {"url": f"https://x/{n}"}) for n in range(failing + 2)]
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
    note = f"Note: tool calls have failed in {failing} steps in a row"
    nudged = [r.mentions(note) for r in fake.requests]
    assert nudged == [False] * failing + [True, True]
    assert fake.requests[failing + 1].mentions(ASKED)
    assert fetched == [f"https://x/{n}" for n in range(failing + 1)]  # the last never ran
    stopped = failing + 1
    assert (report.reason, report.cycles) == (StopReason.TOOL_ERROR, stopped)  # as in the loop
    assert report.detail.startswith(
        f"tool calls failed in {stopped} steps in a row; the last: {error}"
    )
    assert not report.output_after_stop  # it called a tool instead of answering: ended


def cites(answer: str) -> Verification:
    """A verifier the drafts never pass."""
    return Verification("[source]" in answer, "cite the source as [source]")


DRAFTS = [*(text(f"draft {n}") for n in range(3)), text("my best answer"), text("never")]
"""Three answers that fail the verifier, then the answer after the stop."""


async def test_a_verifier_that_never_passes_ends_at_max_cycles_with_an_answer(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(Limits(max_cycles=3), verifier=cites)
    with FakeAnthropic(DRAFTS) as fake:
        report = await converge(claude_code, monkeypatch, convergence, fake, "answer it")

    assert len(fake.requests) == 4 and fake.requests[3].mentions(ASKED)
    assert (report.reason, report.cycles) == (StopReason.MAX_CYCLES, 3)
    assert (report.output, report.output_after_stop) == ("my best answer", True)


async def test_claude_codes_block_cap_ends_a_rejected_answer_stalled_not_completed(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(Limits(max_cycles=20), verifier=cites)
    with FakeAnthropic(DRAFTS) as fake:
        report = await converge(
            claude_code,
            monkeypatch,
            convergence,
            fake,
            "answer it",
            env={"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "3"},
        )

    assert len(fake.requests) == 4 and fake.requests[3].mentions(ASKED)
    assert report.reason is StopReason.STALLED
    assert (report.output, report.output_after_stop) == ("my best answer", True)


async def test_a_limit_ends_the_documented_loop_without_an_exception(
    claude_code: ClaudeCode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code ends a session at max_turns with an error result, and the SDK raises
    ``ResultError`` after it; iterating `Convergence.query` ends with the report instead."""
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(Limits(max_cycles=2), policy=StopPolicy(final_answer=False))
    notes = claude_code.project / "notes.txt"
    notes.write_text("x\n")
    reads = [tool_use("Read", {"file_path": str(notes), "offset": n}) for n in range(1, 4)]
    with FakeAnthropic([*reads, text("never")]) as fake:
        report = await converge(
            claude_code, monkeypatch, convergence, fake, "read", allowed_tools=["Read"]
        )

    assert (report.reason, report.detail) == (StopReason.MAX_CYCLES, "reached max_cycles=2")
