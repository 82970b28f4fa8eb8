"""convergent: LLM agent loops that stop for objective reasons.

The loop continues while the model's response contains tool calls and stops when it
contains none; every run ends with one typed `StopReason`.
"""

from convergent.agent import (
    ActionGate,
    Agent,
    ContextPolicy,
    RunObserver,
    RunResult,
    RunStream,
    Verification,
    Verifier,
)
from convergent.builtin_tools import calculator, default_tools, fail, file_tools
from convergent.events import (
    CycleStarted,
    Event,
    JsonlTraceWriter,
    ModelResponded,
    Redirected,
    RunStarted,
    RunStopped,
    ToolFinished,
    ToolStarted,
    event_to_dict,
)
from convergent.exceptions import (
    ConvergentError,
    ModelBehaviorError,
    ModelError,
    ModelHTTPError,
    NeedsUserInput,
    ScriptExhaustedError,
    ToolDefinitionError,
    ToolError,
    UserError,
)
from convergent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from convergent.models import (
    AnthropicModel,
    Model,
    ModelSettings,
    OpenAIChatModel,
    ScriptedModel,
    StructuredToolCalling,
    model_from_string,
)
from convergent.state import RunState, ToolCallRecord
from convergent.steering import SteeringQueue
from convergent.stop import Limits, StopReason
from convergent.tools import Tool, ToolArgumentsError, tool

__version__ = "0.1.0"

__all__ = [
    "ActionGate",
    "Agent",
    "AnthropicModel",
    "AssistantMessage",
    "ContextPolicy",
    "ConvergentError",
    "CycleStarted",
    "Event",
    "JsonlTraceWriter",
    "Limits",
    "Message",
    "Model",
    "ModelBehaviorError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponded",
    "ModelResponse",
    "ModelSettings",
    "NeedsUserInput",
    "OpenAIChatModel",
    "Redirected",
    "RunObserver",
    "RunResult",
    "RunStarted",
    "RunState",
    "RunStopped",
    "RunStream",
    "ScriptExhaustedError",
    "ScriptedModel",
    "SteeringQueue",
    "StopReason",
    "StructuredToolCalling",
    "SystemMessage",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallRecord",
    "ToolDefinitionError",
    "ToolError",
    "ToolFinished",
    "ToolResultMessage",
    "ToolSpec",
    "ToolStarted",
    "Usage",
    "UserError",
    "UserMessage",
    "Verification",
    "Verifier",
    "__version__",
    "calculator",
    "default_tools",
    "event_to_dict",
    "fail",
    "file_tools",
    "model_from_string",
    "tool",
]
