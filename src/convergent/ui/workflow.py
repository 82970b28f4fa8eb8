"""What the coordinator page shows: a ``workflow-state.yaml`` as a graph, checks and counters.

Atoms are laid out in layers (an atom sits one layer right of its deepest
dependency), so the dependency graph reads left to right; the decision shown is what
the coordinator would decide from the file now, in its priority order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from convergent.coordinator.checks import CheckResult
from convergent.coordinator.decide import decide, describe_decision
from convergent.coordinator.progress import pending_count, ready_atoms
from convergent.coordinator.state import Atom, StateFileError, WorkflowState
from convergent.coordinator.store import read_state_file

__all__ = ["CheckRow", "Node", "WorkflowView", "load_workflow_view"]

NODE_WIDTH, NODE_HEIGHT, GAP_X, GAP_Y = 180, 44, 60, 18


@dataclass(frozen=True, slots=True)
class Node:
    """One atom placed in the drawing."""

    atom: Atom
    """The atom."""
    x: int
    """Left edge."""
    y: int
    """Top edge."""
    ready: bool
    """Whether its dependencies are met and it waits to be worked on."""


@dataclass(frozen=True, slots=True)
class CheckRow:
    """A completion check with its latest result (None: not run yet)."""

    name: str
    """Name of the check."""
    kind: str
    """``command``, ``artifact``, ``http`` or ``judgment``."""
    what: str
    """What it looks at: the command, path, URL or statement."""
    result: CheckResult | None
    """Its latest result, with the evidence."""


@dataclass(frozen=True, slots=True)
class WorkflowView:
    """Everything the coordinator page shows."""

    path: Path
    """The state file."""
    state: WorkflowState | None
    """The parsed state; None when it could not be read."""
    error: str
    """Why it could not be read."""
    nodes: list[Node]
    """Atoms placed in layers."""
    edges: list[tuple[int, int, int, int]]
    """Dependency arrows: from (x, y) to (x, y)."""
    width: int
    """Width of the drawing."""
    height: int
    """Height of the drawing."""
    checks: list[CheckRow]
    """The completion checks."""
    decision: str
    """What the coordinator would decide now."""
    pending: int
    """Unresolved work items."""


def load_workflow_view(path: Path) -> WorkflowView:
    """Read and lay out the state file (a broken file is shown as an error, not raised)."""
    try:
        state = read_state_file(path)
    except StateFileError as exc:
        return _broken(path, str(exc))
    nodes, edges, width, height = _layout(state)
    return WorkflowView(
        path=path,
        state=state,
        error="",
        nodes=nodes,
        edges=edges,
        width=width,
        height=height,
        checks=_checks(state),
        decision=describe_decision(decide(state)),
        pending=pending_count(state.atoms),
    )


def _broken(path: Path, error: str) -> WorkflowView:
    return WorkflowView(path, None, error, [], [], 0, 0, [], "", 0)


def _layers(atoms: list[Atom]) -> dict[str, int]:
    """Each atom's column: one right of its deepest dependency.

    Worked out with a stack rather than recursion, since a chain of dependencies may be
    thousands of atoms long; the parser refused cycles, so every walk ends.
    """
    by_id = {atom.id: atom for atom in atoms}
    layer: dict[str, int] = {}
    for atom in atoms:
        stack = [atom.id]
        while stack:
            deps = by_id[stack[-1]].depends_on
            missing = [dep for dep in deps if dep not in layer]
            if missing:
                stack += missing
                continue
            layer[stack.pop()] = 1 + max((layer[dep] for dep in deps), default=-1)
    return layer


def _layout(state: WorkflowState) -> tuple[list[Node], list[tuple[int, int, int, int]], int, int]:
    layer = _layers(state.atoms)
    rows: dict[int, int] = {}
    ready = {atom.id for atom in ready_atoms(state.atoms)}
    nodes: list[Node] = []
    where: dict[str, tuple[int, int]] = {}
    for atom in state.atoms:
        column = layer[atom.id]
        row = rows.get(column, 0)
        rows[column] = row + 1
        x, y = 10 + column * (NODE_WIDTH + GAP_X), 10 + row * (NODE_HEIGHT + GAP_Y)
        where[atom.id] = (x, y)
        nodes.append(Node(atom, x, y, atom.id in ready))
    edges = [
        (
            where[dep][0] + NODE_WIDTH,
            where[dep][1] + NODE_HEIGHT // 2,
            where[atom.id][0],
            where[atom.id][1] + NODE_HEIGHT // 2,
        )
        for atom in state.atoms
        for dep in atom.depends_on
    ]
    columns = max(rows, default=-1) + 1
    tallest = max(rows.values(), default=0)
    width = 20 + columns * NODE_WIDTH + max(0, columns - 1) * GAP_X
    height = 20 + tallest * NODE_HEIGHT + max(0, tallest - 1) * GAP_Y
    return nodes, edges, width, height


def _checks(state: WorkflowState) -> list[CheckRow]:
    results = {result.name: result for result in state.base_case.last_results}
    rows: list[CheckRow] = []
    for check in state.base_case.checks:
        match check.kind.value:
            case "command":
                command = getattr(check, "command", "")
                what = command if isinstance(command, str) else " ".join(command)
            case "artifact":
                what = str(getattr(check, "path", ""))
            case "http":
                what = str(getattr(check, "url", ""))
            case _:
                what = str(getattr(check, "statement", ""))
        rows.append(CheckRow(check.name, check.kind.value, what, results.get(check.name)))
    return rows
