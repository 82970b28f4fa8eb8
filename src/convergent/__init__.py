"""convergent: LLM agent loops that stop for objective reasons.

The loop continues while the model's response contains tool calls and stops when it
contains none; every run ends with one typed `StopReason`.

This namespace holds the core: the loop, models, tools, stop reasons and limits,
results, events, durability and errors. Each product has its own subpackage and its own
exports: `convergent.coordinator`, `convergent.synthesis`, `convergent.gate`,
`convergent.ui`, `convergent.temporal`, `convergent.mcp`, `convergent.telemetry` and
`convergent.adapters`. Less common parts of the core are imported from the module that
defines them (`convergent.messages`, `convergent.events`, `convergent.extensions`, ...).

Names are imported on first use (PEP 562), so that a light command such as the Claude
Code hook loads only what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from convergent._exports import listed_names as _listed_names
from convergent._exports import load_export as _load_export
from convergent._version import __version__

if TYPE_CHECKING:
    from convergent.agent import Agent, RunStream
    from convergent.builder import build_agent
    from convergent.builtin_tools import calculator, default_tools, file_tools
    from convergent.durability.protocol import RunJournal
    from convergent.durability.sqlite import RunStore
    from convergent.effects import Effect
    from convergent.events import (
        CycleStarted,
        Event,
        ModelResponded,
        RunStarted,
        RunStopped,
        TextDelta,
        ToolFinished,
        ToolStarted,
    )
    from convergent.exceptions import (
        ConvergentError,
        ModelError,
        ModelHTTPError,
        NeedsUserInput,
        StorageError,
        ToolArgumentsError,
        ToolError,
        UserError,
    )
    from convergent.extensions import Verification, Verifier
    from convergent.limits import Limits
    from convergent.messages import ModelResponse, ToolCall, Usage
    from convergent.models import (
        AnthropicModel,
        LocalModel,
        Model,
        ModelSettings,
        OpenAIChatModel,
        ScriptedModel,
        model_from_string,
    )
    from convergent.policy import StopPolicy
    from convergent.result import RunResult
    from convergent.resuming import resume
    from convergent.spec import AgentSpec
    from convergent.state import RunState
    from convergent.stop import StopReason
    from convergent.tools import Tool, tool

__all__ = [
    "Agent",
    "AgentSpec",
    "AnthropicModel",
    "ConvergentError",
    "CycleStarted",
    "Effect",
    "Event",
    "Limits",
    "LocalModel",
    "Model",
    "ModelError",
    "ModelHTTPError",
    "ModelResponded",
    "ModelResponse",
    "ModelSettings",
    "NeedsUserInput",
    "OpenAIChatModel",
    "RunJournal",
    "RunResult",
    "RunStarted",
    "RunState",
    "RunStopped",
    "RunStore",
    "RunStream",
    "ScriptedModel",
    "StopPolicy",
    "StopReason",
    "StorageError",
    "TextDelta",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolError",
    "ToolFinished",
    "ToolStarted",
    "Usage",
    "UserError",
    "Verification",
    "Verifier",
    "__version__",
    "build_agent",
    "calculator",
    "default_tools",
    "file_tools",
    "model_from_string",
    "resume",
    "tool",
]

_MODULE_OF = {
    "Agent": "convergent.agent",
    "RunStream": "convergent.agent",
    "build_agent": "convergent.builder",
    "calculator": "convergent.builtin_tools",
    "default_tools": "convergent.builtin_tools",
    "file_tools": "convergent.builtin_tools",
    "RunJournal": "convergent.durability.protocol",
    "resume": "convergent.resuming",
    "RunStore": "convergent.durability.sqlite",
    "CycleStarted": "convergent.events",
    "Event": "convergent.events",
    "ModelResponded": "convergent.events",
    "RunStarted": "convergent.events",
    "RunStopped": "convergent.events",
    "TextDelta": "convergent.events",
    "ToolFinished": "convergent.events",
    "ToolStarted": "convergent.events",
    "Effect": "convergent.effects",
    "ConvergentError": "convergent.exceptions",
    "ModelError": "convergent.exceptions",
    "ModelHTTPError": "convergent.exceptions",
    "NeedsUserInput": "convergent.exceptions",
    "StorageError": "convergent.exceptions",
    "ToolArgumentsError": "convergent.exceptions",
    "ToolError": "convergent.exceptions",
    "UserError": "convergent.exceptions",
    "Verification": "convergent.extensions",
    "Verifier": "convergent.extensions",
    "ModelResponse": "convergent.messages",
    "ToolCall": "convergent.messages",
    "Usage": "convergent.messages",
    "AnthropicModel": "convergent.models",
    "LocalModel": "convergent.models",
    "Model": "convergent.models",
    "ModelSettings": "convergent.models",
    "OpenAIChatModel": "convergent.models",
    "ScriptedModel": "convergent.models",
    "model_from_string": "convergent.models",
    "RunResult": "convergent.result",
    "AgentSpec": "convergent.spec",
    "RunState": "convergent.state",
    "Limits": "convergent.limits",
    "StopPolicy": "convergent.policy",
    "StopReason": "convergent.stop",
    "Tool": "convergent.tools",
    "tool": "convergent.tools",
}
"""The module that defines each exported name, imported when the name is first used."""


def __getattr__(name: str) -> object:
    """Import an exported name's module when the name is first used (PEP 562)."""
    return _load_export(globals(), _MODULE_OF, name)


def __dir__() -> list[str]:
    """The names already imported and the exported ones not yet used."""
    return _listed_names(globals(), __all__)
