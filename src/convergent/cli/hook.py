"""``convergent hook stop|subagent-stop|pre-tool-use|post-tool-use``: the Claude Code hooks.

The command reads the hook's JSON from stdin, decides from the state file and prints
Claude Code's JSON answer. It always exits 0 (exit 2 would block the stop), ignores
unknown options instead of failing on them, and reports problems on stderr.
"""

from __future__ import annotations

from typing import Annotated

import typer

from convergent.cli._app import app
from convergent.cli._hook_entry import answer
from convergent.coordinator.hook import HookEvent

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
    typer.Option(
        "--verify",
        help="Run the base case checks before deciding (also while stop_hook_active is true).",
    ),
]


def _answer(event: HookEvent, ctx: typer.Context, state: str | None, verify: bool) -> None:
    raise typer.Exit(answer(event.value, state, verify, ctx.args))


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


@hook_app.command("pre-tool-use", context_settings=_LENIENT)
def pre_tool_use(ctx: typer.Context, state: StateOption = None) -> None:
    """Answer Claude Code's PreToolUse hook (every tool): no call runs once the work ended.

    The main agent's first call after the stop is denied with the reason and its final
    answer asked for, any later one ends its session; a subagent's calls are denied.
    """
    _answer(HookEvent.PRE_TOOL_USE, ctx, state, False)


@hook_app.command("post-tool-use", context_settings=_LENIENT)
def post_tool_use(ctx: typer.Context, state: StateOption = None) -> None:
    """Answer Claude Code's PostToolUse hook (matcher Agent|Task): tell the main agent.

    When a subagent's stop ended the work, the main agent learns why after the Agent
    call returns, and its next tool call ends the session.
    """
    _answer(HookEvent.POST_TOOL_USE, ctx, state, False)


app.add_typer(hook_app, name="hook")
