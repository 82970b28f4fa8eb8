"""The executive function on the command line: ``--gate``, ``--ask-via`` and their view."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from convergent.events import Event
from convergent.exceptions import UserError
from convergent.gate import (
    DEFAULT_THRESHOLD,
    AskChannel,
    AskUser,
    DialogChannel,
    ExecutiveGate,
    GateDecided,
    NonInteractiveChannel,
    StdinChannel,
    TerminalChannel,
    UserAnswered,
)
from convergent.models.base import Model
from convergent.models.registry import model_from_string
from convergent.models.structured import StructuredToolCalling

__all__ = [
    "ASK_VIA",
    "GateView",
    "build_asker",
    "build_gate",
    "build_gate_parts",
    "expand_gate_flag",
    "parse_threshold",
]

ASK_VIA = ("terminal", "dialog", "stdin", "none")
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


def _channel(ask_via: str | None) -> AskChannel:
    choice = ask_via or ("terminal" if sys.stdin.isatty() else "none")
    if choice == "terminal":
        return TerminalChannel()
    if choice == "dialog":
        reason = DialogChannel.unavailable_reason()
        if reason is not None:
            raise UserError(f"--ask-via dialog is not possible here: {reason}")
        return DialogChannel()
    if choice == "stdin":
        return StdinChannel(echo=sys.stderr)
    if choice == "none":
        return NonInteractiveChannel()
    raise UserError(f"--ask-via must be one of {', '.join(ASK_VIA)}, got {choice!r}")


def build_asker(ask_via: str | None, timeout: float) -> AskUser:
    """The ``ask_user`` tool for ``--ask-via`` (default: terminal on a TTY, else none).

    Raises:
        UserError: For an unknown channel, a dialog without a display, or a bad timeout.
    """
    if timeout <= 0:
        raise UserError(f"--ask-timeout must be > 0 seconds, got {timeout:g}")
    return AskUser(_channel(ask_via), timeout=timeout)


def build_gate(threshold: str | None, asker: AskUser, scorer: Model) -> ExecutiveGate | None:
    """The executive gate for ``--gate THRESHOLD``, or None without the option.

    Raises:
        UserError: For a threshold that is not a number between 0 and 1.
    """
    if threshold is None:
        return None
    return ExecutiveGate(scorer, asker, threshold=parse_threshold(threshold))


def _clip(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
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


def build_gate_parts(
    threshold: str | None,
    ask_via: str | None,
    ask_timeout: float,
    gate_model: str | None,
    base_url: str | None,
    model: Model,
) -> tuple[AskUser, ExecutiveGate | None, Model | None]:
    """The ``ask_user`` tool, the gate (with ``--gate``) and a scorer model to close.

    The scorer is ``--gate-model`` when given (returned third, so that the caller closes
    it), else the run's own model without the structured tool-call wrapper.

    Raises:
        UserError: For any invalid option.
    """
    if gate_model is not None and threshold is None:
        raise UserError("--gate-model needs --gate")
    asker = build_asker(ask_via, ask_timeout)
    if threshold is None:
        return asker, None, None
    parse_threshold(threshold)
    separate = model_from_string(gate_model, base_url=base_url) if gate_model else None
    scorer = separate or (model.inner if isinstance(model, StructuredToolCalling) else model)
    return asker, build_gate(threshold, asker, scorer), separate
