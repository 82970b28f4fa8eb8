"""The workflow state file (``workflow-state.yaml``): its schema and how it is parsed.

The file holds everything the coordinator decides from, so that a CLI call, a Claude
Code hook and a Python controller can all share one loop:

- ``atoms``: the work items, each with a status and the atoms it depends on (a DAG);
  atoms in the same ``or_group`` are alternatives, of which one must be resolved.
- ``base_case``: the completion checks and their latest results.
- ``control``: iteration and stall counters, their limits, the stop and redirect
  flags, the status and stop reason, and the history of unresolved counts.
- ``attempts``: failed attempts (atom and command), used to flag inertia loops.

Parsing rejects YAML nested too deeply, keys given twice, unknown fields, duplicate
ids, unknown dependencies and dependency cycles with a one-line `StateFileError`,
because a hook acting on a misread file would steer an agent on wrong information.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import yaml
from msgspec import Meta, field

from convergent._yaml import UnusableYaml, load_yaml
from convergent.coordinator._record import Record, ValidationError, describe, from_data, to_data
from convergent.coordinator.checks import Check, CheckResult
from convergent.exceptions import UserError
from convergent.stop import StopReason

__all__ = [
    "SCHEMA_VERSION",
    "Atom",
    "AtomStatus",
    "Attempt",
    "BaseCase",
    "Control",
    "HookAction",
    "HookAnswerRecord",
    "HookSettings",
    "ProgressKind",
    "StateFileError",
    "WorkflowState",
    "WorkflowStatus",
    "dump_state",
    "parse_state",
]

SCHEMA_VERSION = 1
"""Version of the state file layout written by this release."""

HISTORY_LIMIT = 200
"""How many unresolved counts ``control.pending_history`` keeps (oldest dropped first)."""


class StateFileError(UserError):
    """The state file is missing, unreadable, corrupt or fails the schema."""


class AtomStatus(StrEnum):
    """Where one work item stands."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    RESOLVED = "resolved"
    FAILED = "failed"
    ABANDONED = "abandoned"
    """Given up in favour of an alternative (an OR switch) or re-integrated."""


class WorkflowStatus(StrEnum):
    """Where the whole workflow stands."""

    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"


class ProgressKind(StrEnum):
    """How the unresolved count moved between two iterations."""

    PROGRESS = "progress"
    """Fewer unresolved atoms than before."""
    STALL = "stall"
    """As many unresolved atoms as before."""
    EXPANSION = "expansion"
    """More unresolved atoms than before: over-decomposition."""


_Count = Annotated[int, Meta(ge=0)]
_Limit = Annotated[int, Meta(ge=1)]


class Atom(Record, kw_only=True):
    """One unit of work in the DAG."""

    id: Annotated[str, Meta(min_length=1, pattern=r"^[^\s]+$")]
    """Unique identifier without spaces, e.g. ``auth-api``."""
    title: str = ""
    """What the work item is, in a few words."""
    status: AtomStatus = AtomStatus.PENDING
    """Current status."""
    depends_on: list[str] = field(default_factory=list)
    """Ids of atoms that must be resolved before this one can start."""
    or_group: str | None = None
    """Atoms sharing an OR group are alternatives: resolving one resolves the group."""
    needs_info: bool = False
    """Set when progress needs investigation before anyone can act."""
    note: str | None = None
    """Free text: evidence of resolution, reason for abandoning, and so on."""


class Attempt(Record, kw_only=True):
    """A failed attempt at an atom, kept to detect the same approach repeated."""

    atom: str | None = None
    """Atom the attempt was for, if any."""
    command: str | None = None
    """The command or approach that failed."""
    error: str | None = None
    """The error it produced (first line is enough)."""
    iteration: int = 0
    """The iteration during which it failed."""


class BaseCase(Record, kw_only=True):
    """The completion criteria: externally verifiable checks and their latest results."""

    checks: list[Check] = field(default_factory=list)
    """The checks; all must pass (and there must be at least one)."""
    last_results: list[CheckResult] = field(default_factory=list)
    """Results of the most recent verification, with evidence."""
    verified_at: datetime | None = None
    """When the checks last ran."""

    def _check(self) -> None:
        duplicates = _repeated(check.name for check in self.checks)
        if duplicates:
            raise ValueError(f"duplicate check name(s): {_listed(duplicates)}")


class HookAction(StrEnum):
    """What a Claude Code hook answer did to the agent."""

    ALLOW = "allow"
    """Let the agent stop (or, after a tool call, go on)."""
    BLOCK = "block"
    """Keep the agent working, with the reason as its next instruction."""
    HALT = "halt"
    """End the work (``continue: false``)."""


class HookAnswerRecord(Record, kw_only=True):
    """The hook's latest answer that it recorded, for people and scripts to read back."""

    event: str
    """The Claude Code hook event: ``Stop``, ``SubagentStop``, ``PreToolUse`` or ``PostToolUse``."""
    action: HookAction
    """What the answer did."""
    message: str = ""
    """The text Claude Code was given: the block reason, the stop reason or a note."""
    at: datetime
    """When the hook answered."""


class HookSettings(Record, kw_only=True):
    """How the Claude Code hooks may keep an agent working, and what they last said."""

    max_consecutive_blocks: _Limit = 5
    """Blocks in a row (without the agent being allowed to stop) before the hook gives in.

    Claude Code ends a turn itself after ``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`` (8 by
    default) blocks in a row; the hook never blocks past the lower of the two.
    """
    consecutive_blocks: _Count = 0
    """Blocks in a row so far; reset when a stop is allowed or a new turn starts."""
    block_when_active: bool = False
    """Keep deciding when ``stop_hook_active`` is true (bounded by the cap above).

    Off by default: when Claude Code is already continuing because of a stop hook, the
    hook lets it stop, so one user turn never becomes an unbounded loop.
    """
    halt_reported: bool = False
    """The main agent was told (after a tool call) why the work ended.

    The next tool call then ends its session; cleared when the work continues.
    """
    last_answer: HookAnswerRecord | None = None
    """The hook's latest recorded answer (``coordinator status --json`` shows it)."""


class Control(Record, kw_only=True):
    """Counters, limits and flags the continue/stop decision reads and writes."""

    status: WorkflowStatus = WorkflowStatus.RUNNING
    """Running, completed (base case passed) or stopped."""
    stop_reason: StopReason | None = None
    """Why the workflow ended, in the library's stop vocabulary."""
    stop_detail: str | None = None
    """The stop reason in words, e.g. ``stall_count 3 >= max_stall_count 3``."""
    iteration: _Count = 0
    """Iterations completed so far."""
    max_iterations: _Limit = 20
    """Iteration limit (stop reason ``max_cycles``)."""
    stall_count: _Count = 0
    """Consecutive iterations in which the unresolved count did not shrink."""
    max_stall_count: _Limit = 3
    """Stall limit (stop reason ``stalled``)."""
    stop_requested: bool = False
    """A person or program asked the work to stop (stop reason ``stopped``)."""
    stop_note: str | None = None
    """Why the stop was requested, if given."""
    redirect_requested: bool = False
    """New instructions are being given: an interruption, not a stop."""
    redirect_note: str | None = None
    """The new instructions or why the redirect was requested."""
    pending_history: list[int] = field(default_factory=list)
    """Unresolved count at the end of each iteration, oldest first."""
    last_progress: ProgressKind | None = None
    """How the latest iteration moved the unresolved count."""
    or_switches: _Count = 0
    """How many times an OR alternative was abandoned for another."""
    inertia_threshold: _Limit = 2
    """Failures of the same command, or of the same atom, that flag an inertia loop.

    Two by default, so the flag is raised before the third identical attempt.
    """
    hook: HookSettings = field(default_factory=HookSettings)
    """Claude Code hook settings and its consecutive-block counter."""


class WorkflowState(Record, kw_only=True):
    """The whole state file."""

    schema_version: int = SCHEMA_VERSION
    """Layout version; files from a newer release are refused rather than misread."""
    goal: str = ""
    """What the workflow is for, shown in status views and hook messages."""
    atoms: list[Atom] = field(default_factory=list)
    """The work items (a DAG through ``depends_on``)."""
    base_case: BaseCase = field(default_factory=BaseCase)
    """The completion checks."""
    control: Control = field(default_factory=Control)
    """Counters, limits and flags."""
    attempts: list[Attempt] = field(default_factory=list)
    """Failed attempts, oldest first."""
    updated_at: datetime | None = None
    """When the file was last written."""

    def _check(self) -> None:
        if self.schema_version > SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {self.schema_version} is newer than this convergent "
                f"supports ({SCHEMA_VERSION}); upgrade convergent"
            )
        duplicates = _repeated(atom.id for atom in self.atoms)
        if duplicates:
            raise ValueError(f"duplicate atom id(s): {_listed(duplicates)}")
        known = {atom.id for atom in self.atoms}
        for atom in self.atoms:
            unknown = [dep for dep in atom.depends_on if dep not in known]
            if unknown:
                raise ValueError(
                    f"atom {_clipped(atom.id)} depends on unknown atom(s): {_listed(unknown)}"
                )
        cycle = _find_cycle({atom.id: atom.depends_on for atom in self.atoms})
        if cycle:
            raise ValueError(f"dependency cycle: {_listed(cycle, separator=' -> ')}")

    def atom(self, atom_id: str) -> Atom:
        """Return the atom with this id, or raise `UserError` naming it."""
        for atom in self.atoms:
            if atom.id == atom_id:
                return atom
        raise UserError(f"no atom with id {atom_id!r}")

    def touch(self) -> None:
        """Stamp the state as modified now."""
        self.updated_at = datetime.now(UTC)


# libyaml's dumper when PyYAML has it: the hook writes this file at every stop of an agent
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _repeated(names: Iterable[str]) -> list[str]:
    """The names that occur more than once, sorted (in linear time: files hold thousands)."""
    return sorted(name for name, count in Counter(names).items() if count > 1)


def _clipped(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _listed(names: Sequence[str], *, shown: int = 5, separator: str = ", ") -> str:
    """Names for a one-line message: the first few, then how many more."""
    text = separator.join(_clipped(name) for name in names[:shown])
    return f"{text} (and {len(names) - shown} more)" if len(names) > shown else text


def _find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """Return one dependency cycle as a list of ids (first id repeated last), or None."""
    done: set[str] = set()
    for root in graph:
        if root in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                path.append(node)
                on_path.add(node)
            deps = graph.get(node, [])
            if index < len(deps):
                stack.append((node, index + 1))
                dep = deps[index]
                if dep in on_path:
                    return [*path[path.index(dep) :], dep]
                if dep not in done:
                    stack.append((dep, 0))
            else:
                path.pop()
                on_path.discard(node)
                done.add(node)
    return None


def parse_state(text: str, source: str = "state file") -> WorkflowState:
    """Parse and validate the YAML text of a state file.

    Args:
        text: The file's content.
        source: How to name the file in error messages (usually its path).

    Raises:
        StateFileError: The text is not YAML, nests too deeply, repeats a key, is not a
            mapping, or fails the schema; the message is one line naming the file and the
            first problem.
    """
    try:
        data: Any = load_yaml(text)
    except UnusableYaml as exc:
        raise StateFileError(f"{source}: {exc}") from None
    if not isinstance(data, dict):
        raise StateFileError(f"{source}: expected a mapping at the top level (is it empty?)")
    try:
        return from_data(data, WorkflowState)
    except ValidationError as exc:
        raise StateFileError(f"{source}: {_clipped(describe(exc), 500)}") from None


def dump_state(state: WorkflowState) -> str:
    """Serialise the state as YAML, fields in schema order; unset optional fields omitted."""
    data = to_data(state, drop_none=True)
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=100)
