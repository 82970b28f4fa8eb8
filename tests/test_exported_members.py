"""The public surface is exactly what each ``__all__`` lists, pinned here name by name.

The core namespace (`convergent`) holds the loop, models, tools, stop reasons, results,
events, durability and errors; each product exports its names from its own subpackage.
A name added to or removed from an ``__all__`` must be added to or removed from its list
here, so that every change of the public surface is a visible decision.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

import convergent

CORE = [
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

_COORDINATOR = [
    "CHECK_ATOM_PREFIX",
    "DEFAULT_STATE_FILE",
    "SCHEMA_VERSION",
    "Advice",
    "ArtifactCheck",
    "Atom",
    "AtomStatus",
    "Attempt",
    "AttemptFn",
    "AttemptReport",
    "BaseCase",
    "Check",
    "CheckKind",
    "CheckResult",
    "CommandCheck",
    "Confirmation",
    "Continue",
    "Control",
    "Coordinator",
    "CoordinatorResult",
    "Decision",
    "Failure",
    "Health",
    "HookAnswer",
    "HookEvent",
    "HookInput",
    "HookSettings",
    "HttpCheck",
    "InertiaFlag",
    "Interrupt",
    "JudgmentCheck",
    "Metrics",
    "ProgressKind",
    "StateFileError",
    "StateStore",
    "Stop",
    "StrategySwitch",
    "WorkflowState",
    "WorkflowStatus",
    "abandon_atom",
    "add_atom",
    "advance",
    "answer_hook",
    "apply_decision",
    "base_case_satisfied",
    "confirm_judgment",
    "coordinate_agent",
    "decide",
    "dump_state",
    "evaluate_progress",
    "find_inertia",
    "follow_up_task",
    "health",
    "metrics",
    "observe_iteration",
    "parse_state",
    "pending_count",
    "record_failure",
    "record_verification",
    "request_redirect",
    "request_stop",
    "resolve_atom",
    "resolved_count",
    "resume",
    "run_check",
    "run_checks",
    "strategy_advice",
]
_SYNTHESIS = [
    "DEFAULT_ARCHETYPES",
    "GROUPING_PROMPT",
    "GROUPING_SCHEMA",
    "JACCARD_THRESHOLD",
    "Archetype",
    "Diagnosis",
    "FallbackTrigger",
    "GroupingResult",
    "Insight",
    "InsightRecord",
    "NoConvergence",
    "PerspectiveResult",
    "ResearchTally",
    "ScoredTheme",
    "SynthesisReport",
    "Theme",
    "convergence_multiplier",
    "extract_keywords",
    "group_insights",
    "jaccard_groups",
    "keyword_overlap_jaccard",
    "load_insights",
    "parse_archetypes",
    "resolve_archetypes",
    "run_perspectives",
    "score_themes",
    "synthesize",
    "synthesize_insights",
    "validate_confidence",
    "write_state",
]
_GATE = [
    "ASK_USER",
    "AmbiguityDetector",
    "AskChannel",
    "AskStatus",
    "AskTimedOut",
    "AskUser",
    "CallbackChannel",
    "DEFAULT_THRESHOLD",
    "DialogChannel",
    "Exchange",
    "ExecutiveGate",
    "GateDecided",
    "GateTrigger",
    "LineSource",
    "NonInteractiveChannel",
    "PendingQuestion",
    "QueueChannel",
    "SCORE_SCHEMA",
    "Score",
    "StdinChannel",
    "TerminalChannel",
    "UserAnswered",
    "ambiguous",
    "ask_user_tool",
    "declared_ambiguity",
    "parse_score",
    "question_from_thought",
    "scoring_messages",
]
_UI = [
    "WebChannel",
]
_TEMPORAL = [
    "DEFAULT_TASK_QUEUE",
    "ITEM_LIMIT",
    "OFFLOAD_THRESHOLD",
    "WORKFLOW_NAME",
    "AgentWorkflow",
    "DevServer",
    "PayloadStore",
    "RunInfo",
    "TemporalRun",
    "TemporalRunner",
    "connect",
    "free_port",
    "make_worker",
    "run_worker",
    "temporal_cli",
]
_MCP = [
    "MCPServer",
    "MCPToolset",
    "load_mcp_config",
    "mcp_config",
    "parse_mcp_servers",
    "server_from_command",
]
_TELEMETRY = [
    "CAPTURE_CONTENT_ENV",
    "OpenTelemetryObserver",
    "configure_otlp",
]
_ADAPTERS = [
    "CycleDriver",
    "FinalRequest",
    "NotExpressible",
    "PolicyAdapted",
    "Review",
    "StopReport",
]
_DURABILITY = [
    "DEFAULT_DB_PATH",
    "DatabaseSteering",
    "Durability",
    "JournaledRun",
    "PendingQuestion",
    "RewindResult",
    "RunClaim",
    "RunJournal",
    "RunStore",
    "RunSummary",
    "SqliteJournal",
]
_REPLAY = [
    "FORMATS",
    "KNOBS",
    "Calibration",
    "CallLine",
    "CorpusFigures",
    "Knob",
    "LoopFate",
    "Malformed",
    "Point",
    "RecordedCall",
    "RecordedReply",
    "ReplayReport",
    "RunReplay",
    "RunVerdict",
    "Stop",
    "Trajectory",
    "TurnReplay",
    "available_knobs",
    "calibrate",
    "detect_format",
    "html_page",
    "judge",
    "read_runs",
    "replay",
    "replay_run",
]
_TESTING = [
    "answer",
    "call",
    "scripted",
    "step",
    "write_script",
]

SUBPACKAGES = {
    "convergent.coordinator": _COORDINATOR,
    "convergent.synthesis": _SYNTHESIS,
    "convergent.gate": _GATE,
    "convergent.ui": _UI,
    "convergent.temporal": _TEMPORAL,
    "convergent.mcp": _MCP,
    "convergent.telemetry": _TELEMETRY,
    "convergent.adapters": _ADAPTERS,
    "convergent.durability": _DURABILITY,
    "convergent.replay": _REPLAY,
    "convergent.testing": _TESTING,
}

NOT_EXPORTS = {"annotations", "TYPE_CHECKING"}
"""Names that ``from __future__``/``typing`` imports leave in a namespace."""


def _exported(package: ModuleType) -> set[str]:
    """The public names ``package`` holds, once every listed name has been used."""
    for name in package.__all__:
        getattr(package, name)
    return {
        name
        for name, value in vars(package).items()
        if not name.startswith("_")
        and name not in NOT_EXPORTS
        and not isinstance(value, ModuleType)  # a submodule someone imported
    }


def test_core_exports_exactly_the_listed_names() -> None:
    assert convergent.__all__ == CORE
    assert sorted(CORE) == CORE
    for name in CORE:
        assert getattr(convergent, name) is not None, name
    assert _exported(convergent) == set(CORE) - {"__version__"}
    assert set(dir(convergent)) >= set(CORE)
    # What the package-level __getattr__ can import is the listed names, not one more.
    assert set(convergent._MODULE_OF) == set(CORE) - {"__version__"}


@pytest.mark.parametrize(
    "name", ["Coordinator", "WorkflowState", "ExecutiveGate", "Archetype", "fail", "Message"]
)
def test_names_outside_the_core_are_not_exported_by_it(name: str) -> None:
    with pytest.raises(AttributeError, match=name):
        getattr(convergent, name)


@pytest.mark.parametrize("package_name", sorted(SUBPACKAGES))
def test_each_product_exports_exactly_the_listed_names(package_name: str) -> None:
    package = importlib.import_module(package_name)
    listed = SUBPACKAGES[package_name]
    assert list(package.__all__) == listed
    for name in listed:
        assert getattr(package, name) is not None, f"{package_name}.{name}"
    assert _exported(package) == set(listed)
    assert set(getattr(package, "_MODULE_OF", {})) <= set(listed)


PROBE = """
import sys
import convergent.coordinator.decide, convergent.coordinator.metrics  # the submodules first
from convergent.coordinator import decide, metrics
assert callable(decide) and callable(metrics)
assert decide.__module__ == "convergent.coordinator.decide"
import convergent
assert "convergent.agent" not in sys.modules     # neither loads the agent stack
assert convergent.Agent.__module__ == "convergent.agent"
assert "convergent.agent" in sys.modules
"""


def test_exports_load_on_first_use_and_keep_their_meaning() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
