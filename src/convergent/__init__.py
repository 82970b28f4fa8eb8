"""convergent: LLM agent loops that stop for objective reasons.

The loop continues while the model's response contains tool calls and stops when it
contains none; every run ends with one typed `StopReason`.
"""

from typing import TYPE_CHECKING

from convergent._lazy import attach as _attach

if TYPE_CHECKING:
    from convergent.agent import Agent, RunStream
    from convergent.builder import build_agent
    from convergent.builtin_tools import calculator, default_tools, fail, file_tools
    from convergent.clock import Clock, SystemClock, use_clock
    from convergent.compaction import ContextCompacted, ContextCompressor
    from convergent.coordinator import (
        AttemptReport,
        Coordinator,
        CoordinatorResult,
        StateStore,
        WorkflowState,
        coordinate_agent,
    )
    from convergent.durability.protocol import Durability, RunJournal
    from convergent.durability.resuming import resume
    from convergent.durability.sqlite import (
        DatabaseSteering,
        RewindResult,
        RunStore,
        RunSummary,
    )
    from convergent.edit_tools import edit_tools
    from convergent.events import (
        CycleStarted,
        Event,
        JsonlTraceWriter,
        ModelResponded,
        Nudged,
        Redirected,
        RunStarted,
        RunStopped,
        TextDelta,
        ToolCallDelta,
        ToolFinished,
        ToolStarted,
        Verified,
        event_to_dict,
    )
    from convergent.exceptions import (
        ConvergentError,
        ModelBehaviorError,
        ModelError,
        ModelHTTPError,
        NeedsUserInput,
        ScriptExhaustedError,
        StorageError,
        ToolArgumentsError,
        ToolDefinitionError,
        ToolError,
        UserError,
    )
    from convergent.extensions import (
        ActionGate,
        ContextPolicy,
        FollowUpGate,
        RunObserver,
        Verification,
        Verifier,
    )
    from convergent.gate import (
        AskChannel,
        AskTimedOut,
        AskUser,
        CallbackChannel,
        DialogChannel,
        ExecutiveGate,
        GateDecided,
        NonInteractiveChannel,
        QueueChannel,
        StdinChannel,
        TerminalChannel,
        UserAnswered,
        ambiguous,
        ask_user_tool,
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
        LocalModel,
        Model,
        ModelSettings,
        OpenAIChatModel,
        ScriptedModel,
        StructuredToolCalling,
        TokenPrice,
        model_from_string,
    )
    from convergent.result import RunResult
    from convergent.skills import Skill, Skills
    from convergent.spec import AgentSpec, AgentToolSpec, GateSpec
    from convergent.state import RunState, ToolCallRecord
    from convergent.steering import SteeringCommand, SteeringKind, SteeringQueue
    from convergent.stop import Limits, StopReason
    from convergent.synthesis import (
        Archetype,
        Insight,
        SynthesisReport,
        synthesize,
        synthesize_insights,
    )
    from convergent.tools import Tool, tool


from convergent._version import __version__

__all__ = [
    "ActionGate",
    "Agent",
    "AgentSpec",
    "AgentToolSpec",
    "AnthropicModel",
    "Archetype",
    "AskChannel",
    "AskTimedOut",
    "AskUser",
    "AssistantMessage",
    "AttemptReport",
    "CallbackChannel",
    "Clock",
    "ContextCompacted",
    "ContextCompressor",
    "ContextPolicy",
    "ConvergentError",
    "Coordinator",
    "CoordinatorResult",
    "CycleStarted",
    "DatabaseSteering",
    "DialogChannel",
    "Durability",
    "Event",
    "ExecutiveGate",
    "FollowUpGate",
    "GateDecided",
    "GateSpec",
    "Insight",
    "JsonlTraceWriter",
    "Limits",
    "LocalModel",
    "Message",
    "Model",
    "ModelBehaviorError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponded",
    "ModelResponse",
    "ModelSettings",
    "NeedsUserInput",
    "NonInteractiveChannel",
    "Nudged",
    "OpenAIChatModel",
    "QueueChannel",
    "Redirected",
    "RewindResult",
    "RunJournal",
    "RunObserver",
    "RunResult",
    "RunStarted",
    "RunState",
    "RunStopped",
    "RunStore",
    "RunStream",
    "RunSummary",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Skill",
    "Skills",
    "StateStore",
    "StdinChannel",
    "SteeringCommand",
    "SteeringKind",
    "SteeringQueue",
    "StopReason",
    "StorageError",
    "StructuredToolCalling",
    "SynthesisReport",
    "SystemClock",
    "SystemMessage",
    "TerminalChannel",
    "TextDelta",
    "TokenPrice",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallRecord",
    "ToolDefinitionError",
    "ToolError",
    "ToolFinished",
    "ToolResultMessage",
    "ToolSpec",
    "ToolStarted",
    "Usage",
    "UserAnswered",
    "UserError",
    "UserMessage",
    "Verification",
    "Verified",
    "Verifier",
    "WorkflowState",
    "__version__",
    "ambiguous",
    "ask_user_tool",
    "build_agent",
    "calculator",
    "coordinate_agent",
    "default_tools",
    "edit_tools",
    "event_to_dict",
    "fail",
    "file_tools",
    "model_from_string",
    "resume",
    "synthesize",
    "synthesize_insights",
    "tool",
    "use_clock",
]

__getattr__, __dir__ = _attach(__name__)
