"""`RunRecipe`: a serialisable description of an agent, to rebuild it in any process.

A durable run stores its recipe, so that it can be resumed from another process (the
command line, a Python script, a Temporal worker on another machine) with the same
model, tools, workspace, prompt, skills, gate, limits and tool-error policy. Tools are
named: a built-in name (`BUILTIN_TOOLS`) or an import path ``package.module:attribute``
naming a `Tool`, a list of tools, or a plain typed function.

Example:
    >>> recipe = RunRecipe(model="openai:gpt-4o-mini", tools=["calculator", "myapp.tools:lookup"])
    >>> agent = Agent.from_recipe(recipe)

A recipe carries a ``version``; one written by a newer convergent is refused with a
clear error rather than half-understood.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer

from convergent.builtin_tools import calculator, fail, file_tools
from convergent.compaction import ContextCompressor
from convergent.edit_tools import edit_tools
from convergent.exceptions import UserError
from convergent.gate import (
    DEFAULT_THRESHOLD,
    AskChannel,
    AskUser,
    DialogChannel,
    ExecutiveGate,
    NonInteractiveChannel,
    StdinChannel,
    TerminalChannel,
)
from convergent.mcp.config import parse_mcp_servers, stored_mcp_config
from convergent.models.base import Model, ModelSettings
from convergent.models.registry import build_model, default_model_spec, model_from_string
from convergent.models.structured import StructuredToolCalling
from convergent.skills import Skills
from convergent.stop import Limits
from convergent.tools import Tool, tool

__all__ = [
    "ASK_CHANNELS",
    "BUILTIN_TOOLS",
    "RECIPE_VERSION",
    "BuildContext",
    "GateRecipe",
    "LimitsRecipe",
    "RunRecipe",
    "agent_arguments",
    "register_ask_channel",
    "resolve_tools",
]

RECIPE_VERSION = 3
"""Version of the recipe's shape; bumped when a field is added or changes meaning.

Version 2 added ``final_answer`` and ``limits.stall_nudges``; version 3 ``price``."""

BUILTIN_TOOLS = (
    "calculator",
    "read_file",
    "list_dir",
    "write_file",
    "edit_file",
    "ask_user",
    "fail",
)
"""Tool names a recipe may use without an import path."""


_Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class LimitsRecipe(BaseModel):
    """The run's budgets (see `convergent.stop.Limits`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_cycles: int | None = Field(default=50, ge=0)
    """Maximum model requests."""
    max_total_tokens: int | None = Field(default=None, ge=0)
    """Maximum input plus output tokens."""
    max_seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Maximum wall-clock seconds."""
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Maximum cost."""
    max_repeated_calls: int = Field(default=3, ge=1)
    """Identical calls (with the same results, nothing changed) that stall the run."""
    stall_nudges: int = Field(default=1, ge=0)
    """Notes to the model before a stall or tool-error streak stops the run."""

    def build(self) -> Limits:
        """The `Limits` object."""
        return Limits(**self.model_dump())

    @classmethod
    def of(cls, limits: Limits) -> LimitsRecipe:
        """The recipe form of a `Limits` object."""
        return cls(**dataclasses.asdict(limits))


class GateRecipe(BaseModel):
    """The executive gate (`convergent.gate.ExecutiveGate`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(default=DEFAULT_THRESHOLD, ge=0.0, le=1.0)
    """Below this score the user is asked instead of acting."""
    model: str | None = None
    """Model that scores steps (default: the run's own model)."""


class RunRecipe(BaseModel):
    """Everything needed to rebuild an agent: model, tools, workspace, prompt and policies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = RECIPE_VERSION
    """Version of this shape (`RECIPE_VERSION`)."""
    model: str | None = None
    """Model spec (``openai:MODEL``, ``anthropic:MODEL``, ``local``, ``scripted:PATH``);
    None: a configured provider, else the embedded model."""
    base_url: str | None = None
    """Base URL of an OpenAI-compatible or Anthropic-compatible server."""
    protocol: Literal["native", "structured"] | None = None
    """Tool-call protocol; None: the model's own default."""
    price: tuple[_Price, _Price] | None = None
    """The model's price, (input, output) in US dollars per million tokens; None: the
    price table's (see `convergent.models.TokenPrice`)."""
    temperature: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    """Sampling temperature."""
    system_prompt: str | None = None
    """Instructions before the task (the skills section is added after them)."""
    tools: tuple[str, ...] = ("calculator", "read_file", "list_dir", "ask_user")
    """Built-in tool names and ``module:attribute`` import paths."""
    workspace: str | None = None
    """Folder the file tools work in (default: the current folder when built)."""
    skills: tuple[str, ...] = ()
    """Skill folders, or folders of them."""
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """MCP tool servers, in the ``mcpServers`` format of Claude Desktop and Claude Code
    (`convergent.mcp.mcp_config` writes it); they are started again when a run resumes.
    Serialised without literal ``env`` values (`convergent.mcp.config.stored_mcp_config`)."""
    gate: GateRecipe | None = None
    """The executive gate, if any."""
    ask_via: str = "none"
    """How ``ask_user`` reaches the user (`ASK_CHANNELS`; ``auto``: the terminal when
    standard input is one, else none)."""
    ask_timeout: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    """Seconds to wait for each answer."""
    limits: LimitsRecipe = Field(default_factory=LimitsRecipe)
    """Budgets."""
    on_tool_error: Literal["continue", "stop"] = "continue"
    """Tool-error policy (see `Agent`)."""
    max_consecutive_tool_errors: int | None = Field(default=3, ge=1)
    """Failing steps in a row that stop the run under ``continue`` (after a nudge)."""
    final_answer: bool = True
    """After a stop for max_cycles, stalled, budget_exhausted or tool_error, ask the
    model once more, without tools, for its best answer."""
    compress: bool = True
    """Compress the context near the model's window."""
    parallel_tool_calls: bool = True
    """Run a response's calls concurrently."""

    @field_serializer("mcp_servers")
    def _without_secrets(self, servers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return stored_mcp_config(servers)

    @classmethod
    def from_json(cls, data: Any) -> RunRecipe:
        """Read a stored recipe (a dict or JSON text).

        Raises:
            UserError: If it comes from a newer convergent, or is malformed.
        """
        if isinstance(data, str | bytes):
            try:
                data = json.loads(data)
            except ValueError:
                raise UserError("invalid recipe: not JSON") from None
        if isinstance(data, Mapping):
            version = data.get("version", RECIPE_VERSION)
            if isinstance(version, int) and version > RECIPE_VERSION:
                raise UserError(
                    f"this run's recipe has version {version}; this convergent reads up to "
                    f"{RECIPE_VERSION} (upgrade convergent to continue it)"
                )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "recipe"
            raise UserError(f"invalid recipe: {where}: {first['msg']}") from None


@dataclass(frozen=True, slots=True)
class BuildContext:
    """Where the agent being built will run (ask channels that need it, such as ``web``)."""

    run_id: str | None = None
    """The run's id, when known."""
    store: Any = None
    """The run store, when the run is durable."""


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
    factory = ASK_CHANNELS.get(name)
    if factory is None:
        known = ", ".join(sorted(ASK_CHANNELS))
        raise UserError(f"unknown ask channel {name!r}; use one of {known}")
    return factory(context)


def _imported(path: str) -> list[Tool]:
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise UserError(f"tool {path!r}: an import path is package.module:attribute")
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
        if ":" in name:
            resolved.extend(_imported(name))
            continue
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
                raise UserError(
                    f"unknown tool {name!r}; built-in tools are {', '.join(BUILTIN_TOOLS)}, "
                    "others are named package.module:attribute"
                )
    return resolved


def agent_arguments(recipe: RunRecipe, context: BuildContext | None = None) -> dict[str, Any]:
    """The `Agent` arguments a recipe describes (used by `Agent.from_recipe`).

    The stored recipe names the resolved model and workspace, so that a later resume
    builds the same agent even if the environment's defaults changed.

    Raises:
        UserError: If a part cannot be built here.
    """
    context = context or BuildContext()
    spec = recipe.model or default_model_spec()
    workspace = str(Path(recipe.workspace or ".").resolve())
    if not Path(workspace).is_dir():
        raise UserError(f"workspace folder not found: {workspace}")
    servers = parse_mcp_servers(recipe.mcp_servers, origin="recipe") if recipe.mcp_servers else []
    model = build_model(
        spec, base_url=recipe.base_url, protocol=recipe.protocol, price=recipe.price
    )
    tools = resolve_tools(recipe.tools, workspace)
    skills = Skills.discover(*recipe.skills) if recipe.skills else Skills(())
    if len(skills):
        tools += skills.tools()
    asker = AskUser(_ask_channel(recipe.ask_via, context), timeout=recipe.ask_timeout)
    if "ask_user" in recipe.tools or recipe.gate is not None:
        tools.append(asker.tool)
    gate = None
    if recipe.gate is not None:
        gate = ExecutiveGate(
            _scorer(recipe.gate, model, recipe.base_url), asker, threshold=recipe.gate.threshold
        )
    settings = (
        ModelSettings(temperature=recipe.temperature) if recipe.temperature is not None else None
    )
    return {
        "model": model,
        "tools": tools,
        "system_prompt": skills.system_prompt(recipe.system_prompt) or None,
        "limits": recipe.limits.build(),
        "on_tool_error": recipe.on_tool_error,
        "max_consecutive_tool_errors": recipe.max_consecutive_tool_errors,
        "final_answer": recipe.final_answer,
        "settings": settings,
        "context_policy": ContextCompressor() if recipe.compress else None,
        "gate": gate,
        "parallel_tool_calls": recipe.parallel_tool_calls,
        "workspace": workspace,
        "mcp_servers": servers,
        "recipe": recipe.model_copy(update={"model": spec, "workspace": workspace}),
    }


def _scorer(gate: GateRecipe, model: Model, base_url: str | None) -> Model:
    if gate.model is not None:
        return model_from_string(gate.model, base_url=base_url)
    return model.inner if isinstance(model, StructuredToolCalling) else model
