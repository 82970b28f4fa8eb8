"""Tools the model can call: the `@tool` decorator and the `Tool` it builds.

The JSON schema of a tool's arguments is derived from the function's signature
(types through pydantic) and its Google-style docstring (the summary becomes the
description, the ``Args:`` section the parameter descriptions).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo

from convergent.effects import Effect, effect_of
from convergent.exceptions import ToolArgumentsError, ToolDefinitionError
from convergent.messages import ToolSpec

__all__ = ["SchemaArguments", "Tool", "ToolArgumentsError", "to_text", "tool"]

P = ParamSpec("P")
R = TypeVar("R")


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {param: description}).

    The description is the docstring's text, notes included, on one line; its other
    sections (``Returns:``, ``Raises:``, ``Examples:``...) are for the reader of the code,
    not for the model.
    """
    if not doc:
        return "", {}
    # imported here: it costs some 40 ms, paid only by a process that builds a tool
    from griffe import Docstring, DocstringSectionKind

    text: list[str] = []
    params: dict[str, str] = {}
    for section in Docstring(doc).parse("google", warnings=False):
        if section.kind is DocstringSectionKind.text:
            text.append(section.value)
        elif section.kind is DocstringSectionKind.admonition:
            text.append(section.value.description)
        elif section.kind is DocstringSectionKind.parameters:
            for param in section.value:
                params[param.name.lstrip("*")] = _one_line(param.description)
    return _one_line("\n".join(text)), params


_Parameter = tuple[str, Any, type, Any, str | None]
"""A parameter's name, type, default's type, default and description."""

_Signature = tuple[str, tuple[_Parameter, ...]]
"""A tool's name and its parameters: all that its arguments model and schema are built
from."""


def _arguments_model(func: Callable[..., Any], name: str, docs: dict[str, str]) -> type[BaseModel]:
    try:
        hints = inspect.get_annotations(func, eval_str=True)
    except Exception as exc:  # a bad annotation is a definition error, whatever it raised
        raise ToolDefinitionError(f"tool {name!r}: cannot resolve type hints: {exc}") from None
    params: list[_Parameter] = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {name!r}: *args/**kwargs are not supported")
        if param.name not in hints:
            raise ToolDefinitionError(f"tool {name!r}: parameter {param.name!r} needs a type hint")
        default = ... if param.default is inspect.Parameter.empty else param.default
        params.append((param.name, hints[param.name], type(default), default, docs.get(param.name)))
    signature: _Signature = (name, tuple(params))
    try:
        hash(signature)
    except TypeError:  # a default such as a list: a model for this tool alone
        return _build_arguments_model(signature)
    return _shared_arguments_model(signature)


def _build_arguments_model(signature: _Signature) -> type[BaseModel]:
    name, params = signature
    fields: dict[str, Any] = {
        param: (hint, FieldInfo(default=default, description=description or None))
        for param, hint, _, default, description in params
    }
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    return create_model(f"{name}_arguments", __config__=config, **fields)


_shared_arguments_model = functools.lru_cache(maxsize=1024)(_build_arguments_model)
"""One model per signature: a tool built again from the same function (a closure made
per run or per request) skips pydantic's model and schema building, about 0.5 ms."""

_schemas: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()
"""Each arguments model's cleaned schema, kept as long as the model is."""


def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    schema = _schemas.get(model)
    if schema is None:
        schema = _schemas[model] = _clean_schema(model.model_json_schema())
    return schema


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    schema["type"] = "object"
    schema["additionalProperties"] = False
    return schema


def to_text(value: Any) -> str:
    """A tool's return value as the text the model sees: strings as they are, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError):
        return str(value)


_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)


class SchemaArguments(BaseModel):
    """Arguments of a tool built from a JSON schema: passed on whole, checked by the tool."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable the model may invoke, with its schema and execution policy."""

    name: str
    """Name the model uses to call the tool."""
    description: str
    """What the tool does, shown to the model."""
    function: Callable[..., Any]
    """The Python callable; sync functions run in a worker thread."""
    arguments_model: type[BaseModel]
    """Pydantic model that validates the arguments."""
    timeout: float | None = 60.0
    """Seconds one call may take before it counts as a tool failure; None disables."""
    idempotent: bool = False
    """Calling it again with the same arguments has no further effect: safe to re-run
    after a crash interrupted a call (resuming runs), and a repeat is judged on its
    result (see `effect`)."""
    modifies_files: bool = False
    """The tool writes workspace files (used by checkpoints to snapshot before changes)."""
    terminal: bool = False
    """A hand-off: once a call of it succeeds, the run stops ``handed_off`` with its result."""
    read_only: bool | None = None
    """Whether a call only reads (True) or changes something (False); None: unknown.
    With ``idempotent``, it is the tool's `effect`, which the stop rules judge repeats
    by (see `convergent.loop.monitor`)."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """JSON schema of the arguments (derived from ``arguments_model``)."""
    source: str | None = None
    """Where the tool comes from when it is not a local function (``mcp:time`` for a tool
    of the MCP server ``time``); durable runs record it with every finished call."""
    spends_budget: bool = False
    """A call runs work that spends the run's budgets (an agent called as a tool): the
    calls of such tools in one batch share what is left of them equally."""

    is_async: bool = field(init=False, default=False)
    """Whether the function is a coroutine function (run natively on the loop)."""

    def __post_init__(self) -> None:
        if self.read_only and self.modifies_files:
            raise ToolDefinitionError(
                f"tool {self.name!r} cannot be read_only and modify files at once"
            )
        if not self.parameters:
            # a copy: the schema of a shared model is shared, and a tool's may be changed
            schema = copy.deepcopy(_schema_of(self.arguments_model))
            object.__setattr__(self, "parameters", schema)
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.function))

    @classmethod
    def from_schema(
        cls,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        function: Callable[..., Any],
        timeout: float | None = 60.0,
        idempotent: bool = False,
        terminal: bool = False,
        read_only: bool | None = None,
        source: str | None = None,
    ) -> Tool:
        """A tool described by a JSON schema rather than a typed Python function.

        The arguments reach ``function`` as keyword arguments unchecked: the function
        validates them itself (raising `ToolArgumentsError` for the model's mistakes),
        as a remote tool's server or a Temporal worker does.

        Args:
            name: Name the model uses to call the tool.
            description: What the tool does, shown to the model.
            parameters: JSON schema of the arguments (an object schema).
            function: Called with the arguments as keyword arguments.
            timeout: Seconds per call before it fails; None for no limit.
            idempotent: Whether a call made again with the same arguments has no
                further effect (see `tool`).
            terminal: Whether a successful call hands the run off (see `tool`).
            read_only: Whether a call only reads (see `tool`); None: unknown.
            source: Where the tool comes from (``mcp:SERVER``).
        """
        return cls(
            name=name,
            description=description,
            function=function,
            arguments_model=SchemaArguments,
            timeout=timeout,
            idempotent=idempotent,
            terminal=terminal,
            read_only=read_only,
            parameters=parameters,
            source=source,
        )

    @property
    def effect(self) -> Effect:
        """What a call does, as the tool declares it (``read_only``, ``idempotent``)."""
        return effect_of(self.read_only, self.idempotent)

    @property
    def spec(self) -> ToolSpec:
        """The description given to models."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check arguments against the schema and return them coerced to Python values.

        Raises:
            ToolArgumentsError: With a short message the model can act on.
        """
        try:
            parsed = self.arguments_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {problems}") from None
        values = dict(parsed.__dict__)
        if parsed.__pydantic_extra__:
            values.update(parsed.__pydantic_extra__)
        return values

    async def call(self, arguments: dict[str, Any]) -> str:
        """Validate, run (in a thread if sync) and return the result as text.

        The loop calls tools through its executor, which adds the timeout; this is the
        plain call, for using a tool outside a run.

        Raises:
            ToolArgumentsError: If the arguments are invalid.
            Exception: Whatever the tool itself raises.
        """
        values = self.validate(arguments)
        if self.is_async:
            result = await self.function(**values)
        else:
            result = await asyncio.to_thread(self.function, **values)
        return to_text(result)


@overload
def tool(func: Callable[P, R], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = 60.0,
    idempotent: bool = False,
    modifies_files: bool = False,
    terminal: bool = False,
    read_only: bool | None = None,
) -> Callable[[Callable[P, R]], Tool]: ...


def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = 60.0,
    idempotent: bool = False,
    modifies_files: bool = False,
    terminal: bool = False,
    read_only: bool | None = None,
) -> Tool | Callable[[Callable[P, R]], Tool]:
    """Turn a typed function into a `Tool`; use bare (``@tool``) or with options.

    Args:
        func: The function, when used as a bare decorator.
        name: Tool name; defaults to the function's name.
        description: Overrides the docstring summary.
        timeout: Seconds per call before it fails; None for no limit.
        idempotent: Whether a call made again with the same arguments has no further
            effect (setting a value, writing the same file): an interrupted call is
            then re-run on resume, and a repeat runs and is judged on its result.
        modifies_files: Whether the tool writes workspace files.
        terminal: Whether a successful call hands the run off and ends it
            (``handed_off``), e.g. ``transfer_to_human_agents``.
        read_only: True for a tool that only reads (a lookup, a search, a status, a
            wait), False for one that changes something (a write, a payment); None
            (the default): unknown. A read runs and is judged on its result; a write
            repeated with the same arguments is judged before it runs (unless
            ``idempotent``); see ``docs/loop.md``.

    Raises:
        ToolDefinitionError: If a parameter lacks a type hint or the signature is
            unsupported, or the tool is both ``read_only`` and ``modifies_files``.
    """

    def build(function: Callable[P, R]) -> Tool:
        tool_name = name or getattr(function, "__name__", None)
        if not tool_name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", tool_name):
            raise ToolDefinitionError(f"invalid tool name: {tool_name!r}")
        summary, param_docs = _parse_docstring(inspect.getdoc(function))
        return Tool(
            name=tool_name,
            description=description or summary or tool_name,
            function=function,
            arguments_model=_arguments_model(function, tool_name, param_docs),
            timeout=timeout,
            idempotent=idempotent,
            modifies_files=modifies_files,
            terminal=terminal,
            read_only=read_only,
        )

    if func is not None:
        return build(func)
    return build
