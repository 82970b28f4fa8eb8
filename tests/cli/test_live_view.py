"""The live view prints the model's text as it streams, labelled thinking before calls."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from chat_stub import ChatStub
from convergent import (
    CycleStarted,
    Event,
    ModelResponded,
    RunStarted,
    RunStopped,
    StopReason,
    TextDelta,
    ToolCall,
    ToolFinished,
    Usage,
)
from convergent.cli._live import LiveView
from convergent.events import Nudged, Redirected, RunPaused, RunUnpaused, ToolCallDelta

CALL = ToolCall(id="c1", name="calculator", arguments={"expression": "17 * 23"})


def run_events(thinking: str = "17 * 23 = 341") -> list[Event]:
    """A two-cycle run as a streaming model tells it: a guess, the calculator, the answer."""
    common: dict[str, Any] = {"run_id": "r", "finish_reason": None, "usage": Usage()}
    common |= {"metadata": {}, "duration": 1.0, "first_delta": 0.5}
    return [
        RunStarted(run_id="r", cycle=0, task="What is 17 * 23?", model="m", tools=("calculator",)),
        CycleStarted(run_id="r", cycle=1, message_count=1),
        TextDelta(run_id="r", cycle=1, text=thinking[:8]),
        TextDelta(run_id="r", cycle=1, text=thinking[8:]),
        ToolCallDelta(run_id="r", cycle=1, index=0, call_id="c1", name="calculator", arguments=""),
        ModelResponded(cycle=1, content=thinking, tool_calls=(CALL,), **common),
        ToolFinished(
            run_id="r",
            cycle=1,
            call_id="c1",
            name="calculator",
            ok=True,
            outcome="ok",
            result="391",
            duration=0.001,
        ),
        CycleStarted(run_id="r", cycle=2, message_count=3),
        TextDelta(run_id="r", cycle=2, text="The answer is 391."),
        ModelResponded(cycle=2, content="The answer is 391.", tool_calls=(), **common),
        RunStopped(
            run_id="r",
            cycle=2,
            reason=StopReason.COMPLETED,
            detail="done",
            output="The answer is 391.",
            usage=Usage(),
        ),
    ]


def test_a_pipe_gets_the_text_as_it_comes_and_then_what_it_was() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=False, width=200))
    for event in run_events():
        view(event)
    assert out.getvalue().splitlines() == [
        "run What is 17 * 23?  model=m tools=1",
        "cycle 1 model: 17 * 23 = 341",
        "cycle 1 model: 1 tool call(s) · the text above is its thinking, not an answer",
        '  ok calculator(expression="17 * 23") -> 391 1 ms',
        "cycle 2 model: The answer is 391.",
        "cycle 2 model: answer, no tool calls",
        "stopped: completed (done)",
        "tokens in=0 out=0",
        "The answer is 391.",
    ]


def test_a_pipe_shows_no_working_status() -> None:
    out = io.StringIO()
    now = [0.0]
    view = LiveView(Console(file=out, force_terminal=False), clock=lambda: now[0])
    view(CycleStarted(run_id="r", cycle=1, message_count=1))
    now[0] = 12.0
    view.tick()
    assert out.getvalue() == ""


def test_a_pipe_labels_text_thinking_when_the_calls_were_announced_first() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=False, width=200))
    view(CycleStarted(run_id="r", cycle=1, message_count=1))
    view(ToolCallDelta(run_id="r", cycle=1, index=0, call_id=None, name=None, arguments=""))
    view(TextDelta(run_id="r", cycle=1, text="I need the calculator."))
    responded = next(e for e in run_events() if isinstance(e, ModelResponded))
    view(responded)
    assert out.getvalue().splitlines() == [
        "cycle 1 thinking: I need the calculator.",
        "cycle 1 model: 1 tool call(s)",  # labelled already: nothing to add
    ]


def terminal() -> tuple[io.StringIO, Console]:
    out = io.StringIO()
    return out, Console(file=out, force_terminal=True, width=120, color_system=None)


def screen_lines(text: str) -> list[str]:
    """What was written, line by line, without the cursor and erase controls."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    return [line.strip() for line in re.split(r"[\r\n]", plain) if line.strip()]


def test_a_terminal_shows_the_model_working_with_the_seconds_going_up() -> None:
    out, console = terminal()
    now = [100.0]
    view = LiveView(console, clock=lambda: now[0])
    view(CycleStarted(run_id="r", cycle=1, message_count=1))
    try:
        now[0] = 112.4
        view.tick()
        assert "cycle 1 model working… 12 s" in out.getvalue()
        now[0] = 113.0
        view.tick()
        assert "cycle 1 model working… 13 s" in out.getvalue()
    finally:
        view.close()


def test_a_terminal_redraws_the_text_and_labels_it_thinking_once_calls_follow() -> None:
    out, console = terminal()
    view = LiveView(console)
    events = run_events()
    for event in events[:4]:  # started, cycle 1, two pieces of text
        view(event)
    view.tick()
    assert "cycle 1 model: 17 * 23 = 341" in out.getvalue()
    view(events[4])  # a call follows: the text was thinking
    view.tick()
    assert "cycle 1 thinking: 17 * 23 = 341" in out.getvalue()
    for event in events[5:]:
        view(event)
    lines = screen_lines(out.getvalue())
    kept = lines[lines.index("cycle 1 model: 1 tool call(s)") :]
    assert kept[:3] == [
        "cycle 1 model: 1 tool call(s)",
        "thinking: 17 * 23 = 341",
        'ok calculator(expression="17 * 23") -> 391 1 ms',
    ]
    assert "stopped: completed (done)" in lines and lines[-1] == "The answer is 391."


def test_an_unstreamed_reply_still_gets_its_thinking_label() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=False, width=200))
    for event in run_events():
        if not isinstance(event, TextDelta | ToolCallDelta):
            view(event)
    assert out.getvalue().splitlines()[1:3] == [
        "cycle 1 model: 1 tool call(s)",
        "  thinking: 17 * 23 = 341",
    ]


def completion(content: str, call: bool) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if call:
        function = {"name": "calculator", "arguments": json.dumps({"expression": "17 * 23"})}
        message["tool_calls"] = [{"id": "c1", "type": "function", "function": function}]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "stub"}
    return json.dumps({**body, "choices": [choice], "usage": usage}).encode()


@pytest.mark.slow
def test_convergent_run_streams_the_text_to_a_pipe(tmp_path: Path) -> None:
    def reply(n: int, body: dict[str, Any]) -> bytes:
        if n == 1:
            return completion("17 * 23 = 341, let me check.", call=True)
        return completion("The answer is 391.", call=False)

    with ChatStub(reply) as stub:
        exe = Path(sys.executable).with_name("convergent")
        model = ["--model", "openai:stub", "--base-url", f"{stub.url}/v1"]
        done = subprocess.run(
            [str(exe), "run", "What is 17 * 23?", *model, "--no-steer"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert stub.requests[0]["stream"] is True
    lines = done.stdout.splitlines()
    first = lines.index("cycle 1 model: 17 * 23 = 341, let me check.")
    assert "the text above is its thinking, not an answer" in lines[first + 1]
    assert "model working" not in done.stdout
    assert lines[-1] == "The answer is 391."


HOSTILE = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;pwned\x07\x1b[2J\u202eevil\x9b31m"
"""A clipboard write (OSC 52), a title change, a screen clear, a bidi override and a
C1 control sequence introducer."""


def hostile_run() -> list[Event]:
    common: dict[str, Any] = {"run_id": "r", "finish_reason": None, "usage": Usage()}
    common |= {"metadata": {"note": HOSTILE}, "duration": 1.0}
    call = ToolCall(id="c1", name="calculator", arguments={"expression": HOSTILE})
    return [
        RunStarted(run_id="r", cycle=0, task=HOSTILE, model=HOSTILE, tools=("calculator",)),
        CycleStarted(run_id="r", cycle=1, message_count=1),
        TextDelta(run_id="r", cycle=1, text=HOSTILE),
        ModelResponded(cycle=1, content=HOSTILE, tool_calls=(call,), **common),
        ToolFinished(
            run_id="r",
            cycle=1,
            call_id="c1",
            name="calculator",
            ok=False,
            outcome="failed",
            result=HOSTILE,
            duration=0.0,
        ),  # fmt: skip
        Nudged(run_id="r", cycle=1, about="stalled", note=HOSTILE),
        Redirected(run_id="r", cycle=1, message=HOSTILE),
        RunStopped(
            run_id="r",
            cycle=1,
            reason=StopReason.STALLED,
            detail=HOSTILE,
            output=HOSTILE,
            usage=Usage(),
            output_after_stop=True,
        ),  # fmt: skip
    ]


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_escape_sequences_from_models_and_tools_never_reach_the_terminal(terminal: bool) -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=terminal, width=300))
    for event in hostile_run():
        view(event)
    view.close()
    printed = out.getvalue()
    for raw in ("\x1b]", "\x07", "\x1b[2J", "\u202e", "\x9b"):
        assert raw not in printed
    # shown as text instead, so the reader still sees what was sent
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in printed
    if not terminal:
        assert "\x1b" not in printed  # no colour codes on a pipe either


def test_a_call_interrupted_by_a_crash_is_printed_with_its_arguments() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=False, width=200))
    view(RunStarted(run_id="r", cycle=1, task="t", model="m", tools=(), resumed=True))
    view(ToolFinished(run_id="r", cycle=1, call_id="c1", name="deploy", ok=False,
                      outcome="interrupted", result="interrupted", duration=0.0,
                      arguments={"service": "web"}))  # fmt: skip
    assert '  error deploy(service="web") -> interrupted 0 ms' in out.getvalue().splitlines()


def test_a_pause_and_its_end_are_printed() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=False, width=200))
    view(RunPaused(run_id="r", cycle=2))
    view(RunUnpaused(run_id="r", cycle=2))
    assert out.getvalue().splitlines() == [
        "paused before cycle 3 (convergent steer r --resume continues it)",
        "pause ended",
    ]


def test_a_stopped_runs_last_text_is_not_printed_as_its_answer() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=False, width=200))
    view(RunStopped(run_id="r", cycle=2, reason=StopReason.STOPPED, detail="stop requested",
                    output="I need to check the file", usage=Usage()))  # fmt: skip
    assert out.getvalue().splitlines()[-2:] == [
        "the model's last text before the stop (not an answer):",
        "I need to check the file",
    ]
