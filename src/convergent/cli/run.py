"""``convergent run TASK``: run one agent to an objective stop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from convergent.agent import Agent, RunResult
from convergent.builtin_tools import default_tools
from convergent.cli import app
from convergent.cli._live import LiveView
from convergent.events import Event, JsonlTraceWriter
from convergent.exceptions import UserError
from convergent.models.base import Model, ModelSettings
from convergent.models.registry import default_model_spec, model_from_string
from convergent.models.structured import StructuredToolCalling
from convergent.stop import Limits, StopReason

__all__ = ["run_command"]

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful assistant that solves tasks with tools. Call a tool whenever it "
    "helps; when you have the answer, reply with the answer in plain text and no tool call."
)


def _limits(
    max_cycles: int, max_tokens: int | None, max_seconds: float | None, max_cost: float | None
) -> Limits:
    for name, value in (
        ("--max-cycles", max_cycles),
        ("--max-tokens", max_tokens),
        ("--max-seconds", max_seconds),
        ("--max-cost", max_cost),
    ):
        if value is not None and value < 0:
            raise UserError(f"{name} must be >= 0, got {value}")
    return Limits(
        max_cycles=max_cycles,
        max_total_tokens=max_tokens,
        max_seconds=max_seconds,
        max_cost=max_cost,
    )


def build_model(spec: str | None, base_url: str | None, protocol: str) -> Model:
    """The model a ``--model`` value names, wrapped for the requested tool protocol."""
    if protocol not in ("native", "structured"):
        raise UserError(f"--protocol must be native or structured, got {protocol!r}")
    model = model_from_string(spec or default_model_spec(), base_url=base_url)
    return StructuredToolCalling(model) if protocol == "structured" else model


async def _execute(agent: Agent, task: str, handlers: list[object]) -> RunResult:
    def on_event(event: Event) -> None:
        for handler in handlers:
            handler(event)  # type: ignore[operator]

    async with agent.model:
        return await agent.run(task, on_event=on_event)


@app.command("run")
def run_command(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: Annotated[
        str | None,
        typer.Option(help="scripted:PATH, openai:MODEL, anthropic:MODEL, local, local:PATH.gguf"),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")
    ] = None,
    max_cycles: Annotated[int, typer.Option(help="Maximum model requests.")] = 20,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget (input + output).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Wall-time budget in seconds.")] = None,
    max_cost: Annotated[float | None, typer.Option(help="Cost budget.")] = None,
    tool_error: Annotated[str, typer.Option(help="On a tool failure: stop or continue.")] = "stop",
    protocol: Annotated[
        str, typer.Option(help="Tool-call protocol: native or structured.")
    ] = "native",
    workspace: Annotated[Path, typer.Option(help="Folder the file tools may read.")] = Path("."),
    system: Annotated[str | None, typer.Option(help="System prompt.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
    trace: Annotated[
        Path | None, typer.Option(help="Write every event as JSON Lines here.")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object, nothing else.")
    ] = False,
) -> None:
    """Run an agent until its response has no tool calls, or another objective stop."""
    if tool_error not in ("stop", "continue"):
        raise UserError(f"--tool-error must be stop or continue, got {tool_error!r}")
    if not workspace.is_dir():
        raise UserError(f"workspace folder not found: {workspace}")
    limits = _limits(max_cycles, max_tokens, max_seconds, max_cost)
    agent = Agent(
        build_model(model, base_url, protocol),
        default_tools(workspace),
        system_prompt=system or DEFAULT_SYSTEM_PROMPT,
        limits=limits,
        on_tool_error="stop" if tool_error == "stop" else "continue",
        settings=ModelSettings(temperature=temperature) if temperature is not None else None,
    )
    handlers: list[object] = []
    writer: JsonlTraceWriter | None = None
    if trace is not None:
        try:
            writer = JsonlTraceWriter(trace)
        except OSError as exc:
            raise UserError(f"cannot write trace file {trace}: {exc.strerror}") from None
        handlers.append(writer)
    if not json_output:
        handlers.append(LiveView(Console(highlight=False)))
    try:
        result = asyncio.run(_execute(agent, task, handlers))
    finally:
        if writer is not None:
            writer.close()
    if json_output:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    if result.stop_reason is not StopReason.COMPLETED:
        raise typer.Exit(1)
