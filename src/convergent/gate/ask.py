"""The ``ask_user`` tool and the channels through which a question reaches the user.

`AskUser` builds the tool. The model may call it like any other tool, and the
`ExecutiveGate` invokes it when it discards an uncertain action. The user's reply is
the tool's result, so it reaches the model as the observation of the next cycle.

A channel delivers one question and returns the reply:

- `TerminalChannel`: a rich-rendered prompt on the terminal (``convergent run`` on a TTY),
- `StdinChannel`: one answer per line of standard input, for scripts,
- `CallbackChannel` and `QueueChannel`: programmatic, for applications and tests,
- `DialogChannel`: a modal desktop dialog (Tk) whose event loop runs in its own thread,
- `NonInteractiveChannel`: no user can answer; the run ends ``needs_user``, resumable.

Every wait has a timeout. A question that times out is an objective outcome: by default
the run ends ``needs_user`` (so it can be resumed with the answer), and the exchange is
recorded with the status ``timed_out``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any, Literal, Protocol

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from convergent._printable import printable
from convergent.clock import current_clock
from convergent.exceptions import ConvergentError, NeedsUserInput, UserError
from convergent.gate.events import AskStatus
from convergent.tools import Tool, ToolArgumentsError, tool

__all__ = [
    "ASK_USER",
    "AskChannel",
    "AskTimedOut",
    "AskUser",
    "CallbackChannel",
    "DialogChannel",
    "Exchange",
    "LineSource",
    "NonInteractiveChannel",
    "PendingQuestion",
    "QueueChannel",
    "StdinChannel",
    "TerminalChannel",
    "ask_user_tool",
]

ASK_USER = "ask_user"
"""Default name of the tool."""

TimeoutPolicy = Literal["stop", "continue"]


class AskChannel(Protocol):
    """Delivers one question to the user and returns the reply."""

    @property
    def name(self) -> str:
        """Short name recorded with each exchange (``terminal``, ``dialog``...)."""
        ...

    async def ask(self, question: str) -> str:
        """Show ``question`` and wait for the reply (the caller applies the timeout).

        Raises:
            NeedsUserInput: When this channel cannot reach a user now.
        """
        ...


class AskTimedOut(NeedsUserInput):
    """No reply arrived before the timeout; the run ends ``needs_user``, resumable."""

    def __init__(self, question: str, timeout: float) -> None:
        super().__init__(question)
        self.timeout = timeout


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One question put to the user and how it ended."""

    question: str
    """The question."""
    answer: str | None
    """The reply; None when there was none."""
    status: AskStatus
    """``answered``, ``timed_out`` or ``unavailable``."""
    channel: str
    """Name of the channel that asked."""
    waited: float
    """Seconds spent waiting."""


class AskUser:
    """The ``ask_user`` tool bound to a channel, with a timeout and a log of exchanges.

    Example:
        >>> asker = AskUser(QueueChannel(answers=["the blue one"]))
        >>> agent = Agent(model, [*tools, asker.tool])

    Args:
        channel: Where questions go.
        timeout: Seconds to wait for each reply; None waits forever (not advised).
        on_timeout: ``stop`` ends the run ``needs_user`` (resumable with the answer);
            ``continue`` tells the model that no answer came and lets it go on.
        name: Name of the tool.

    Raises:
        UserError: For a non-positive timeout or an unknown ``on_timeout``.
    """

    def __init__(
        self,
        channel: AskChannel,
        *,
        timeout: float | None = 300.0,
        on_timeout: TimeoutPolicy = "stop",
        name: str = ASK_USER,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise UserError(f"the ask timeout must be > 0 seconds, got {timeout}")
        if on_timeout not in ("stop", "continue"):
            raise UserError(f"on_timeout must be 'stop' or 'continue', got {on_timeout!r}")
        self.channel = channel
        self.timeout = timeout
        self.on_timeout: TimeoutPolicy = on_timeout
        self.exchanges: list[Exchange] = []
        """Every question asked so far, oldest first."""
        self._lock = asyncio.Lock()
        self.tool: Tool = self._build_tool(name)
        """The tool to give the agent."""

    def _build_tool(self, name: str) -> Tool:
        async def ask_user(question: str) -> str:
            """Ask the user one question and wait for the reply, which is the result.

            Use it when the request is ambiguous, when several targets match, or when
            you need information only the user has. Do not guess instead.

            Args:
                question: One clear, self-contained question for the user.
            """
            return await self.ask(question)

        # The tool's own timeout is off: `ask` applies `timeout` and records the outcome.
        return tool(name=name, timeout=None, idempotent=True, read_only=True)(ask_user)

    async def ask(self, question: str) -> str:
        """Put ``question`` to the user through the channel and return the reply.

        Questions are asked one at a time; the timeout counts from when it is shown.

        Raises:
            ToolArgumentsError: If the question is empty.
            AskTimedOut: When no reply came in time and ``on_timeout`` is ``stop``.
            NeedsUserInput: When the channel cannot reach a user.
        """
        question = question.strip()
        if not question:
            raise ToolArgumentsError("ask_user needs a non-empty question")
        async with self._lock:
            started = current_clock().monotonic()
            try:
                async with asyncio.timeout(self.timeout):
                    answer = await self.channel.ask(question)
            except TimeoutError:
                self._log(question, None, "timed_out", started)
                if self.on_timeout == "stop":
                    raise AskTimedOut(question, self.timeout or 0.0) from None
                return f"(no answer: the user did not reply within {self.timeout:g} s)"
            except NeedsUserInput:
                self._log(question, None, "unavailable", started)
                raise
            self._log(question, answer, "answered", started)
        return answer if answer.strip() else "(the user gave no answer)"

    def _log(self, question: str, answer: str | None, status: AskStatus, started: float) -> None:
        self.exchanges.append(
            Exchange(
                question=question,
                answer=answer,
                status=status,
                channel=self.channel.name,
                waited=current_clock().monotonic() - started,
            )
        )

    def find_exchange(self, question: str) -> Exchange | None:
        """The latest exchange about ``question`` (compared without surrounding spaces)."""
        wanted = question.strip()
        for exchange in reversed(self.exchanges):
            if exchange.question == wanted:
                return exchange
        return None


def ask_user_tool(
    channel: AskChannel,
    *,
    timeout: float | None = 300.0,
    on_timeout: TimeoutPolicy = "stop",
    name: str = ASK_USER,
) -> Tool:
    """Build an ``ask_user`` tool on ``channel`` (see `AskUser` for the arguments)."""
    return AskUser(channel, timeout=timeout, on_timeout=on_timeout, name=name).tool


class NonInteractiveChannel:
    """No user can answer here (CI, a pipe): every question ends the run ``needs_user``."""

    name = "none"

    async def ask(self, question: str) -> str:
        """Raise `NeedsUserInput` carrying the question.

        Raises:
            NeedsUserInput: Always.
        """
        raise NeedsUserInput(question)


class CallbackChannel:
    """Hands each question to a function of the application and returns its reply.

    Args:
        callback: ``question -> reply``; may be async. A sync callback runs on the event
            loop and must not block; wait for a person in an async callback instead.
        name: Name recorded with each exchange.
    """

    def __init__(
        self, callback: Callable[[str], str | Awaitable[str]], *, name: str = "callback"
    ) -> None:
        self._callback = callback
        self.name = name

    async def ask(self, question: str) -> str:
        """Call the callback and return its reply."""
        reply = self._callback(question)
        if inspect.isawaitable(reply):
            reply = await reply
        return str(reply)


@dataclass(eq=False)
class PendingQuestion:
    """A question waiting in a `QueueChannel` for the application to answer it."""

    text: str
    """The question."""
    _reply: asyncio.Future[str] = field(repr=False)

    def answer(self, reply: str) -> bool:
        """Deliver the reply; False if the question already ended (timed out)."""
        if self._reply.done():
            return False
        self._reply.set_result(reply)
        return True

    @property
    def open(self) -> bool:
        """Whether the question still waits for a reply."""
        return not self._reply.done()


class QueueChannel:
    """An awaitable queue of questions for applications and tests.

    Answers given up front are used first, one per question; after that each question
    waits in the queue until the application takes it with `get` and answers it.

    Example:
        >>> channel = QueueChannel()
        >>> question = await channel.get()
        >>> question.answer("the second one")

    Args:
        answers: Replies for the first questions, in order.
        name: Name recorded with each exchange.
    """

    def __init__(self, answers: Iterable[str] = (), *, name: str = "queue") -> None:
        self._ready: deque[str] = deque(answers)
        self._questions: asyncio.Queue[PendingQuestion] = asyncio.Queue()
        self.name = name
        self.asked: list[str] = []
        """Every question received, in order."""

    async def ask(self, question: str) -> str:
        """Answer from the prepared replies, or wait for the application's answer."""
        self.asked.append(question)
        if self._ready:
            return self._ready.popleft()
        pending = PendingQuestion(question, asyncio.get_running_loop().create_future())
        self._questions.put_nowait(pending)
        try:
            return await pending._reply
        finally:
            pending._reply.cancel()

    async def get(self) -> PendingQuestion:
        """Wait for the next question that needs an answer."""
        return await self._questions.get()


class _LineReader:
    """Reads lines from a file descriptor without blocking the event loop."""

    def __init__(self, stream: IO[Any] | int) -> None:
        self._fd = stream if isinstance(stream, int) else stream.fileno()
        self._buffer = bytearray()
        self._eof = False

    async def readline(self) -> str | None:
        """The next line without its line break, or None at end of input."""
        while b"\n" not in self._buffer and not self._eof:
            chunk = await self._read()
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
        if not self._buffer:
            return None
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line.decode("utf-8", errors="replace").rstrip("\r")

    async def _read(self) -> bytes:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self._fd, wake)
        except (NotImplementedError, OSError, ValueError):
            # Regular files cannot be watched (they never block); on event loops without
            # add_reader a worker thread reads, and a timeout abandons it mid-read.
            return await asyncio.to_thread(os.read, self._fd, 65536)
        try:
            await ready
        finally:
            loop.remove_reader(self._fd)
        return os.read(self._fd, 65536)


LineSource = Callable[[], Awaitable["str | None"]]
"""Returns the next line typed by the user, or None when input has ended."""


class StdinChannel:
    """Reads one answer per line of standard input, for scripts.

    End of input means no answer can come: the run ends ``needs_user``.

    Args:
        stream: Where answers come from (default: standard input).
        echo: Where each question is written; None (the default) for silence.
        read_line: Where lines come from instead of ``stream``, for an application
            that already reads the terminal (steering) and routes lines to questions.
    """

    name = "stdin"

    def __init__(
        self,
        stream: IO[Any] | int | None = None,
        *,
        echo: IO[str] | None = None,
        read_line: LineSource | None = None,
    ) -> None:
        self._read_line = read_line or _LineReader(sys.stdin if stream is None else stream).readline
        self._echo = echo

    async def ask(self, question: str) -> str:
        """Write the question to ``echo`` and return the next line of input.

        Raises:
            NeedsUserInput: At end of input.
        """
        if self._echo is not None:
            self._echo.write(f"question: {printable(question)}\n")
            self._echo.flush()
        line = await self._read_line()
        if line is None:
            raise NeedsUserInput(question)
        return line


class TerminalChannel:
    """Shows the question in a rich panel on the terminal and reads the typed reply.

    Args:
        console: Where the question is drawn (default: standard error, so that
            ``--json`` output on standard output stays clean).
        stream: Where the reply is read (default: standard input).
        read_line: Where lines come from instead of ``stream`` (see `StdinChannel`).
    """

    name = "terminal"

    def __init__(
        self,
        console: Console | None = None,
        stream: IO[Any] | int | None = None,
        *,
        read_line: LineSource | None = None,
    ) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self._read_line = read_line or _LineReader(sys.stdin if stream is None else stream).readline

    async def ask(self, question: str) -> str:
        """Draw the question, prompt, and return the line the user types.

        Raises:
            NeedsUserInput: If the terminal's input is closed.
        """
        shown = escape(printable(question))
        self.console.print(Panel(shown, title="the agent asks", title_align="left"))
        self.console.print("[bold]answer>[/] ", end="")
        line = await self._read_line()
        if line is None:
            self.console.print()
            raise NeedsUserInput(question)
        return line


class _DialogUnavailable(ConvergentError):
    """No dialog can be shown here (no tkinter, no display): the question needs a user."""


def _settle(future: asyncio.Future[str], value: str | BaseException) -> None:
    if future.done():
        return
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)


class DialogChannel:
    """A modal desktop dialog (Tk): the question, a text box and an OK button.

    The dialog's event loop runs in a thread of its own, so the wait blocks the agent's
    await, never a user interface thread. Return or OK submits; closing the window
    submits an empty reply. When the wait is cancelled (the timeout) the dialog closes.

    Args:
        title: Window title.
        poll_interval: Seconds between the dialog's checks for cancellation.
    """

    name = "dialog"

    def __init__(
        self, *, title: str = "convergent: the agent asks", poll_interval: float = 0.05
    ) -> None:
        self.title = title
        self.poll_interval = poll_interval

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why no dialog can be shown here (no tkinter, no display), or None if one can."""
        try:
            import tkinter  # noqa: F401
        except ImportError:
            return "tkinter is not available in this Python"
        if sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        ):
            return "no display: DISPLAY is not set"
        return None

    async def ask(self, question: str) -> str:
        """Show the dialog and wait for the reply.

        Raises:
            NeedsUserInput: If no dialog can be shown (no display, no tkinter).
        """
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[str] = loop.create_future()
        closed = asyncio.Event()
        cancel = threading.Event()

        def run() -> None:
            try:
                self._show(question, loop, reply, cancel)
            except _DialogUnavailable:
                loop.call_soon_threadsafe(_settle, reply, NeedsUserInput(question))
            except Exception as exc:  # the dialog's failure must reach the awaiting side
                loop.call_soon_threadsafe(_settle, reply, exc)
            finally:
                loop.call_soon_threadsafe(closed.set)

        threading.Thread(target=run, name="convergent-ask-dialog", daemon=True).start()
        try:
            return await reply
        finally:
            cancel.set()
            await closed.wait()

    def _show(
        self,
        question: str,
        loop: asyncio.AbstractEventLoop,
        reply: asyncio.Future[str],
        cancel: threading.Event,
    ) -> None:
        try:
            import tkinter
        except ImportError:
            raise _DialogUnavailable from None
        try:
            root = tkinter.Tk(className="convergent")
        except tkinter.TclError:
            raise _DialogUnavailable from None
        _Dialog(root, self.title, question, loop, reply, cancel, self.poll_interval).run()


class _Dialog:
    """The widgets of one dialog; lives and dies in the dialog's thread.

    Callbacks are bound methods rather than closures: a closure that refers to itself
    would keep the Tk interpreter alive in a reference cycle, and a cycle collected on
    another thread deletes the interpreter from the wrong thread, which aborts Tcl.
    """

    def __init__(
        self,
        root: Any,
        title: str,
        question: str,
        loop: asyncio.AbstractEventLoop,
        reply: asyncio.Future[str],
        cancel: threading.Event,
        poll_interval: float,
    ) -> None:
        import tkinter as tk

        self.root = root
        self.loop = loop
        self.reply = reply
        self.cancel = cancel
        self.interval = max(1, int(poll_interval * 1000))
        root.title(title)
        root.resizable(False, False)
        frame = tk.Frame(root, padx=16, pady=12)
        frame.pack(fill="both", expand=True)
        tk.Label(frame, text=question, wraplength=440, justify="left", anchor="w").pack(fill="x")
        self.entry = tk.Entry(frame, width=56)
        self.entry.pack(fill="x", pady=10)
        tk.Button(frame, text="OK", width=10, command=self.submit).pack(anchor="e")
        root.bind("<Return>", self.on_key)
        root.bind("<KP_Enter>", self.on_key)
        root.protocol("WM_DELETE_WINDOW", self.dismiss)

    def run(self) -> None:
        root = self.root
        root.after(self.interval, self.poll)
        root.update_idletasks()
        x = (root.winfo_screenwidth() - root.winfo_reqwidth()) // 2
        y = (root.winfo_screenheight() - root.winfo_reqheight()) // 3
        root.geometry(f"+{max(x, 0)}+{max(y, 0)}")
        root.attributes("-topmost", True)
        root.deiconify()
        root.wait_visibility()
        self.entry.focus_force()
        root.grab_set()
        root.mainloop()

    def submit(self, text: str | None = None) -> None:
        answer = self.entry.get() if text is None else text
        self.loop.call_soon_threadsafe(_settle, self.reply, answer)
        self.root.destroy()

    def on_key(self, _event: object) -> None:
        self.submit()

    def dismiss(self) -> None:
        self.submit("")

    def poll(self) -> None:
        if self.cancel.is_set():
            self.root.destroy()
        else:
            self.root.after(self.interval, self.poll)
