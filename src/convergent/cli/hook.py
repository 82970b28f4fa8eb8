"""``convergent hook stop|subagent-stop``: the Claude Code Stop and SubagentStop hook.

The command reads the hook's JSON from stdin, decides from the state file and prints
Claude Code's JSON answer. It always exits 0 (exit 2 would block the stop), ignores
unknown options instead of failing on them, and reports problems on stderr.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from typing import Annotated

import typer

from convergent.cli import app
from convergent.coordinator.hook import HookEvent, answer_hook

__all__ = ["hook_app"]

hook_app = typer.Typer(
    name="hook",
    help="Claude Code hooks: keep an agent working until the coordinator says stop.",
    no_args_is_help=True,
    add_completion=False,
)

_LENIENT = {"ignore_unknown_options": True, "allow_extra_args": True}

StateOption = Annotated[
    str | None,
    typer.Option(
        "--state",
        help="State file; relative paths are taken from the session's cwd "
        "(default: workflow-state.yaml there).",
    ),
]
VerifyOption = Annotated[
    bool,
    typer.Option("--verify", help="Run the base case checks before deciding."),
]


STDIN_DEADLINE = 3.0
"""Seconds the hook waits for stdin to be closed before answering with what arrived."""

_MAX_INPUT = 4 * 1024 * 1024


def _read_stdin(deadline: float = STDIN_DEADLINE) -> str:
    """Read stdin until it closes or ``deadline`` seconds pass, whichever comes first.

    A writer that never closes the pipe must not hold the hook past its budget: what
    arrived by then is answered (an incomplete document is reported as unusable input).
    """
    stream = sys.stdin
    if stream is None or stream.isatty():
        return ""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # not a real file (e.g. an in-memory stream)
        return stream.read()
    chunks: list[bytes] = []
    size = 0
    end = time.monotonic() + deadline
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while size < _MAX_INPUT:
            left = end - time.monotonic()
            if left <= 0 or not selector.select(left):
                print(
                    f"convergent hook: stdin still open after {deadline:g}s; "
                    "answering with what arrived",
                    file=sys.stderr,
                )
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _answer(event: HookEvent, ctx: typer.Context, state: str | None, verify: bool) -> None:
    if ctx.args:
        print(f"convergent hook: ignoring unexpected arguments {ctx.args}", file=sys.stderr)
    answer = answer_hook(event, _read_stdin(), state=state, verify=verify)
    sys.stdout.write(answer.stdout)
    sys.stdout.flush()
    if answer.message:
        print(answer.message, file=sys.stderr)
    raise typer.Exit(answer.exit_code)


@hook_app.command("stop", context_settings=_LENIENT)
def stop(ctx: typer.Context, state: StateOption = None, verify: VerifyOption = False) -> None:
    """Answer Claude Code's Stop hook (the main agent is about to finish)."""
    _answer(HookEvent.STOP, ctx, state, verify)


@hook_app.command("subagent-stop", context_settings=_LENIENT)
def subagent_stop(
    ctx: typer.Context, state: StateOption = None, verify: VerifyOption = False
) -> None:
    """Answer Claude Code's SubagentStop hook (a subagent is about to finish)."""
    _answer(HookEvent.SUBAGENT_STOP, ctx, state, verify)


app.add_typer(hook_app, name="hook")
