"""Strategy switch advice for a stalled workflow, and the "no inertia loops" rule.

When the unresolved count stops shrinking, repeating what was just done is the one
thing sure not to help. The advice reads what the state shows and names the switch that
fits, most specific first:

- the unresolved count grew: re-integrate atoms (over-decomposition);
- the same command or atom failed repeatedly: try a different approach;
- an OR alternative failed and another is untried: backtrack to the alternative;
- no unresolved atom has its dependencies resolved: reconsider the dependency graph;
- an atom is marked ``needs_info``, or nothing else explains the stall: probe for
  information first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from convergent.coordinator.progress import blocked_atoms, ready_atoms, unresolved_atoms
from convergent.coordinator.state import AtomStatus, ProgressKind, WorkflowState

__all__ = ["Advice", "InertiaFlag", "StrategySwitch", "find_inertia", "strategy_advice"]


class StrategySwitch(StrEnum):
    """The strategy switches of the convergence seed."""

    DIFFERENT_APPROACH = "different_approach"
    RECONSIDER_DEPENDENCIES = "reconsider_dependencies"
    BACKTRACK = "backtrack"
    REINTEGRATE = "reintegrate"
    PROBE = "probe"


@dataclass(frozen=True, slots=True)
class InertiaFlag:
    """The same failing command, or the same atom, attempted repeatedly."""

    kind: Literal["command", "atom"]
    """Whether a command or an atom keeps failing."""
    subject: str
    """The command line or the atom id."""
    failures: int
    """How many recorded failures it has."""

    @property
    def message(self) -> str:
        """The flag in words, telling the agent not to repeat it as is."""
        if self.kind == "command":
            return (
                f"`{self.subject}` failed {self.failures} times: analyse the error and "
                "change the approach before running it again"
            )
        return (
            f"atom {self.subject} failed {self.failures} times: try a different approach "
            "instead of retrying it the same way"
        )


@dataclass(frozen=True, slots=True)
class Advice:
    """One suggested strategy switch and the evidence for it."""

    switch: StrategySwitch
    """Which switch fits."""
    message: str
    """What to do, in words addressed to the agent or person running the loop."""
    atoms: tuple[str, ...] = ()
    """Atoms the advice is about."""


def _command_key(command: str) -> str:
    return " ".join(command.split())


def find_inertia(state: WorkflowState) -> list[InertiaFlag]:
    """Flag commands and atoms whose recorded failures reach ``inertia_threshold``.

    Failures of atoms that are resolved or abandoned no longer count: that work moved on.
    """
    threshold = state.control.inertia_threshold
    closed = {a.id for a in state.atoms if a.status in (AtomStatus.RESOLVED, AtomStatus.ABANDONED)}
    commands: Counter[str] = Counter()
    atoms: Counter[str] = Counter()
    for attempt in state.attempts:
        if attempt.atom is not None and attempt.atom in closed:
            continue
        if attempt.command:
            commands[_command_key(attempt.command)] += 1
        if attempt.atom is not None:
            atoms[attempt.atom] += 1
    flags = [InertiaFlag("command", c, n) for c, n in commands.items() if n >= threshold]
    flags += [InertiaFlag("atom", a, n) for a, n in atoms.items() if n >= threshold]
    return sorted(flags, key=lambda flag: (-flag.failures, flag.kind, flag.subject))


def _backtrack(state: WorkflowState) -> list[Advice]:
    open_ids = {atom.id for atom in unresolved_atoms(state.atoms)}
    advice: list[Advice] = []
    groups = sorted({a.or_group for a in state.atoms if a.or_group and a.id in open_ids})
    for group in groups:
        members = [a for a in state.atoms if a.or_group == group]
        failed = [a for a in members if a.status is AtomStatus.FAILED]
        untried = [a for a in members if a.status is AtomStatus.PENDING]
        if failed and untried:
            advice.append(
                Advice(
                    StrategySwitch.BACKTRACK,
                    f"OR branch {group}: {failed[0].id} failed; abandon it and switch to "
                    f"the alternative {untried[0].id}",
                    (failed[0].id, untried[0].id),
                )
            )
    return advice


def _dependencies(state: WorkflowState) -> list[Advice]:
    if ready_atoms(state.atoms) or not unresolved_atoms(state.atoms):
        return []
    blocked = blocked_atoms(state.atoms)
    return [
        Advice(
            StrategySwitch.RECONSIDER_DEPENDENCIES,
            "no unresolved atom has all its dependencies resolved; reconsider the "
            "dependency graph (drop or split a dependency)",
            tuple(atom.id for atom in blocked),
        )
    ]


def _is_stalled(state: WorkflowState) -> bool:
    control = state.control
    return control.stall_count > 0 or control.last_progress in (
        ProgressKind.STALL,
        ProgressKind.EXPANSION,
    )


def strategy_advice(state: WorkflowState) -> list[Advice]:
    """The strategy switches that fit the state, most specific first.

    Empty while the workflow makes progress; inertia is flagged whenever it shows.
    """
    advice: list[Advice] = []
    history = state.control.pending_history
    if state.control.last_progress is ProgressKind.EXPANSION and len(history) >= 2:
        advice.append(
            Advice(
                StrategySwitch.REINTEGRATE,
                f"unresolved atoms grew from {history[-2]} to {history[-1]}: over-"
                "decomposition; re-integrate small atoms instead of splitting further",
            )
        )
    for flag in find_inertia(state):
        atoms = (flag.subject,) if flag.kind == "atom" else ()
        advice.append(Advice(StrategySwitch.DIFFERENT_APPROACH, flag.message, atoms))
    if not _is_stalled(state):
        return advice
    advice += _backtrack(state)
    advice += _dependencies(state)
    unknown = [a.id for a in unresolved_atoms(state.atoms) if a.needs_info]
    if unknown:
        advice.append(
            Advice(
                StrategySwitch.PROBE,
                "information is missing for " + ", ".join(unknown) + "; investigate before acting",
                tuple(unknown),
            )
        )
    if not advice:
        advice.append(
            Advice(
                StrategySwitch.PROBE,
                "no progress and no recorded failure explains it; probe for the missing "
                "information before acting again",
            )
        )
    return advice
