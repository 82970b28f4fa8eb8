"""``convergent run TASK``: options -> `AgentSpec` -> one agent run to an objective stop."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from convergent.builder import BuildContext, build_agent, resolve_tools
from convergent.cli._app import app
from convergent.cli._checked import SPEC_OPTIONS, checked
from convergent.cli._gate import ASK_VIA, parse_threshold
from convergent.cli._options import (
    BaseUrlOption,
    JsonOption,
    McpConfigOption,
    McpEffectOption,
    ModelOption,
    OtlpFileOption,
    OtlpOption,
    TraceOption,
)
from convergent.cli._policy import parse_policy, parse_tool_caps
from convergent.cli._session import Session, default_steer, new_run_id, open_store
from convergent.cli._telemetry import otlp_export
from convergent.cli._temporal import TaskQueueOption, TemporalOption, start_run
from convergent.durability.sqlite import DEFAULT_DB_PATH
from convergent.exceptions import UserError
from convergent.limits import Limits
from convergent.mcp.config import (
    MCPServer,
    declare_effects,
    load_mcp_config,
    mcp_config,
    server_from_command,
)
from convergent.models._prices import parse_price
from convergent.models.registry import default_model_spec
from convergent.output import load_output_schema
from convergent.policy import StopPolicy
from convergent.spec import AgentSpec, command_line_tools

__all__ = ["mcp_servers", "read_task", "run_command"]

DEFAULT_MAX_CYCLES = Limits().max_cycles
DEFAULT_REPEATED_FAILURES = StopPolicy().max_repeated_failures or 0
"""The cycle limit of a run that sets none: `Limits`' own, the same from Python and here."""

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant that solves tasks with tools. Call a tool whenever it "
    "helps; when you have the answer, reply with the answer in plain text and no tool call."
)


def read_task(task: str) -> str:
    """The task text: the argument, or standard input for ``-``.

    Raises:
        UserError: For a task that is empty or not UTF-8.
    """
    if task == "-":
        data = sys.stdin.buffer.read()
        try:
            task = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"the task on standard input is not UTF-8 (byte {exc.start})") from None
    else:
        try:
            task.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError("the task is not valid UTF-8") from None
    if not task.strip():
        raise UserError("the task is empty")
    return task


def mcp_servers(
    commands: list[str] | None, config: Path | None, effects: list[str] | None = None
) -> list[MCPServer]:
    """The servers of ``--mcp-config FILE`` and ``--mcp COMMAND``, in that order.

    The tools' effects declared with ``--mcp-effect`` are added to their servers.

    Raises:
        UserError: For a bad configuration file or command line.
    """
    servers = load_mcp_config(config) if config is not None else []
    for line in commands or ():
        servers.append(server_from_command(line, taken=[s.name for s in servers]))
    if effects:
        if not servers:
            raise UserError("--mcp-effect needs an MCP server (--mcp or --mcp-config)")
        servers = declare_effects(servers, effects)
    # the run's spec keeps the folder, so that a resume from elsewhere starts them alike
    here = str(Path.cwd())
    return [replace(s, cwd=s.cwd or here) if s.transport == "stdio" else s for s in servers]


def own_tools(paths: list[str], workspace: Path) -> list[str]:
    """The ``--tool`` import paths, each checked to import to tools now.

    A Temporal run is built on a worker: a path that does not import fails here, once,
    rather than there.

    Raises:
        UserError: For a path that is not ``package.module:attribute`` or does not import.
    """
    for path in paths:
        if ":" not in path:
            raise UserError(f"--tool must be package.module:attribute, got {path!r}")
        resolve_tools([path], workspace)
    return paths


def absolute_model_spec(spec: str) -> str:
    """``spec`` with a file it names (``scripted:PATH``, ``local:PATH``) made absolute.

    The agent spec keeps it, and a resume may start in another folder (the console
    starts it in the run's workspace): the path must mean the file it meant here.
    """
    prefix, _, rest = spec.partition(":")
    if prefix in ("scripted", "local") and rest:
        return f"{prefix}:{Path(rest).expanduser().resolve()}"
    return spec


def _workspace(path: Path) -> str:
    if path.is_file():
        raise UserError(f"--workspace must be a folder, not a file: {path}")
    if not path.is_dir():
        raise UserError(f"workspace folder not found: {path}")
    return str(path.resolve())


@app.command("run")
def run_command(
    task: Annotated[str, typer.Argument(help="What the agent should do ('-': read stdin).")],
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    max_cycles: Annotated[
        int | None,
        typer.Option(
            help=f"Maximum model requests (default: {DEFAULT_MAX_CYCLES}, as in Python).",
            show_default=False,
        ),
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget (input + output).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Wall-time budget in seconds.")] = None,
    max_cost: Annotated[
        float | None, typer.Option(help="Cost budget in US dollars (needs a priced model).")
    ] = None,
    price: Annotated[
        str | None,
        typer.Option(
            metavar="IN,OUT",
            help="The model's price: US dollars per million input and output tokens "
            "(default: the price table's, for OpenAI and Anthropic models).",
        ),
    ] = None,
    tool_error: Annotated[
        str,
        typer.Option(
            help="On a tool failure: continue (send it to the model; the failure streaks "
            "stop the run) or stop at once."
        ),
    ] = "continue",
    max_tool_errors: Annotated[
        int,
        typer.Option(
            help="How often the same call may fail in one streak of failing steps: the "
            "note, then the stop at the next (0: never; the policy's max_repeated_failures)."
        ),
    ] = DEFAULT_REPEATED_FAILURES,
    max_tool_calls: Annotated[
        int | None, typer.Option(help="Tool calls the run may make in all.")
    ] = None,
    max_calls_per_tool: Annotated[
        list[str] | None,
        typer.Option(
            "--max-calls-per-tool",
            metavar="[TOOL=]N",
            help="Calls each tool may get (N), or one tool (TOOL=N; repeatable).",
        ),
    ] = None,
    on_max_tool_calls: Annotated[
        str,
        typer.Option(
            metavar="stop|continue",
            help="A call past --max-tool-calls: stop the run, or refuse the call with a "
            "note and go on.",
        ),
    ] = "stop",
    on_max_calls_per_tool: Annotated[
        str,
        typer.Option(
            metavar="stop|continue",
            help="A call past its --max-calls-per-tool cap: stop the run, or refuse the "
            "call with a note and go on.",
        ),
    ] = "stop",
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            metavar="RULE=VALUE",
            help="A stop rule of StopPolicy, e.g. max_repeated_calls=4, notes=0, "
            "max_failing_steps=none (repeatable; see docs/loop.md).",
        ),
    ] = None,
    final_answer: Annotated[
        bool,
        typer.Option(
            "--final-answer/--no-final-answer",
            help="After a stop for max_cycles, stalled, budget_exhausted or tool_error, ask "
            "the model once more, without tools, for its best answer.",
        ),
    ] = True,
    protocol: Annotated[
        str | None,
        typer.Option(help="Tool-call protocol: native or structured (default: the model's own)."),
    ] = None,
    workspace: Annotated[Path, typer.Option(help="Folder the file tools work in.")] = Path("."),
    system: Annotated[str | None, typer.Option(help="System prompt.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
    trace: TraceOption = None,
    json_output: JsonOption = False,
    gate: Annotated[
        str | None,
        typer.Option(
            "--gate",
            metavar="[THRESHOLD]",
            help="Score each proposed step; below THRESHOLD (default 0.85) ask the user "
            "instead of acting.",
        ),
    ] = None,
    ask_via: Annotated[
        str | None,
        typer.Option(
            help=f"How ask_user reaches you: {', '.join(ASK_VIA)} "
            "(default: terminal on a TTY, else none: the run stops needs_user)."
        ),
    ] = None,
    ask_timeout: Annotated[float, typer.Option(help="Seconds to wait for each answer.")] = 300.0,
    gate_model: Annotated[
        str | None, typer.Option(help="Model that scores steps for --gate (default: --model).")
    ] = None,
    run_id: Annotated[str | None, typer.Option(help="Name the run (default: a random id).")] = None,
    db: Annotated[Path, typer.Option(help="Run database.")] = DEFAULT_DB_PATH,
    checkpoint: Annotated[
        bool, typer.Option(help="Save the run as it goes so it can be resumed.")
    ] = True,
    steer: Annotated[
        bool | None,
        typer.Option(
            help="Read steering lines from standard input while running "
            "(default: when it is a terminal and not --json)."
        ),
    ] = None,
    allow_writes: Annotated[
        bool, typer.Option(help="Offer write_file and edit_file (confined to the workspace).")
    ] = False,
    skills: Annotated[
        list[Path] | None,
        typer.Option("--skills", help="A skill folder, or a folder of them (repeatable)."),
    ] = None,
    builtin_tools: Annotated[
        bool | None,
        typer.Option(
            "--builtin-tools/--no-builtin-tools",
            help="Offer the built-in tools (calculator, read_file, list_dir, ask_user); "
            "without them only --tool, --allow-writes and MCP tools are offered. Default: "
            "all of them, or only ask_user beside tools of your own (--tool, --mcp).",
            show_default=False,
        ),
    ] = None,
    tool: Annotated[
        list[str] | None,
        typer.Option(
            "--tool",
            metavar="MODULE:ATTR",
            help="Offer your own tool: a Tool, a list of tools or a typed function, "
            "importable from the current folder or the Python path (repeatable).",
        ),
    ] = None,
    mcp: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp",
            metavar="COMMAND",
            help="Offer the tools of an MCP server started with this command line, "
            "e.g. 'mcp-server-time' (repeatable).",
        ),
    ] = None,
    mcp_config_file: McpConfigOption = None,
    mcp_effect: McpEffectOption = None,
    output_schema: Annotated[
        Path | None,
        typer.Option(
            "--output-schema",
            metavar="FILE",
            help="A JSON Schema file: the run completes only when its answer is JSON "
            "valid under it (the errors go back to the model until it is).",
        ),
    ] = None,
    temporal: TemporalOption = None,
    task_queue: TaskQueueOption = "convergent",
    detach: Annotated[
        bool,
        typer.Option("--detach", help="With --temporal: start the run, print its id and return."),
    ] = False,
    otlp: OtlpOption = None,
    otlp_file: OtlpFileOption = None,
) -> None:
    """Run an agent until its response has no tool calls, or another objective stop."""
    text = read_task(task)
    if max_tool_errors < 0:
        raise UserError(f"--max-tool-errors must be >= 0, got {max_tool_errors}")
    if ask_via is not None and ask_via not in ASK_VIA:
        raise UserError(f"--ask-via must be one of {', '.join(ASK_VIA)}, got {ask_via!r}")
    if gate_model is not None and gate is None:
        raise UserError("--gate-model needs --gate")
    if (otlp is not None or otlp_file is not None) and temporal is not None:
        raise UserError("--otlp traces runs in this process; a --temporal run runs on a worker")
    if detach and temporal is None:
        raise UserError("--detach needs --temporal: a local run ends with its command")
    servers = mcp_servers(mcp, mcp_config_file, mcp_effect)
    model_spec = absolute_model_spec(model or default_model_spec())
    rules = parse_policy(policy or [])
    spec = checked(
        AgentSpec,
        {
            "model": model_spec,
            "base_url": base_url,
            "price": parse_price(price) if price is not None else None,
            "protocol": protocol,
            "temperature": temperature,
            "system_prompt": system or DEFAULT_SYSTEM_PROMPT,
            "tools": [
                *command_line_tools(
                    model_spec,
                    allow_writes=allow_writes,
                    builtin=builtin_tools,
                    own_tools=bool(tool or servers),
                ),
                *own_tools(tool or [], workspace),
            ],
            "workspace": _workspace(workspace),
            "skills": [str(path.resolve()) for path in skills or ()],
            "mcp_servers": mcp_config(servers),
            "gate": {"threshold": parse_threshold(gate), "model": gate_model} if gate else None,
            "ask_via": ask_via or "auto",
            "ask_timeout": ask_timeout,
            "limits": {
                "max_cycles": DEFAULT_MAX_CYCLES if max_cycles is None else max_cycles,
                "max_total_tokens": max_tokens,
                "max_seconds": max_seconds,
                "max_cost": max_cost,
                "max_tool_calls": max_tool_calls,
                "max_calls_per_tool": parse_tool_caps(max_calls_per_tool or []),
                "on_max_tool_calls": on_max_tool_calls,
                "on_max_calls_per_tool": on_max_calls_per_tool,
            },
            "policy": {
                "on_tool_error": tool_error,
                "max_repeated_failures": max_tool_errors or None,
                "final_answer": final_answer,
                **rules,
            },
            "output_schema": (
                load_output_schema(output_schema) if output_schema is not None else None
            ),
        },
        # a rule given with --policy is named as it was given, not by its own option
        {**SPEC_OPTIONS, **{f"policy.{rule}": f"--policy {rule}" for rule in rules}},
    )
    if temporal is not None:
        start_run(
            temporal,
            task_queue,
            db,
            spec,
            text,
            new_run_id(None, run_id),
            json_output=json_output,
            steer=default_steer(steer, json_output),
            detach=detach,
        )
        return
    with otlp_export(otlp, otlp_file):
        store = open_store(db, must_exist=False) if checkpoint else None
        session = Session(
            store=store,
            run_id=new_run_id(store, run_id),
            steer=default_steer(steer, json_output),
            json_output=json_output,
            trace=trace,
        )
        context = BuildContext(run_id=session.run_id, store=store)
        session.run(build_agent(spec, context=context), text)
