"""``convergent run TASK``: run one agent to an objective stop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from convergent.agent import Agent
from convergent.builtin_tools import default_tools
from convergent.cli import app
from convergent.cli._durable import Durable, RunConfig, default_steer, new_run_id, open_store
from convergent.cli._gate import ASK_VIA, GateView, build_gate_parts
from convergent.cli._live import LiveView
from convergent.cli._options import BaseUrlOption, JsonOption, ModelOption, TraceOption
from convergent.events import Event, EventHandler, JsonlTraceWriter
from convergent.exceptions import UserError
from convergent.models.base import Model, ModelSettings
from convergent.models.local import LocalModel
from convergent.models.registry import default_model_spec, model_from_string
from convergent.models.scripted import ScriptedModel
from convergent.models.structured import StructuredToolCalling
from convergent.result import RunResult
from convergent.state import RunState
from convergent.stop import Limits, StopReason
from convergent.store import DEFAULT_DB_PATH

__all__ = ["run_command"]

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant that solves tasks with tools. Call a tool whenever it "
    "helps; when you have the answer, reply with the answer in plain text and no tool call."
)


def check_limit_options(
    max_cycles: int, max_tokens: int | None, max_seconds: float | None, max_cost: float | None
) -> None:
    """Reject negative ``--max-*`` values with a one-line error naming the option."""
    for name, value in (
        ("--max-cycles", max_cycles),
        ("--max-tokens", max_tokens),
        ("--max-seconds", max_seconds),
        ("--max-cost", max_cost),
    ):
        if value is not None and value < 0:
            raise UserError(f"{name} must be >= 0, got {value}")


def _limits(
    max_cycles: int, max_tokens: int | None, max_seconds: float | None, max_cost: float | None
) -> Limits:
    check_limit_options(max_cycles, max_tokens, max_seconds, max_cost)
    return Limits(
        max_cycles=max_cycles,
        max_total_tokens=max_tokens,
        max_seconds=max_seconds,
        max_cost=max_cost,
    )


def build_model(spec: str | None, base_url: str | None, protocol: str | None) -> Model:
    """The model a ``--model`` value names, set up for the requested tool protocol.

    Without ``--protocol`` each backend uses its own default: native tool calling for
    providers, the measured best protocol for the embedded model.
    """
    if protocol not in (None, "native", "structured"):
        raise UserError(f"--protocol must be native or structured, got {protocol!r}")
    model = model_from_string(spec or default_model_spec(), base_url=base_url)
    if isinstance(model, LocalModel):
        if protocol is not None:
            model.protocol = "native" if protocol == "native" else "structured"
        return model
    return StructuredToolCalling(model) if protocol == "structured" else model


async def _execute(
    agent: Agent,
    task: str | None,
    handlers: list[EventHandler],
    scorer: Model | None = None,
    **options: Any,
) -> RunResult:
    def on_event(event: Event) -> None:
        for handler in handlers:
            handler(event)

    async with agent.model:
        try:
            return await agent.run(task, on_event=on_event, **options)
        finally:
            if scorer is not None:
                await scorer.aclose()


@app.command("run")
def run_command(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    max_cycles: Annotated[int, typer.Option(help="Maximum model requests.")] = 20,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget (input + output).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Wall-time budget in seconds.")] = None,
    max_cost: Annotated[float | None, typer.Option(help="Cost budget.")] = None,
    tool_error: Annotated[str, typer.Option(help="On a tool failure: stop or continue.")] = "stop",
    protocol: Annotated[
        str | None,
        typer.Option(help="Tool-call protocol: native or structured (default: the model's own)."),
    ] = None,
    workspace: Annotated[Path, typer.Option(help="Folder the file tools may read.")] = Path("."),
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
    db: Annotated[Path, typer.Option(help="Checkpoint database.")] = DEFAULT_DB_PATH,
    checkpoint: Annotated[
        bool, typer.Option(help="Save the run after every cycle so it can be resumed.")
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
) -> None:
    """Run an agent until its response has no tool calls, or another objective stop."""
    if tool_error not in ("stop", "continue"):
        raise UserError(f"--tool-error must be stop or continue, got {tool_error!r}")
    if not workspace.is_dir():
        raise UserError(f"workspace folder not found: {workspace}")
    limits = _limits(max_cycles, max_tokens, max_seconds, max_cost)
    config = RunConfig(
        model=model,
        base_url=base_url,
        protocol=protocol,
        workspace=str(workspace.resolve()),
        system=system or DEFAULT_SYSTEM_PROMPT,
        tool_error=tool_error,
        temperature=temperature,
        allow_writes=allow_writes,
        skills=[str(path.resolve()) for path in skills or ()],
        gate=gate,
        ask_via=ask_via,
        ask_timeout=ask_timeout,
        gate_model=gate_model,
    )
    store = open_store(db, must_exist=False) if checkpoint else None
    durable = Durable(
        config,
        store=store,
        run_id=new_run_id(store, run_id),
        steer=default_steer(steer, json_output),
        quiet=json_output,
    )
    launch(config, limits, durable, task=task, trace=trace, json_output=json_output)


def launch(
    config: RunConfig,
    limits: Limits,
    durable: Durable,
    *,
    task: str | None = None,
    state: RunState | None = None,
    answers: dict[str, str] | None = None,
    message: str | None = None,
    trace: Path | None = None,
    json_output: bool = False,
) -> None:
    """Build the agent ``config`` describes, run ``task`` (or continue ``state``) to a stop.

    Raises:
        typer.Exit: With code 1 unless the run completed.
    """
    chosen = build_model(config.model, config.base_url, config.protocol)
    asker, action_gate, scorer = build_gate_parts(
        config.gate, config.ask_via, config.ask_timeout, config.gate_model, config.base_url, chosen
    )
    # `fail` exists to demonstrate tool_error with scripted runs; a real model would only
    # be distracted by a tool that always fails
    builtins = default_tools(Path(config.workspace), include_fail=isinstance(chosen, ScriptedModel))
    tools = [*builtins, *durable.tools, asker.tool]
    agent = Agent(
        chosen,
        tools,
        gate=action_gate,
        system_prompt=durable.system_prompt(),
        limits=limits,
        on_tool_error="stop" if config.tool_error == "stop" else "continue",
        settings=(
            ModelSettings(temperature=config.temperature)
            if config.temperature is not None
            else None
        ),
        observers=durable.observers(tools),
        context_policy=durable.context_policy,
    )
    handlers: list[EventHandler] = [durable.on_event]
    writer: JsonlTraceWriter | None = None
    if trace is not None:
        try:
            writer = JsonlTraceWriter(trace)
        except OSError as exc:
            raise UserError(f"cannot write trace file {trace}: {exc.strerror}") from None
        handlers.append(writer)
    if not json_output:
        console = Console(highlight=False)
        handlers += [LiveView(console), GateView(console)]
    options = {"run_id": durable.run_id, "state": state, "answers": answers}
    try:
        with durable.steering(message) as steering:
            result = asyncio.run(
                _execute(agent, task, handlers, scorer, steering=steering, **options)
            )
    finally:
        if writer is not None:
            writer.close()
    if json_output:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    if result.stop_reason is not StopReason.COMPLETED:
        raise typer.Exit(1)
