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
from convergent._version import __version__ as __version__

if TYPE_CHECKING:
    from convergent.agent import Agent as Agent
    from convergent.agent import RunStream as RunStream
    from convergent.builder import build_agent as build_agent
    from convergent.builtin_tools import calculator as calculator
    from convergent.builtin_tools import default_tools as default_tools
    from convergent.builtin_tools import file_tools as file_tools
    from convergent.durability.protocol import RunJournal as RunJournal
    from convergent.durability.sqlite import RunStore as RunStore
    from convergent.effects import Effect as Effect
    from convergent.events import CycleStarted as CycleStarted
    from convergent.events import Event as Event
    from convergent.events import ModelResponded as ModelResponded
    from convergent.events import RunStarted as RunStarted
    from convergent.events import RunStopped as RunStopped
    from convergent.events import TextDelta as TextDelta
    from convergent.events import ToolFinished as ToolFinished
    from convergent.events import ToolStarted as ToolStarted
    from convergent.exceptions import ConvergentError as ConvergentError
    from convergent.exceptions import ModelError as ModelError
    from convergent.exceptions import ModelHTTPError as ModelHTTPError
    from convergent.exceptions import NeedsUserInput as NeedsUserInput
    from convergent.exceptions import StorageError as StorageError
    from convergent.exceptions import ToolArgumentsError as ToolArgumentsError
    from convergent.exceptions import ToolError as ToolError
    from convergent.exceptions import UserError as UserError
    from convergent.extensions import Verification as Verification
    from convergent.extensions import Verifier as Verifier
    from convergent.limits import Limits as Limits
    from convergent.messages import ModelResponse as ModelResponse
    from convergent.messages import ToolCall as ToolCall
    from convergent.messages import Usage as Usage
    from convergent.models import AnthropicModel as AnthropicModel
    from convergent.models import LocalModel as LocalModel
    from convergent.models import Model as Model
    from convergent.models import ModelSettings as ModelSettings
    from convergent.models import OpenAIChatModel as OpenAIChatModel
    from convergent.models import ScriptedModel as ScriptedModel
    from convergent.models import model_from_string as model_from_string
    from convergent.policy import StopPolicy as StopPolicy
    from convergent.result import RunResult as RunResult
    from convergent.resuming import resume as resume
    from convergent.spec import AgentSpec as AgentSpec
    from convergent.state import RunState as RunState
    from convergent.stop import StopReason as StopReason
    from convergent.tools import Tool as Tool
    from convergent.tools import tool as tool


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

__all__ = sorted([*_MODULE_OF, "__version__"])


def __getattr__(name: str) -> object:
    """Import an exported name's module when the name is first used (PEP 562)."""
    return _load_export(globals(), _MODULE_OF, name)


def __dir__() -> list[str]:
    """The names already imported and the exported ones not yet used."""
    return _listed_names(globals(), __all__)
