"""`AgentSpec`: what an agent is, as data that can be stored and rebuilt in any process.

A spec names the model, the tools, the workspace, the prompt, the skills, the MCP
servers, the gate, the budgets and the policies of an agent, and validates all of
them: it is the one description of an agent that the command line, `convergent.resume`
and the Temporal workers share. `convergent.builder.build_agent` turns it into an
`Agent`. A durable run stores its spec, so that it can be resumed from another process
(the command line, a Python script, a Temporal worker on another machine).

Tools are named: a built-in name (`BUILTIN_TOOLS`) or an import path
``package.module:attribute`` naming a `Tool`, a list of tools, or a plain typed function.

Example:
    >>> spec = AgentSpec(model="openai:gpt-4o-mini", tools=["calculator", "myapp.tools:lookup"])
    >>> agent = build_agent(spec)

A spec carries a ``version``; one written by a newer convergent is refused with a clear
error rather than half-understood. Specs stored by earlier versions load as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from convergent._deprecated import warn_old
from convergent._json import UnusableJson, load_json
from convergent._validation import problem
from convergent.exceptions import UserError
from convergent.gate.executive import DEFAULT_THRESHOLD
from convergent.limits import Limits, without_legacy
from convergent.mcp.config import stored_mcp_config
from convergent.output import OutputSpec
from convergent.policy import LEGACY_POLICY_FIELDS, StopPolicy

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_TOOLS",
    "SPEC_VERSION",
    "STEP_BACK_TOOLS",
    "AgentSpec",
    "AgentToolSpec",
    "GateSpec",
    "command_line_tools",
    "tool_name_problem",
]

SPEC_VERSION = 7
"""Version of the spec's shape; bumped when a field is added or changes meaning.

Version 1 (what convergent stored with runs before `AgentSpec`) had no ``final_answer`` and no
``limits.stall_nudges``; version 2 added them, version 3 ``price``, version 4
``output_schema``, version 5 ``agents`` (each takes its default when absent). Version 6
moved the stop rules (``limits.max_repeated_calls``, ``limits.stall_nudges``,
``on_tool_error``, ``max_consecutive_tool_errors``) into ``policy``, version 7
``final_answer``; earlier specs are read with them moved."""

BUILTIN_TOOLS = (
    "calculator",
    "read_file",
    "list_dir",
    "write_file",
    "edit_file",
    "ask_user",
    "fail",
)
"""Tool names a spec may use without an import path."""

DEFAULT_TOOLS = ("calculator", "read_file", "list_dir", "ask_user")
"""The tools of a spec that names none (and of ``convergent run``)."""

STEP_BACK_TOOLS = ("calculator", "read_file", "list_dir")
"""Built-in tools ``convergent run`` leaves out when the user offers tools of their own
(measured: beside them, the embedded model called the calculator instead of the user's
tool in 10 runs of 10; ``ask_user`` stays, it is how any run asks its user)."""


def command_line_tools(
    model: str,
    *,
    allow_writes: bool = False,
    builtin: bool | None = None,
    own_tools: bool = False,
) -> tuple[str, ...]:
    """The tools ``convergent run`` offers: `DEFAULT_TOOLS`, and more on request.

    Args:
        model: The model spec; a scripted model gets ``fail`` too, to show the tool-error
            policy (a real model would only be distracted by a tool that always fails).
        allow_writes: Add ``write_file`` and ``edit_file``.
        builtin: True: offer `DEFAULT_TOOLS` (and ``fail``), ``--builtin-tools``;
            False: none of them, ``--no-builtin-tools``; None (the default): all of
            them, unless the user offers tools of their own.
        own_tools: The user offers tools of their own (``--tool``, ``--mcp``,
            ``--mcp-config``): by default the built-in tools that serve no particular
            task step back (`STEP_BACK_TOOLS`), so that a model picks the user's.
    """
    if builtin is None and own_tools:
        tools = [name for name in DEFAULT_TOOLS if name not in STEP_BACK_TOOLS]
    else:
        tools = list(DEFAULT_TOOLS) if builtin is not False else []
        if model.startswith("scripted:") and builtin is not False:
            tools.append("fail")
    if allow_writes:
        tools += ["write_file", "edit_file"]
    return tuple(tools)


def tool_name_problem(name: str) -> str | None:
    """What is wrong with a tool name of a spec, if anything (the module is not imported)."""
    if ":" in name:
        module, _, attribute = name.partition(":")
        if not module or not attribute:
            return f"tool {name!r}: an import path is package.module:attribute"
        return None
    if name not in BUILTIN_TOOLS:
        return (
            f"unknown tool {name!r}; built-in tools are {', '.join(BUILTIN_TOOLS)}, "
            "others are named package.module:attribute"
        )
    return None


_Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""US dollars per million tokens."""


class GateSpec(BaseModel):
    """The executive gate (`convergent.gate.ExecutiveGate`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = Field(default=DEFAULT_THRESHOLD, ge=0.0, le=1.0)
    """Below this score the user is asked instead of acting."""
    model: str | None = None
    """Model that scores steps (default: the agent's own model)."""


class AgentSpec(BaseModel):
    """Everything needed to build an agent: model, tools, workspace, prompt and policies.

    Validating a spec is validating the agent it describes: a bad budget, policy or tool
    name is refused here, with pydantic's `ValidationError` (`from_json` turns it into
    a one-line `UserError`). What depends on the machine it is built on (a model's key,
    a folder, an importable module, a model's price under a cost limit) is checked when
    it is built.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = SPEC_VERSION
    """Version of this shape (`SPEC_VERSION`)."""
    model: str | None = None
    """Model spec (``openai:MODEL``, ``anthropic:MODEL``, ``local``, ``local:PATH.gguf``,
    ``scripted:PATH``); None: a configured provider, else the embedded model."""
    base_url: str | None = None
    """Base URL of an OpenAI-compatible or Anthropic-compatible server."""
    protocol: Literal["native", "structured"] | None = None
    """Tool-call protocol; None: the model's own default."""
    price: tuple[_Price, _Price] | None = None
    """The model's price, (input, output) in US dollars per million tokens; None: the
    price table's (see `convergent.models.TokenPrice`)."""
    temperature: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    """Sampling temperature; None: the model's default."""
    system_prompt: str | None = None
    """Instructions before the task (the skills section is added after them)."""
    tools: tuple[str, ...] = DEFAULT_TOOLS
    """Built-in tool names (`BUILTIN_TOOLS`) and ``package.module:attribute`` paths."""
    workspace: str | None = None
    """Folder the file tools work in (default: the current folder when built)."""
    skills: tuple[str, ...] = ()
    """Skill folders, or folders of them."""
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """MCP tool servers, in the ``mcpServers`` format of Claude Desktop and Claude Code
    (`convergent.mcp.mcp_config` writes it); they are started again when a run resumes.
    Serialised without literal ``env`` values (`convergent.mcp.config.stored_mcp_config`)."""
    gate: GateSpec | None = None
    """The executive gate, if any."""
    ask_via: str = "none"
    """How ``ask_user`` reaches the user: a channel of `convergent.builder.ASK_CHANNELS`
    (``auto``: the terminal when standard input is one, else none)."""
    ask_timeout: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    """Seconds to wait for each answer."""
    limits: Limits = Field(default_factory=Limits)
    """Budgets: cycles, tokens, seconds, cost and tool calls."""
    policy: StopPolicy = Field(default_factory=StopPolicy)
    """The rules that stop a run that makes no progress (`convergent.StopPolicy`)."""
    compress: bool = True
    """Compress the context near the model's window."""
    parallel_tool_calls: bool = True
    """Run a response's calls concurrently."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema the final answer must validate against (`convergent.output`): a run
    is ``completed`` only when it does."""
    agents: tuple[AgentToolSpec, ...] = ()
    """Agents this agent calls as tools (`convergent.Agent.as_tool`), each call a child
    run; on Temporal, a child workflow."""

    @model_validator(mode="before")
    @classmethod
    def _policy_moved(cls, data: Any) -> Any:
        """Move the stop rules of earlier shapes into ``policy`` (warning when written now)."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        stored = isinstance(data.get("version"), int) and data["version"] < SPEC_VERSION
        moved: dict[str, Any] = {}
        for name in ("on_tool_error", "max_consecutive_tool_errors", "final_answer"):
            if name in data:
                moved[LEGACY_POLICY_FIELDS[name]] = data.pop(name)
        limits = data.get("limits")
        if isinstance(limits, Mapping):
            limits = dict(limits)
            for name in ("max_repeated_calls", "stall_nudges"):
                if name in limits:
                    moved[LEGACY_POLICY_FIELDS[name]] = limits.pop(name)
            data["limits"] = limits
        elif isinstance(limits, Limits) and limits.legacy_policy():
            for name, value in limits.legacy_policy().items():
                moved[LEGACY_POLICY_FIELDS[name]] = value
            data["limits"] = without_legacy(limits)
            stored = True  # Limits warned when it was built
        if not moved:
            return data
        if not stored:
            warn_old(
                f"AgentSpec({', '.join(sorted(moved))}...) moved to AgentSpec(policy=...)",
                stacklevel=4,
            )
        policy = data.get("policy")
        if isinstance(policy, StopPolicy):
            policy = {name: getattr(policy, name) for name in StopPolicy.__dataclass_fields__}
        data["policy"] = {**(policy or {}), **moved}
        return data

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            wrong = tool_name_problem(name)
            if wrong is not None:
                raise ValueError(wrong)
        return names

    @field_validator("agents")
    @classmethod
    def _distinct_agents(cls, agents: tuple[AgentToolSpec, ...]) -> tuple[AgentToolSpec, ...]:
        names = [child.name for child in agents]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"two agents are named {name!r}")
        return agents

    @field_validator("output_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            try:
                OutputSpec.of_schema(schema)
            except UserError as exc:
                raise ValueError(str(exc)) from None
        return schema

    @field_serializer("mcp_servers")
    def _without_secrets(self, servers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return stored_mcp_config(servers)

    @classmethod
    def from_json(cls, data: Any) -> AgentSpec:
        """Read a stored spec (a dict or JSON text), of this version or an earlier one.

        Raises:
            UserError: If it comes from a newer convergent, or is malformed.
        """
        if isinstance(data, str | bytes):
            try:
                data = load_json(data)
            except UnusableJson as exc:
                raise UserError(f"invalid agent spec: {exc}") from None
        if isinstance(data, Mapping):
            version = data.get("version", SPEC_VERSION)
            if isinstance(version, int) and version > SPEC_VERSION:
                raise UserError(
                    f"this run's agent spec has version {version}; this convergent reads up "
                    f"to {SPEC_VERSION} (upgrade convergent to continue it)"
                )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise UserError(f"invalid agent spec: {problem(exc)}") from None

    def to_json(self) -> dict[str, Any]:
        """The form stored with a run (`from_json` reads it back)."""
        return self.model_dump(mode="json")


class AgentToolSpec(BaseModel):
    """An agent another agent calls as a tool: the arguments of `convergent.Agent.as_tool`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
    """The tool's name."""
    description: str
    """What the agent does, for the calling model."""
    agent: AgentSpec
    """The agent each call runs (a child run)."""
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds a call may take; None: the child's own ``max_seconds`` and the caller's
    remaining time bound it."""


AgentSpec.model_rebuild()
