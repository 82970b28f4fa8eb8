"""`build_agent`: the one way from an `AgentSpec` to an `Agent`.

The builder turns each part a spec names into the plain object `Agent` takes: the
model (from `convergent.models.registry`), the tools (built-in names, import paths,
skills, MCP servers, agents called as tools), the ``ask_user`` tool and its channel, the
executive gate and its scorer, the settings, the context compressor and the limits. The
command line, `convergent.resume` and the Temporal workers and workflows all call it.

Where the models and the tools come from is a seam: a Temporal workflow passes a model
factory and a tool factory whose requests and calls run as activities on its workers,
and everything else is built here, the same way as for a local run.

Example:
    >>> agent = build_agent(AgentSpec(model="openai:gpt-4o-mini", tools=["calculator"]))
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from convergent.agent import Agent
from convergent.builtin_tools import calculator, fail, file_tools
from convergent.compaction import ContextCompressor
from convergent.durability.protocol import Durability
from convergent.edit_tools import edit_tools
from convergent.exceptions import UserError
from convergent.gate import (
    AskChannel,
    AskUser,
    DialogChannel,
    ExecutiveGate,
    NonInteractiveChannel,
    StdinChannel,
    TerminalChannel,
)
from convergent.gate.ask import ASK_USER
from convergent.mcp.config import MCPServer, parse_mcp_servers
from convergent.models.base import Model, ModelSettings
from convergent.models.registry import build_model, default_model_spec, model_from_string
from convergent.models.structured import StructuredToolCalling
from convergent.skills import Skills
from convergent.spec import AgentSpec, AgentToolSpec, tool_name_problem
from convergent.tools import Tool, tool

__all__ = [
    "ASK_CHANNELS",
    "BuildContext",
    "ModelFactory",
    "ModelRole",
    "ToolFactory",
    "Toolbox",
    "build_agent",
    "child_spec",
    "local_tools",
    "register_ask_channel",
    "registry_models",
    "resolve_tools",
]

ModelRole = Literal["model", "scorer"]
"""What a model is for: the agent's own requests, or the gate's scoring."""

ModelFactory = Callable[[ModelRole], Model]
"""Makes the model of a role, for one spec (``scorer`` is asked for only with a gate)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolbox:
    """The tools a spec names, with what comes with them."""

    tools: Sequence[Tool]
    """The tools, ``ask_user`` aside (the builder adds it, with the run's channel)."""
    system_prompt: str | None = None
    """The spec's system prompt, followed by the section its skills add."""
    workspace: str | None = None
    """The absolute folder the file tools work in."""
    mcp_servers: Sequence[MCPServer] = ()
    """MCP servers whose tools the agent offers too (started with each run)."""


ToolFactory = Callable[[AgentSpec], Toolbox]
"""Makes the tools a spec names."""


@dataclass(frozen=True, slots=True)
class BuildContext:
    """Where the agent being built will run."""

    run_id: str | None = None
    """The run's id, when known (ask channels such as ``web`` need it)."""
    store: Durability | None = None
    """The run store, when the run is durable (ask channels such as ``web`` need it)."""
    ask_channel: AskChannel | None = None
    """Ask the user through this channel instead of the spec's ``ask_via`` (a Temporal
    workflow asks through its signals)."""


ChannelFactory = Callable[[BuildContext], AskChannel]

ASK_CHANNELS: dict[str, ChannelFactory] = {
    "terminal": lambda context: TerminalChannel(),
    "stdin": lambda context: StdinChannel(echo=sys.stderr),
    "none": lambda context: NonInteractiveChannel(),
    "dialog": lambda context: _dialog(),
    "auto": lambda context: TerminalChannel() if _interactive() else NonInteractiveChannel(),
}
"""Ask channels by name; `register_ask_channel` adds more (the web console adds ``web``)."""


def _interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def _dialog() -> AskChannel:
    reason = DialogChannel.unavailable_reason()
    if reason is not None:
        raise UserError(f"ask_via dialog is not possible here: {reason}")
    return DialogChannel()


def register_ask_channel(name: str, factory: ChannelFactory) -> None:
    """Make ``ask_via=name`` build its channel with ``factory``."""
    ASK_CHANNELS[name] = factory


def _ask_channel(name: str, context: BuildContext) -> AskChannel:
    if context.ask_channel is not None:
        return context.ask_channel
    factory = ASK_CHANNELS.get(name)
    if factory is None:
        known = ", ".join(sorted(ASK_CHANNELS))
        raise UserError(f"unknown ask channel {name!r}; use one of {known}")
    return factory(context)


def _imported(path: str) -> list[Tool]:
    module_name, _, attribute = path.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot import tool {path!r}: {exc}") from None
    if isinstance(value, Tool):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(item, Tool) for item in value):
        return list(value)
    if callable(value):
        return [tool(value)]
    raise UserError(f"tool {path!r} is not a Tool, a list of tools or a function")


def resolve_tools(names: Sequence[str], workspace: str | Path) -> list[Tool]:
    """The tools ``names`` stand for (built-in names or import paths); ``ask_user`` excluded.

    Raises:
        UserError: For an unknown name or an import path that does not lead to tools.
    """
    resolved: list[Tool] = []
    families: dict[str, dict[str, Tool]] = {}
    for name in names:
        wrong = tool_name_problem(name)
        if wrong is not None:
            raise UserError(wrong)
        match name:
            case "calculator":
                resolved.append(calculator)
            case "fail":
                resolved.append(fail)
            case "read_file" | "list_dir":
                family = families.setdefault("read", {t.name: t for t in file_tools(workspace)})
                resolved.append(family[name])
            case "write_file" | "edit_file":
                family = families.setdefault("edit", {t.name: t for t in edit_tools(workspace)})
                resolved.append(family[name])
            case "ask_user":
                continue
            case _:
                resolved.extend(_imported(name))
    return resolved


def local_tools(spec: AgentSpec) -> Toolbox:
    """The tools of ``spec``, made in this process (the default tool factory).

    They are the named tools, the skills' tools, and each of the spec's ``agents``,
    built here and offered with `Agent.as_tool`.

    Raises:
        UserError: If the workspace is not a folder here, or a tool, skill, MCP server
            entry or agent cannot be loaded.
    """
    workspace = str(Path(spec.workspace or ".").resolve())
    if not Path(workspace).is_dir():
        raise UserError(f"workspace folder not found: {workspace}")
    servers = parse_mcp_servers(spec.mcp_servers, origin="agent spec") if spec.mcp_servers else []
    tools = resolve_tools(spec.tools, workspace)
    skills = Skills.discover(*spec.skills) if spec.skills else Skills(())
    if len(skills):
        tools += skills.tools()
    for child in spec.agents:
        agent = build_agent(child_spec(child, workspace))
        tools.append(agent.as_tool(child.name, child.description, timeout=child.timeout))
    return Toolbox(
        tools=tools,
        system_prompt=skills.system_prompt(spec.system_prompt) or None,
        workspace=workspace,
        mcp_servers=servers,
    )


def child_spec(child: AgentToolSpec, workspace: str | None) -> AgentSpec:
    """The spec of an agent called as a tool; one that names no workspace works in its caller's."""
    if child.agent.workspace is not None or workspace is None:
        return child.agent
    return child.agent.model_copy(update={"workspace": workspace})


def registry_models(spec: AgentSpec) -> ModelFactory:
    """The models of ``spec`` from the model registry (the default model factory).

    ``model`` is the spec's model, set up for its protocol; ``scorer`` is the gate's
    model, or else the same model without the protocol's wrapper.
    """

    @functools.cache
    def own() -> Model:
        return build_model(
            spec.model, base_url=spec.base_url, protocol=spec.protocol, price=spec.price
        )

    def model(role: ModelRole) -> Model:
        if role == "model":
            return own()
        if spec.gate is not None and spec.gate.model is not None:
            return model_from_string(spec.gate.model, base_url=spec.base_url)
        chosen = own()
        return chosen.inner if isinstance(chosen, StructuredToolCalling) else chosen

    return model


def build_agent(
    spec: AgentSpec,
    /,
    *,
    context: BuildContext | None = None,
    model_factory: ModelFactory | None = None,
    tool_factory: ToolFactory | None = None,
    **overrides: Any,
) -> Agent:
    """Build the agent ``spec`` describes.

    The agent keeps the spec (as JSON) with the model and the workspace resolved, so
    that a durable run resumed later, elsewhere, builds the same agent even if the
    environment's defaults changed.

    Args:
        spec: The agent.
        context: Where it will run: the run's id and store (for ask channels that need
            them, such as the web console's), or the channel to ask the user through.
        model_factory: Makes the model of each role; default: `registry_models`.
        tool_factory: Makes the tools the spec names; default: `local_tools`.
        **overrides: `Agent` arguments that replace what the spec builds
            (``observers=``, ``verifier=``, ``record_events=``...; ``spec=`` the JSON
            stored with its durable runs).

    Raises:
        UserError: If a part cannot be built here (unknown model, tool or ask channel,
            a missing folder), or a cost limit is set and a model's price is unknown
            (`Agent.check_cost_limit`).
    """
    context = context or BuildContext()
    if model_factory is None:
        spec = spec.model_copy(update={"model": spec.model or default_model_spec()})
        model_factory = registry_models(spec)
    model = model_factory("model")
    toolbox = (tool_factory or local_tools)(spec)
    tools = list(toolbox.tools)
    asker = AskUser(_ask_channel(spec.ask_via, context), timeout=spec.ask_timeout)
    if ASK_USER in spec.tools or spec.gate is not None:
        tools.append(asker.tool)
    gate = None
    if spec.gate is not None:
        gate = ExecutiveGate(model_factory("scorer"), asker, threshold=spec.gate.threshold)
    if toolbox.workspace is not None:
        spec = spec.model_copy(update={"workspace": toolbox.workspace})
    arguments: dict[str, Any] = {
        "model": model,
        "tools": tools,
        "system_prompt": toolbox.system_prompt,
        "limits": spec.limits,
        "policy": spec.policy,
        "settings": (
            ModelSettings(temperature=spec.temperature) if spec.temperature is not None else None
        ),
        "context_policy": ContextCompressor() if spec.compress else None,
        "gate": gate,
        "parallel_tool_calls": spec.parallel_tool_calls,
        "output_schema": spec.output_schema,
        "workspace": toolbox.workspace,
        "mcp_servers": toolbox.mcp_servers,
        "spec": spec.to_json(),
    }
    agent = Agent(**(arguments | overrides))
    agent.check_cost_limit()
    return agent
