"""The terminal view of a running agent: one line per cycle, tool call and stop."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from convergent.events import (
    Event,
    ModelResponded,
    Nudged,
    Redirected,
    RunStarted,
    RunStopped,
    ToolFinished,
    Verified,
)
from convergent.stop import StopReason

__all__ = ["LiveView"]

_STYLE = {
    StopReason.COMPLETED: "bold green",
    StopReason.STOPPED: "bold yellow",
    StopReason.NEEDS_USER: "bold yellow",
}


def _clip(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """``name(key=value, ...)`` with JSON values, as a reader scans a call."""
    shown = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False, default=str)}"
        for key, value in arguments.items()
    )
    return f"{name}({shown})"


class LiveView:
    """An event handler that prints the run as it happens."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._arguments: dict[str, Mapping[str, Any]] = {}

    def __call__(self, event: Event) -> None:
        """Print one event."""
        out = self.console
        match event:
            case RunStarted(task=task, model=model, tools=tools, resumed=resumed):
                verb = "resuming" if resumed else "run"
                info = f"model={escape(model)} tools={len(tools)}"
                out.print(f"[bold]{verb}[/] {escape(_clip(task))}  [dim]{info}[/]")
            case ModelResponded(cycle=cycle, content=content, tool_calls=calls, metadata=meta):
                what = f"{len(calls)} tool call(s)" if calls else "answer, no tool calls"
                extra = f" [dim](metadata only: {escape(json.dumps(meta))})[/]" if meta else ""
                self._arguments = {call.id: call.arguments for call in calls}
                out.print(f"[cyan]cycle {cycle}[/] model: {what}{extra}")
                if content and calls:
                    out.print(f"  [dim]{escape(_clip(content))}[/]")
            case ToolFinished(call_id=call_id, name=name, ok=ok, result=result, duration=duration):
                mark = "[green]ok[/]" if ok else "[red]error[/]"
                took = f"{duration * 1000:.0f} ms"
                call = _clip(call_text(name, self._arguments.get(call_id, {})), 80)
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
            case RunStopped(reason=reason, detail=detail, output=output, usage=usage):
                style = _STYLE.get(reason, "bold red")
                out.print(f"[{style}]stopped: {reason.value}[/] [dim]({escape(detail)})[/]")
                out.print(f"[dim]tokens in={usage.input_tokens} out={usage.output_tokens}[/]")
                if output and event.output_after_stop:
                    out.print("[dim]best answer after the stop:[/]")
                if output:
                    out.print(output, markup=False, highlight=False)
            case _:
                pass
