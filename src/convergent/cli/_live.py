"""The terminal view of a running agent: one line per cycle, tool call and stop.

The model's text is shown as it streams. Text that comes before tool calls is the
model thinking aloud, not its answer, and is labelled so: on a terminal the growing
text is redrawn in place and replaced by its labelled line once the reply is whole;
written to a file or pipe, it is printed as it comes and the line after it says
whether it was thinking. While the model has produced nothing, a terminal shows
"model working… 12 s"; a pipe gets nothing until there is something to say.

Everything a model, a tool or a user wrote is printed through `printable`: its control
characters (terminal escape sequences among them) are shown, never sent raw.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from convergent._printable import printable
from convergent.events import (
    CycleStarted,
    Event,
    ModelResponded,
    Nudged,
    Redirected,
    RunPaused,
    RunStarted,
    RunStopped,
    RunUnpaused,
    TextDelta,
    ToolCallDelta,
    ToolFinished,
    Verified,
)
from convergent.result import output_label
from convergent.stop import StopReason

__all__ = ["LiveView", "call_text"]

_STYLE = {
    StopReason.COMPLETED: "bold green",
    StopReason.STOPPED: "bold yellow",
    StopReason.NEEDS_USER: "bold yellow",
}
_TAIL_LINES = 6
"""Lines of streamed text a terminal shows while the reply grows (the latest ones)."""


def _clip(text: str, limit: int = 100) -> str:
    """``text`` on one line, safe to print, at most ``limit`` characters."""
    text = printable(text, one_line=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """``name(key=value, ...)`` with JSON values, as a reader scans a call."""
    shown = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False, default=str)}"
        for key, value in arguments.items()
    )
    return f"{name}({shown})"


class _Reply:
    """The reply of the current cycle as it streams, drawn in place on a terminal."""

    def __init__(self, cycle: int, started: float, clock: Callable[[], float]) -> None:
        self.cycle = cycle
        self.started = started
        self.clock = clock
        self.text: list[str] = []
        self.calls = False
        self.label = ""
        """The label printed before the text on a pipe (``model`` or ``thinking``)."""

    def __rich__(self) -> Text:
        head = (f"cycle {self.cycle} ", "cyan")
        if not self.text and not self.calls:
            seconds = max(0.0, self.clock() - self.started)
            return Text.assemble(head, "model working… ", (f"{seconds:.0f} s", "dim"))
        label = "thinking" if self.calls else "model"
        return Text.assemble(head, (f"{label}: ", "dim"), self.tail())

    def tail(self) -> str:
        """The latest lines of the text, so the newest words stay in view."""
        text = "".join(self.text)
        lines = text.split("\n")
        if len(lines) > _TAIL_LINES:
            text = "…" + "\n".join(lines[-_TAIL_LINES:])
        limit = 120 * _TAIL_LINES
        return printable(text if len(text) <= limit else "…" + text[-limit:])


class LiveView:
    """An event handler that prints the run as it happens (see the module).

    Args:
        console: Where to print; a terminal gets the in-place display.
        clock: Monotonic seconds, for the "model working" count.
    """

    def __init__(self, console: Console, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self._arguments: dict[str, Mapping[str, Any]] = {}
        self._reply: _Reply | None = None
        self._live: Live | None = None
        self._open_line = False

    def __call__(self, event: Event) -> None:
        """Print one event."""
        match event:
            case TextDelta(text=text):
                self._text(text)
            case ToolCallDelta():
                if self._reply is not None:
                    self._reply.calls = True
            case CycleStarted(cycle=cycle):
                self._started(cycle)
            case ModelResponded():
                self._responded(event)
            case _:
                self._other(event)

    def tick(self) -> None:
        """Redraw the in-place display now (it also redraws by itself a few times a second)."""
        if self._live is not None:
            self._live.refresh()

    def close(self) -> None:
        """End the in-place display (at the end of a run, or when it fails)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()
        self._end_line()

    def _started(self, cycle: int) -> None:
        self.close()
        self._reply = _Reply(cycle, self.clock(), self.clock)
        if self.console.is_terminal:
            self._live = Live(
                self._reply, console=self.console, transient=True, refresh_per_second=4
            )
            self._live.start()

    def _text(self, text: str) -> None:
        reply = self._reply
        if reply is None:
            return
        if self._live is None and not reply.text:
            # on a pipe the label comes first: whether it was thinking is said after it
            reply.label = "thinking" if reply.calls else "model"
            self.console.print(f"[cyan]cycle {reply.cycle}[/] {reply.label}: ", end="")
            self._open_line = True
        reply.text.append(text)
        if self._live is None:
            self.console.print(printable(text), end="", markup=False, highlight=False)
            self.console.file.flush()
        elif len(reply.text) == 1:
            self._live.refresh()

    def _end_line(self) -> None:
        if self._open_line:
            self._open_line = False
            self.console.print()

    def _responded(self, event: ModelResponded) -> None:
        reply, self._reply = self._reply, None
        printed = reply.label if self._live is None and reply is not None else ""
        self.close()
        out, calls, content = self.console, event.tool_calls, event.content
        self._arguments = {call.id: call.arguments for call in calls}
        what = f"{len(calls)} tool call(s)" if calls else "answer, no tool calls"
        meta = event.metadata
        extra = f" [dim](metadata only: {escape(printable(json.dumps(meta)))})[/]" if meta else ""
        if printed == "model" and calls:
            extra += " [dim]· the text above is its thinking, not an answer[/]"
        out.print(f"[cyan]cycle {event.cycle}[/] model: {what}{extra}")
        if content and calls and not printed:
            out.print(f"  [dim]thinking: {escape(printable(content.strip()))}[/]")

    def _other(self, event: Event) -> None:
        out = self.console
        match event:
            case RunStarted(task=task, model=model, tools=tools, resumed=resumed):
                verb = "resuming" if resumed else "run"
                info = f"model={escape(_clip(model))} tools={len(tools)}"
                out.print(f"[bold]{verb}[/] {escape(_clip(task))}  [dim]{info}[/]")
            case ToolFinished(call_id=call_id, name=name, ok=ok, result=result, duration=duration):
                mark = "[green]ok[/]" if ok else "[red]error[/]"
                took = f"{duration * 1000:.0f} ms"
                arguments = event.arguments or self._arguments.get(call_id, {})
                call = _clip(call_text(name, arguments), 80)
                out.print(f"  {mark} {escape(call)} -> {escape(_clip(result, 80))} [dim]{took}[/]")
            case Verified(passed=passed, feedback=feedback):
                verdict = (
                    "[green]passed[/]" if passed else f"[red]failed[/] {escape(_clip(feedback))}"
                )
                out.print(f"  verifier {verdict}")
            case Redirected(message=message):
                out.print(f"[yellow]redirect[/] {escape(_clip(message))}")
            case Nudged(about=about, note=note):
                label = "budget note" if about == "budget" else f"nudge instead of {about}"
                out.print(f"  [yellow]{label}[/] [dim]{escape(_clip(note, 160))}[/]")
            case RunPaused(run_id=run_id):
                self.close()
                how = escape(f"convergent steer {printable(run_id)} --resume continues it")
                out.print(f"[yellow]paused[/] before cycle {event.cycle + 1} [dim]({how})[/]")
            case RunUnpaused():
                out.print("[yellow]pause ended[/]")
            case RunStopped(reason=reason, detail=detail, output=output, usage=usage):
                self.close()
                self._reply = None
                style = _STYLE.get(reason, "bold red")
                shown = escape(printable(detail))
                out.print(f"[{style}]stopped: {reason.value}[/] [dim]({shown})[/]")
                out.print(f"[dim]tokens in={usage.input_tokens} out={usage.output_tokens}[/]")
                if output:
                    label = output_label(reason, after_stop=event.output_after_stop)
                    if label:
                        out.print(f"[dim]{label}:[/]")
                    out.print(printable(output), markup=False, highlight=False)
            case _:
                pass
