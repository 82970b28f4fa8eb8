"""Coordinator convergence: work that stops for objective reasons across iterations.

A workflow is a state file (``workflow-state.yaml``) with work items ("atoms"), a base
case of externally verifiable checks, and control counters. Each iteration ends with a
decision in a fixed priority order (redirect, stop request, base case, stall, iteration
limit), using the same `StopReason` vocabulary as a single agent run. The same state
drives the Python `Coordinator`, the ``convergent coordinator`` commands and the
Claude Code hooks (``convergent hook stop|subagent-stop|post-tool-use``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from convergent._exports import listed_names as _listed_names
from convergent._exports import load_export as _load_export
from convergent.coordinator.actions import (
    abandon_atom,
    add_atom,
    confirm_judgment,
    record_failure,
    record_verification,
    request_redirect,
    request_stop,
    resolve_atom,
    resume,
)
from convergent.coordinator.advice import (
    Advice,
    InertiaFlag,
    StrategySwitch,
    find_inertia,
    strategy_advice,
)
from convergent.coordinator.checks import (
    ArtifactCheck,
    Check,
    CheckKind,
    CheckResult,
    CommandCheck,
    Confirmation,
    HttpCheck,
    JudgmentCheck,
    base_case_satisfied,
    run_check,
    run_checks,
)
from convergent.coordinator.decide import (
    Continue,
    Decision,
    Interrupt,
    Stop,
    advance,
    apply_decision,
    decide,
)
from convergent.coordinator.hook import HookAnswer, HookEvent, HookInput, answer_hook
from convergent.coordinator.metrics import Health, Metrics, health, metrics
from convergent.coordinator.progress import (
    evaluate_progress,
    observe_iteration,
    pending_count,
    resolved_count,
)
from convergent.coordinator.state import (
    SCHEMA_VERSION,
    Atom,
    AtomStatus,
    Attempt,
    BaseCase,
    Control,
    HookSettings,
    ProgressKind,
    StateFileError,
    WorkflowState,
    WorkflowStatus,
    dump_state,
    parse_state,
)
from convergent.coordinator.store import DEFAULT_STATE_FILE, StateStore

if TYPE_CHECKING:
    from convergent.coordinator.agent_runs import (
        CHECK_ATOM_PREFIX,
        coordinate_agent,
        follow_up_task,
    )
    from convergent.coordinator.controller import (
        AttemptFn,
        AttemptReport,
        Coordinator,
        CoordinatorResult,
        Failure,
    )

__all__ = [
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

_MODULE_OF = {
    "CHECK_ATOM_PREFIX": "convergent.coordinator.agent_runs",
    "coordinate_agent": "convergent.coordinator.agent_runs",
    "follow_up_task": "convergent.coordinator.agent_runs",
    "AttemptFn": "convergent.coordinator.controller",
    "AttemptReport": "convergent.coordinator.controller",
    "Coordinator": "convergent.coordinator.controller",
    "CoordinatorResult": "convergent.coordinator.controller",
    "Failure": "convergent.coordinator.controller",
}
"""Names whose modules load asyncio, imported on first use: the hook never needs them."""


def __getattr__(name: str) -> object:
    """Import an exported name's module when the name is first used (PEP 562)."""
    return _load_export(globals(), _MODULE_OF, name)


def __dir__() -> list[str]:
    """The names already imported and the exported ones not yet used."""
    return _listed_names(globals(), __all__)
