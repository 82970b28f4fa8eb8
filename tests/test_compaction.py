from __future__ import annotations

from collections.abc import Sequence

import pytest

from convergent import (
    Agent,
    Limits,
    ModelError,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    Usage,
    tool,
)
from convergent.compaction import SUMMARY_HEADER, ContextCompacted, ContextCompressor
from convergent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from convergent.state import RunState
from convergent.stop import StopReason
from convergent.testing import answer, call, step

WINDOW = 20_000
ESTIMATOR = ContextCompressor()


@tool(idempotent=True)
def fetch(page: int) -> str:
    """Return a large page.

    Args:
        page: Page number.
    """
    return f"page {page}: " + "lorem ipsum dolor sit amet " * 120


def check_request(messages: Sequence[Message]) -> None:
    """The request keeps system + task and pairs every call with exactly one result."""
    assert isinstance(messages[0], SystemMessage) and messages[0].content == "sys"
    assert isinstance(messages[1], UserMessage) and messages[1].content == "read every page"
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = {call.id for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage):
            assert message.tool_call_id in open_calls, f"orphaned result {message.tool_call_id}"
            open_calls.remove(message.tool_call_id)
    assert not open_calls


class LongRun:
    """Reads 500 pages; reports usage as a provider would (the estimate of the request)."""

    def __init__(self, pages: int, *, summaries_fail: bool = False) -> None:
        self.pages = pages
        self.page = 0
        self.largest = 0
        self.summaries = 0
        self.summaries_fail = summaries_fail

    def __call__(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        size = ESTIMATOR.estimate(messages)
        if not tools:
            self.summaries += 1
            if self.summaries_fail:
                raise ModelError("summariser unavailable")
            return answer(f"Read pages 1-{self.page}.", usage=Usage(input_tokens=size))
        check_request(messages)
        self.largest = max(self.largest, size)
        self.page += 1
        usage = Usage(input_tokens=size, output_tokens=12, requests=1)
        if self.page > self.pages:
            return answer(f"read {self.pages} pages", usage=usage)
        return step(call("fetch", page=self.page), usage=usage)


@pytest.mark.parametrize("summaries_fail", [False, True])
async def test_500_cycles_stay_under_the_window(summaries_fail: bool) -> None:
    script = LongRun(500, summaries_fail=summaries_fail)
    compressor = ContextCompressor(context_window=WINDOW)
    agent = Agent(
        ScriptedModel(script, record_requests=False),
        [fetch],
        system_prompt="sys",
        limits=Limits(max_cycles=600),
        context_policy=compressor,
    )
    result = await agent.run("read every page")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.cycles == 501
    assert script.largest < WINDOW
    events = [e for e in result.events if isinstance(e, ContextCompacted)]
    assert len(events) >= 10
    assert all(e.tokens_after < e.tokens_before and e.window == WINDOW for e in events)
    assert all(e.tokens_before >= 0.92 * WINDOW for e in events)
    assert {e.counted_from for e in events} == {"usage"}
    check_request(result.messages)
    if summaries_fail:
        assert {e.method for e in events} == {"drop"}
        assert all(e.error == "summariser unavailable" for e in events)
        assert "earlier messages were removed" in result.messages[2].content
    else:
        assert {e.method for e in events} == {"summary"}
        assert result.messages[2].content.startswith(SUMMARY_HEADER)
        assert script.summaries == len(events)


async def test_below_the_threshold_nothing_changes() -> None:
    compressor = ContextCompressor(context_window=1_000_000)
    agent = Agent(ScriptedModel(["done"]), system_prompt="sys", context_policy=compressor)
    result = await agent.run("t")
    assert not [e for e in result.events if isinstance(e, ContextCompacted)]


async def test_no_window_means_no_compaction() -> None:
    messages: list[Message] = [UserMessage(content="x" * 100_000)]
    state = RunState(run_id="r", task="t", messages=messages)
    await ContextCompressor().maybe_compact(state, ScriptedModel([]), lambda e: None)
    assert state.messages == messages


async def test_an_oversized_last_result_is_truncated_not_split() -> None:
    messages: list[Message] = [
        SystemMessage(content="sys"),
        UserMessage(content="t"),
        AssistantMessage(tool_calls=(ToolCall(id="a", name="fetch", arguments={"page": 1}),)),
        ToolResultMessage(tool_call_id="a", name="fetch", content="x" * 40_000),
    ]
    state = RunState(run_id="r", task="t", messages=messages)
    events: list[object] = []
    compressor = ContextCompressor(context_window=2_000)
    await compressor.maybe_compact(state, ScriptedModel([]), events.append)
    assert [m.role for m in state.messages] == ["system", "user", "assistant", "tool"]
    assert "characters truncated" in state.messages[-1].content
    assert compressor.estimate(state.messages) < 0.92 * 2_000
    (event,) = events
    assert isinstance(event, ContextCompacted) and event.method == "drop"


def test_fractions_are_validated() -> None:
    with pytest.raises(ValueError, match="threshold"):
        ContextCompressor(threshold=1.5)
