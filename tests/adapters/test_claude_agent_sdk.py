"""The Claude Agent SDK hooks, called with the inputs Claude Code sends them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from convergent import Effect, Limits, StopPolicy, StopReason
from convergent.adapters import NotExpressible
from convergent.exceptions import ToolError

from .trajectories import FAILING, MISTAKES, needs_citation

if TYPE_CHECKING:
    from claude_agent_sdk import HookContext, ResultMessage

    from convergent.adapters.claude_agent_sdk import Convergence

CONTEXT: HookContext = {"signal": None}


async def call_hook(convergence: Convergence, event: str, data: dict[str, Any]) -> dict[str, Any]:
    matcher = convergence.options().hooks[event][0]  # type: ignore[index]
    data = {"hook_event_name": event, "session_id": "s", "cwd": "/tmp", **data}
    return await matcher.hooks[0](data, data.get("tool_use_id"), CONTEXT)  # type: ignore[arg-type]


async def read(convergence: Convergence, n: int) -> dict[str, Any]:
    """One read of a.txt: the PreToolUse answer if it denied the call, else PostToolUse's."""
    call = {"tool_name": "Read", "tool_input": {"file_path": "a.txt"}, "tool_use_id": f"t{n}"}
    answer = await call_hook(convergence, "PreToolUse", call)
    if answer:
        return answer
    return await call_hook(convergence, "PostToolUse", {**call, "tool_response": "same text"})


def result(subtype: str = "success", turns: int = 5, text: str = "done") -> ResultMessage:
    from claude_agent_sdk import ResultMessage

    return ResultMessage(
        subtype=subtype,
        duration_ms=1,
        duration_api_ms=1,
        is_error=subtype != "success",
        num_turns=turns,
        session_id="s",
        result=text,
    )


async def test_a_repeated_read_runs_gets_the_note_then_the_request_for_the_answer() -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(tools={"Read": True})
    assert await read(convergence, 1) == {}
    assert await read(convergence, 2) == {}
    # a read runs (a poll may say something new): the note comes after its result
    noted = await read(convergence, 3)
    assert noted["hookSpecificOutput"]["additionalContext"].startswith(
        "Note: you have requested Read("
    )
    assert "continue_" not in noted
    stopped = await read(convergence, 4)
    asked = stopped["hookSpecificOutput"]["additionalContext"]
    assert asked.startswith("The run has stopped (Read(")  # the answer after the stop
    assert "continue_" not in stopped
    stop = {"stop_hook_active": False, "last_assistant_message": "what I found"}
    assert await call_hook(convergence, "Stop", stop) == {}
    report = convergence.finish(result(turns=5, text="what I found"))
    assert (report.reason, report.output) == (StopReason.STALLED, "what I found")


async def test_a_repeated_undeclared_call_runs_gets_the_note_then_its_repeat_is_denied() -> None:
    """A call that declares nothing runs and is judged on its result; once the model was
    told it repeats, the same call again (no time passed) does not run."""
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(tools={"Bash": None})
    call = {"tool_name": "Bash", "tool_input": {"command": "make status"}}
    answers = []
    for n in range(4):
        pre = await call_hook(convergence, "PreToolUse", {**call, "tool_use_id": f"t{n}"})
        if not pre:
            done = {**call, "tool_use_id": f"t{n}", "tool_response": "running"}
            pre = await call_hook(convergence, "PostToolUse", done)
        answers.append(pre)
    assert answers[:2] == [{}, {}]
    noted = answers[2]["hookSpecificOutput"]
    assert noted["hookEventName"] == "PostToolUse"
    assert noted["additionalContext"].startswith("Note: you have requested Bash(")
    denied = answers[3]["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny"
    assert denied["permissionDecisionReason"].startswith("The run has stopped (Bash(")
    assert "continue_" not in answers[3]


async def test_a_call_in_the_answer_after_the_stop_ends_the_session() -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(tools={"Read": True})
    for n in range(4):
        await read(convergence, n)
    again = await read(convergence, 5)
    assert again["continue_"] is False
    assert again["stopReason"].startswith("stalled: Read(")


async def test_changing_results_are_progress() -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(tools={"Bash": None})
    for n in range(6):
        call = {
            "tool_name": "Bash",
            "tool_input": {"command": "make status"},
            "tool_use_id": f"t{n}",
        }
        assert await call_hook(convergence, "PreToolUse", call) == {}
        await call_hook(convergence, "PostToolUse", {**call, "tool_response": f"{n * 20}%"})
    assert convergence.finish(result()).reason is StopReason.COMPLETED


async def test_failing_calls_get_a_nudge_then_the_request_for_the_answer() -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence()
    answers = []
    for n in range(FAILING + 1):
        call = {
            "tool_name": "WebFetch",
            "tool_input": {"url": f"https://x/{n}"},
            "tool_use_id": f"t{n}",
        }
        await call_hook(convergence, "PreToolUse", call)
        answers.append(
            await call_hook(convergence, "PostToolUseFailure", {**call, "error": "503 unavailable"})
        )
    assert answers[: FAILING - 1] == [{}] * (FAILING - 1)
    noted = answers[FAILING - 1]["hookSpecificOutput"]["additionalContext"]
    assert noted.startswith(f"Note: tool calls have failed in {FAILING} steps in a row")
    asked = answers[FAILING]["hookSpecificOutput"]["additionalContext"]
    stopped = f"tool calls failed in {FAILING + 1} steps in a row"
    assert asked.startswith(f"The run has stopped ({stopped}")
    # a call instead of the answer is denied, and ends the session
    call = {"tool_name": "WebFetch", "tool_input": {"url": "https://x/n"}, "tool_use_id": "tn"}
    denied = await call_hook(convergence, "PreToolUse", call)
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert denied["hookSpecificOutput"]["permissionDecisionReason"].startswith(
        f"not executed: {stopped}"
    )
    assert denied["continue_"] is False
    assert convergence.finish(result(turns=FAILING + 2)).reason is StopReason.TOOL_ERROR


async def test_a_stopped_session_is_not_kept_going_by_the_verifier() -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(verifier=needs_citation, policy=StopPolicy(on_tool_error="stop"))
    call = {"tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": "t1"}
    await call_hook(convergence, "PreToolUse", call)
    await call_hook(convergence, "PostToolUseFailure", {**call, "error": "make: no rule"})
    stop = {"stop_hook_active": False, "last_assistant_message": "a draft"}
    assert await call_hook(convergence, "Stop", stop) == {}  # no feedback, no block
    report = convergence.finish(result(turns=2, text="a draft"))
    assert (report.reason, report.output) == (StopReason.TOOL_ERROR, "a draft")


async def test_a_wrapped_tools_fatal_error_stops_the_run_from_post_tool_use() -> None:
    from claude_agent_sdk import tool

    from convergent.adapters.claude_agent_sdk import Convergence

    @tool("pay", "Charge the card", {"amount": int})
    async def pay(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolError("the card was cancelled", fatal=True)

    @tool("quote", "Price a basket", {"basket": str})
    async def quote(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("unknown item")

    convergence = Convergence()
    wrapped_pay, wrapped_quote = convergence.tools(pay, quote)
    assert await wrapped_quote.handler({"basket": "x"}) == {
        "content": [{"type": "text", "text": "quote raised ValueError: unknown item"}],
        "is_error": True,
    }
    answer = await wrapped_pay.handler({"amount": 5})
    assert answer["is_error"] is False  # so that PostToolUse, which can end a session, gets it
    call = {"tool_name": "mcp__shop__pay", "tool_input": {"amount": 5}, "tool_use_id": "t1"}
    await call_hook(convergence, "PreToolUse", call)
    stopped = await call_hook(
        convergence, "PostToolUse", {**call, "tool_response": answer["content"]}
    )
    asked = stopped["hookSpecificOutput"]["additionalContext"]
    assert asked.startswith("The run has stopped (pay failed: the card was cancelled)")
    assert convergence.driver.stop is not None
    assert convergence.driver.stop.reason is StopReason.TOOL_ERROR


async def test_a_response_recorded_after_its_first_call_ran_counts_each_call_once() -> None:
    from claude_agent_sdk import AssistantMessage, ToolUseBlock

    from convergent.adapters.claude_agent_sdk import Convergence

    # Claude Code runs a call as soon as its block arrives: the response (both calls) is
    # recorded between the first call's result and the second call
    convergence = Convergence()
    notes = []
    for response in range(FAILING // 2 + 1):
        ids = [f"t{response}a", f"t{response}b"]
        calls = [
            {"tool_name": "WebFetch", "tool_input": {"url": f"https://x/{i}"}, "tool_use_id": i}
            for i in ids
        ]
        for n, call in enumerate(calls):
            await call_hook(convergence, "PreToolUse", call)
            failure = {**call, "error": "503 unavailable"}
            answer = await call_hook(convergence, "PostToolUseFailure", failure)
            notes.append(answer.get("hookSpecificOutput", {}).get("additionalContext", ""))
            if n == 0:
                blocks = [ToolUseBlock(id=i, name="WebFetch", input={}) for i in ids]
                convergence.record(AssistantMessage(content=blocks, model="m", message_id=ids[0]))
    # one failing step per call (no stream says the response ended before the first call's
    # result): the note comes at the FAILING-th call, the stop at the next
    assert convergence.driver.monitor.state.failing_steps == FAILING + 1
    assert [bool(note) for note in notes] == [False] * (FAILING - 1) + [True] * 2 + [False]
    assert notes[FAILING - 1].startswith(f"Note: tool calls have failed in {FAILING} steps")
    assert notes[FAILING].startswith(f"The run has stopped (tool calls failed in {FAILING + 1}")


async def test_a_response_streamed_to_its_end_before_its_first_result_is_one_step() -> None:
    """Claude Code starts a call as its block arrives; once the stream has shown the
    response's other calls, the first call's result does not end the step: the
    response's calls fail as one step, as in the loop."""
    from claude_agent_sdk import AssistantMessage, StreamEvent, ToolUseBlock

    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence()
    ids = ["t0a", "t0b"]
    calls = [
        {"tool_name": "WebFetch", "tool_input": {"url": f"https://x/{i}"}, "tool_use_id": i}
        for i in ids
    ]
    blocks = [ToolUseBlock(id=i, name="WebFetch", input={}) for i in ids]
    start = {"type": "message_start", "message": {"id": "m0", "usage": {"input_tokens": 10}}}
    convergence.record(StreamEvent(uuid="u", session_id="s", event=start))
    convergence.record(AssistantMessage(content=blocks[:1], model="m", message_id="m0"))
    await call_hook(convergence, "PreToolUse", calls[0])
    # the rest of the response streams in while the first call runs
    convergence.record(AssistantMessage(content=blocks[1:], model="m", message_id="m0"))
    end = {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}}
    convergence.record(StreamEvent(uuid="u", session_id="s", event=end))
    await call_hook(convergence, "PostToolUseFailure", {**calls[0], "error": "503"})
    assert convergence.driver.monitor.state.failing_steps == 0  # the step goes on
    await call_hook(convergence, "PreToolUse", calls[1])
    await call_hook(convergence, "PostToolUseFailure", {**calls[1], "error": "503"})
    assert convergence.driver.monitor.state.failing_steps == 1


async def test_a_note_due_when_a_step_ends_without_all_its_results_comes_with_the_next() -> None:
    from claude_agent_sdk import AssistantMessage, ToolUseBlock

    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(tools={"Read": True})
    assert await read(convergence, 1) == {} and await read(convergence, 2) == {}
    # the third read's response also held a call whose result never came back
    blocks = [ToolUseBlock(id=i, name="Read", input={}) for i in ("t3", "lost")]
    convergence.record(AssistantMessage(content=blocks, model="m", message_id="m3"))
    assert await read(convergence, 3) == {}  # the step waits for the lost call
    # the next call (another file) ends that step; its note goes with this call's result
    call = {"tool_name": "Read", "tool_input": {"file_path": "b.txt"}, "tool_use_id": "t4"}
    assert await call_hook(convergence, "PreToolUse", call) == {}
    answer = await call_hook(convergence, "PostToolUse", {**call, "tool_response": "b text"})
    note = answer["hookSpecificOutput"]["additionalContext"]
    assert note.startswith("Note: you have requested Read(")


async def test_recorded_messages_count_the_requests() -> None:
    from claude_agent_sdk import AssistantMessage, TextBlock

    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence()
    for n in range(3):
        message = AssistantMessage(
            content=[TextBlock(f"step {n}")],
            model="m",
            message_id=f"msg{n}",
            usage={"input_tokens": 10, "output_tokens": 2},
        )
        assert convergence.record(message) is None
        assert convergence.record(message) is None  # a response seen twice is one request
    report = convergence.record(result(turns=4, text=""))
    assert report is not None and report.reason is StopReason.COMPLETED
    assert (report.cycles, report.output) == (3, "step 2")  # not Claude Code's num_turns
    assert (report.usage.requests, report.usage.input_tokens) == (3, 30)


async def test_the_stop_hook_blocks_until_the_verifier_passes() -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(verifier=needs_citation)
    blocked = await call_hook(
        convergence, "Stop", {"stop_hook_active": False, "last_assistant_message": "a draft"}
    )
    assert blocked == {
        "decision": "block",
        "reason": "Verification failed: cite the source as [source]. Continue working on the task.",
    }
    passed = await call_hook(
        convergence, "Stop", {"stop_hook_active": True, "last_assistant_message": "it [source]"}
    )
    assert passed == {}
    report = convergence.finish(result(turns=2, text="it [source]"))
    assert (report.reason, report.output) == (StopReason.COMPLETED, "it [source]")


def test_limits_become_the_sdks_own_options() -> None:
    from claude_agent_sdk import ClaudeAgentOptions

    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(Limits(max_cycles=7, max_cost=0.5))
    options = convergence.options(ClaudeAgentOptions(max_turns=99))
    # a turn more than max_cycles: the answer after a stop at max_cycles
    assert (options.max_turns, options.max_budget_usd) == (8, 0.5)
    without = Convergence(Limits(max_cycles=7), policy=StopPolicy(final_answer=False)).options()
    assert without.max_turns == 7
    report = convergence.finish(result("error_max_turns", turns=7, text=""))
    assert (report.reason, report.detail) == (StopReason.MAX_CYCLES, "reached max_cycles=7")


def test_a_token_budget_is_not_expressible() -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    with pytest.raises(NotExpressible, match="token or wall-time budget"):
        Convergence(Limits(max_total_tokens=1000))


async def _answers(convergence: Convergence, texts: list[str]) -> list[dict[str, Any]]:
    """The Stop hook's answers to ``texts``, each given after the one before was blocked."""
    answers = []
    for n, text in enumerate(texts):
        stop = {"stop_hook_active": n > 0, "last_assistant_message": text}
        answers.append(await call_hook(convergence, "Stop", stop))
    return answers


async def test_the_last_block_claude_code_delivers_asks_for_the_answer_after_the_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from convergent.adapters.claude_agent_sdk import Convergence

    monkeypatch.setenv("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "3")
    convergence = Convergence(verifier=needs_citation)
    convergence.options()  # reads the cap from the environment the CLI gets
    answers = await _answers(convergence, ["draft 1", "draft 2", "draft 3", "my best answer"])
    assert [a.get("decision") for a in answers] == ["block", "block", "block", None]
    assert answers[1]["reason"].startswith("Verification failed:")
    detail = (
        "the answer (Claude Code delivers at most 3 stop-hook blocks in a row) was rejected "
        "3 times in a row"
    )
    assert answers[2]["reason"].startswith(f"The run has stopped ({detail})")
    report = convergence.finish(result(turns=4, text="my best answer"))
    assert (report.reason, report.output) == (StopReason.STALLED, "my best answer")
    assert report.detail == detail


async def test_a_session_that_ends_on_a_rejected_answer_is_never_completed() -> None:
    """Claude Code ended the turn on a block it would not deliver (a lower cap than the
    adapter knew of): the report says so instead of ``completed``."""
    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(verifier=needs_citation)
    assert (await _answers(convergence, ["a draft"]))[0]["decision"] == "block"
    report = convergence.finish(result(turns=1, text="a draft"))
    assert report.reason is StopReason.STALLED
    assert report.detail == (
        "the answer (the session ended on it: Claude Code delivers only so many stop-hook "
        "blocks in a row) was rejected 1 times in a row"
    )


async def test_an_output_type_is_checked_at_the_stop() -> None:
    from convergent.adapters.claude_agent_sdk import Convergence
    from convergent.output import OutputSpec

    from .trajectories import INVALID, NOTES, VALID, Report

    convergence = Convergence(output=OutputSpec.of_type(Report))
    answers = await _answers(convergence, [INVALID, VALID])
    assert answers[0]["reason"].startswith(NOTES["output"])
    assert answers[1] == {}
    report = convergence.finish(result(turns=2, text=VALID))
    assert (report.reason, report.output) == (StopReason.COMPLETED, VALID)


def stream(
    convergence: Convergence,
    key: str,
    blocks: list[Any],
    stop_reason: str,
    usage: tuple[int, int],
) -> None:
    """A response as Claude Code sends it with partial messages: the stream's start, the
    message of its blocks, the stream's end (its stop reason and output tokens)."""
    from claude_agent_sdk import AssistantMessage, StreamEvent

    started = {"id": key, "model": "claude-sonnet-4-5", "usage": {"input_tokens": usage[0]}}
    ended = {"stop_reason": stop_reason}
    start = {"type": "message_start", "message": started}
    convergence.record(StreamEvent(uuid="u", session_id="s", event=start))
    convergence.record(AssistantMessage(content=blocks, model="m", message_id=key))
    end = {"type": "message_delta", "delta": ended, "usage": {"output_tokens": usage[1]}}
    convergence.record(StreamEvent(uuid="u", session_id="s", event=end))


async def test_a_cost_budget_stops_before_a_request_that_could_overspend_it() -> None:
    """Each response is costed from the stream at the price table's price of the model
    Claude Code names; $0.0045 a response ($3 and $15 a million) under $0.03."""
    from claude_agent_sdk import ToolUseBlock

    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(Limits(max_cost=0.03), tools={"Read": True})
    answers = []
    for n in range(8):
        blocks = [ToolUseBlock(id=f"t{n}", name="Read", input={"file_path": f"{n}.txt"})]
        stream(convergence, f"m{n}", blocks, "tool_use", (1000, 100))
        call = {
            "tool_name": "Read",
            "tool_input": {"file_path": f"{n}.txt"},
            "tool_use_id": f"t{n}",
        }
        assert await call_hook(convergence, "PreToolUse", call) == {}
        answer = await call_hook(convergence, "PostToolUse", {**call, "tool_response": f"{n}"})
        answers.append(answer.get("hookSpecificOutput", {}).get("additionalContext", ""))
        if convergence.driver.stop is not None:
            break
    assert convergence.driver.stop is not None
    assert convergence.driver.stop.reason is StopReason.BUDGET_EXHAUSTED
    # four responses ($0.018): a fifth and room for the answer would not fit
    assert answers[-1].startswith("The run has stopped (cost 0.0180 reached max_cost=0.03 (")
    assert convergence.driver.usage.cost == pytest.approx(0.018)


async def test_the_parts_of_a_reply_cut_at_the_token_limit_make_the_answer() -> None:
    from claude_agent_sdk import TextBlock

    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence()
    stream(convergence, "m1", [TextBlock("The answer is forty")], "max_tokens", (100, 20))
    # Claude Code asks the model to go on by itself; the hook sees the second part only
    stream(convergence, "m2", [TextBlock("-two.")], "end_turn", (100, 5))
    stop = {"stop_hook_active": False, "last_assistant_message": "-two."}
    assert await call_hook(convergence, "Stop", stop) == {}
    report = convergence.finish(result(turns=2, text="-two."))
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 2)
    assert report.output == "The answer is forty-two."


async def test_calls_claude_code_refused_itself_are_the_models_mistakes() -> None:
    """A call of a tool Claude Code does not have reaches no hook: its result counts."""
    from claude_agent_sdk import AssistantMessage, ToolResultBlock, ToolUseBlock, UserMessage

    from convergent.adapters.claude_agent_sdk import Convergence

    convergence = Convergence(tools={"Read": True})
    for n in range(MISTAKES + 1):
        blocks = [ToolUseBlock(id=f"t{n}", name=f"made_up_{n}", input={})]
        convergence.record(AssistantMessage(content=blocks, model="m", message_id=f"m{n}"))
        refused = "<tool_use_error>Error: No such tool available: made_up</tool_use_error>"
        convergence.record(
            UserMessage(
                content=[ToolResultBlock(tool_use_id=f"t{n}", content=refused, is_error=True)]
            )
        )
    stop = convergence.driver.stop
    assert stop is not None and stop.reason is StopReason.STALLED
    assert stop.detail.startswith("the model made calls the run cannot make")
    stop_hook = {"stop_hook_active": False, "last_assistant_message": "what I know"}
    assert await call_hook(convergence, "Stop", stop_hook) == {}
    report = convergence.finish(result(turns=MISTAKES + 2, text="what I know"))
    assert (report.cycles, report.output, report.output_after_stop) == (
        MISTAKES + 1,
        "what I know",
        True,
    )


def test_the_tools_claude_code_lists_get_their_declared_effects() -> None:
    """Claude Code's own reads are reads and its edits writes, a wrapped SDK tool's MCP
    annotations say what it does, and the caller's declarations come first."""
    from claude_agent_sdk import SystemMessage, tool
    from mcp.types import ToolAnnotations

    from convergent.adapters.claude_agent_sdk import Convergence

    @tool("lookup", "Look a key up", {"key": str}, annotations=ToolAnnotations(readOnlyHint=True))
    async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "found"}]}

    @tool("drop", "Drop a table", {"name": str}, annotations=ToolAnnotations(destructiveHint=True))
    async def drop(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "dropped"}]}

    @tool("tag", "Tag a row", {"row": int}, annotations=ToolAnnotations(idempotentHint=True))
    async def tag(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "tagged"}]}

    convergence = Convergence(tools={"Bash": True})
    convergence.tools(lookup, drop, tag)
    names = [
        "Read",
        "Edit",
        "Write",
        "Bash",
        "Task",
        *(f"mcp__db__{n}" for n in ("lookup", "drop")),
    ]
    names.append("mcp__db__tag")
    convergence.record(SystemMessage(subtype="init", data={"type": "system", "tools": names}))
    assert convergence.driver.monitor.tools == {
        "Read": Effect.READ,
        "Edit": Effect.WRITE,
        "Write": Effect.IDEMPOTENT,
        "Bash": True,
        "Task": Effect.UNDECLARED,
        "mcp__db__lookup": Effect.READ,
        "mcp__db__drop": Effect.WRITE,
        "mcp__db__tag": Effect.IDEMPOTENT,
    }
    assert convergence.driver.monitor.effect("Bash") is Effect.READ
