from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Iterator

import pytest
from rich.console import Console

from convergent import NeedsUserInput, ToolArgumentsError
from convergent.gate import (
    AskTimedOut,
    AskUser,
    CallbackChannel,
    DialogChannel,
    NonInteractiveChannel,
    QueueChannel,
    StdinChannel,
    TerminalChannel,
    ask_user_tool,
)


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        try:
            os.close(fd)
        except OSError:
            pass


async def test_queue_channel_uses_prepared_answers_in_order() -> None:
    asker = AskUser(QueueChannel(answers=["one", "two"]))
    assert await asker.tool.call({"question": "first?"}) == "one"
    assert await asker.tool.call({"question": "second?"}) == "two"
    assert [(x.question, x.answer, x.status) for x in asker.exchanges] == [
        ("first?", "one", "answered"),
        ("second?", "two", "answered"),
    ]


async def test_queue_channel_lets_the_application_answer() -> None:
    channel = QueueChannel()
    asker = AskUser(channel, timeout=5)
    asking = asyncio.create_task(asker.ask("Which file?"))
    pending = await channel.get()
    assert pending.text == "Which file?" and pending.open
    assert pending.answer("notes.txt")
    assert await asking == "notes.txt"
    assert not pending.open and not pending.answer("too late")


async def test_a_late_answer_to_a_timed_out_question_is_refused() -> None:
    channel = QueueChannel()
    asker = AskUser(channel, timeout=0.01)
    with pytest.raises(AskTimedOut) as raised:
        await asker.ask("Anyone there?")
    assert isinstance(raised.value, NeedsUserInput) and raised.value.question == "Anyone there?"
    pending = await channel.get()
    assert not pending.answer("now I am")
    assert asker.exchanges[0].status == "timed_out" and asker.exchanges[0].answer is None


async def test_timeout_can_continue_with_a_no_answer_result() -> None:
    asker = AskUser(QueueChannel(), timeout=0.01, on_timeout="continue")
    result = await asker.tool.call({"question": "Anyone?"})
    assert result == "(no answer: the user did not reply within 0.01 s)"
    assert asker.exchanges[0].status == "timed_out"


@pytest.mark.parametrize("callback_is_async", [False, True])
async def test_callback_channel(callback_is_async: bool) -> None:
    seen: list[str] = []

    def sync(question: str) -> str:
        seen.append(question)
        return "blue"

    async def async_(question: str) -> str:
        seen.append(question)
        return "blue"

    tool = ask_user_tool(CallbackChannel(async_ if callback_is_async else sync))
    assert await tool.call({"question": "  Which colour?  "}) == "blue"
    assert seen == ["Which colour?"]


async def test_empty_questions_are_the_models_mistake_and_empty_replies_are_marked() -> None:
    asker = AskUser(CallbackChannel(lambda q: "  "))
    with pytest.raises(ToolArgumentsError):
        await asker.ask("   ")
    assert await asker.ask("Anything?") == "(the user gave no answer)"


async def test_non_interactive_channel_raises_needs_user() -> None:
    asker = AskUser(NonInteractiveChannel())
    with pytest.raises(NeedsUserInput) as raised:
        await asker.ask("Which one?")
    assert raised.value.question == "Which one?"
    assert asker.exchanges[0].status == "unavailable" and asker.exchanges[0].channel == "none"


async def test_stdin_channel_reads_one_answer_per_line(pipe: tuple[int, int]) -> None:
    read, write = pipe
    os.write(write, "first answer\r\nsecond ✓\n".encode())
    os.close(write)
    echo = io.StringIO()
    asker = AskUser(StdinChannel(read, echo=echo), timeout=5)
    assert await asker.ask("Q1?") == "first answer"
    assert await asker.ask("Q2?") == "second ✓"
    with pytest.raises(NeedsUserInput):
        await asker.ask("Q3?")
    assert echo.getvalue().splitlines() == ["question: Q1?", "question: Q2?", "question: Q3?"]
    assert [x.status for x in asker.exchanges] == ["answered", "answered", "unavailable"]


async def test_stdin_channel_waits_without_blocking_the_loop(pipe: tuple[int, int]) -> None:
    read, write = pipe
    asker = AskUser(StdinChannel(read), timeout=5)
    asking = asyncio.create_task(asker.ask("Q?"))
    await asyncio.sleep(0)
    assert not asking.done()
    os.write(write, b"typed later\n")
    assert await asking == "typed later"


async def test_stdin_channel_times_out_on_silence(pipe: tuple[int, int]) -> None:
    read, _write = pipe
    asker = AskUser(StdinChannel(read), timeout=0.01)
    with pytest.raises(AskTimedOut):
        await asker.ask("Q?")


async def test_terminal_channel_shows_the_question_and_reads_the_reply(
    pipe: tuple[int, int],
) -> None:
    read, write = pipe
    os.write(write, b"the blue one\n")
    screen = io.StringIO()
    channel = TerminalChannel(Console(file=screen, width=60, color_system=None), read)
    assert await AskUser(channel).ask("Which [bold]button[/bold]?") == "the blue one"
    shown = screen.getvalue()
    assert "the agent asks" in shown and "Which [bold]button[/bold]?" in shown
    assert "answer>" in shown


async def test_terminal_channel_with_closed_input_needs_the_user(pipe: tuple[int, int]) -> None:
    read, write = pipe
    os.close(write)
    channel = TerminalChannel(Console(file=io.StringIO()), read)
    with pytest.raises(NeedsUserInput):
        await AskUser(channel).ask("Q?")


async def test_dialog_without_a_display_needs_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert DialogChannel.unavailable_reason() is not None
    asker = AskUser(DialogChannel(), timeout=10)
    with pytest.raises(NeedsUserInput) as raised:
        await asker.ask("Which one?")
    assert raised.value.question == "Which one?"
    assert asker.exchanges[0].status == "unavailable"
