"""The executive function on the command line: ``--gate``, ``--ask-via`` and their view."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from convergent._printable import printable
from convergent.events import Event
from convergent.exceptions import UserError
from convergent.gate import DEFAULT_THRESHOLD, GateDecided, UserAnswered

__all__ = ["ASK_VIA", "GateView", "expand_gate_flag", "parse_threshold"]

ASK_VIA = ("terminal", "dialog", "stdin", "web", "none")
"""The values of ``--ask-via``."""


def expand_gate_flag(args: Sequence[str]) -> list[str]:
    """Give a bare ``--gate`` its default threshold, so that its value is optional.

    ``--gate`` followed by anything but a number (another option, the task, nothing)
    means ``--gate 0.85``.
    """
    out: list[str] = []
    items = list(args)
    for index, arg in enumerate(items):
        out.append(arg)
        if arg == "--":
            out.extend(items[index + 1 :])
            break
        if arg == "--gate":
            following = items[index + 1] if index + 1 < len(items) else None
            if following is None or not _is_number(following):
                out.append(str(DEFAULT_THRESHOLD))
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_threshold(value: str) -> float:
    """The threshold given to ``--gate``.

    Raises:
        UserError: If it is not a number between 0 and 1.
    """
    try:
        threshold = float(value)
    except ValueError:
        raise UserError(f"--gate expects a threshold between 0 and 1, got {value!r}") from None
    if not 0.0 <= threshold <= 1.0:
        raise UserError(f"--gate expects a threshold between 0 and 1, got {value}")
    return threshold


def _clip(text: str, limit: int = 100) -> str:
    text = printable(text, one_line=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class GateView:
    """An event handler that prints the gate's decisions and the user's answers."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: Event) -> None:
        """Print one gate event; ignore the others."""
        out = self.console
        if isinstance(event, GateDecided):
            if event.score is not None:
                sign = ">=" if event.score >= event.threshold else "<"
                why = f"score {event.score:.2f} {sign} {event.threshold:.2f}"
            else:
                why = event.trigger.replace("_", " ")
            if event.decision == "asked":
                question = escape(_clip(event.question))
                out.print(f"  [magenta]gate[/] {why}: asking [dim]{question}[/]")
            else:
                out.print(f"  [magenta]gate[/] {why}: executing")
        elif isinstance(event, UserAnswered):
            if event.status == "answered":
                out.print(
                    f"  [magenta]user[/] answered [dim]{escape(_clip(event.answer or ''))}[/]"
                )
            else:
                out.print(f"  [magenta]user[/] no answer ({event.status.replace('_', ' ')})")
