from __future__ import annotations

from convergent.coordinator import (
    Atom,
    AtomStatus,
    InertiaFlag,
    StrategySwitch,
    WorkflowState,
    abandon_atom,
    find_inertia,
    observe_iteration,
    record_failure,
    resolve_atom,
    strategy_advice,
)

from .conftest import make_state


def _stalled(state: WorkflowState) -> WorkflowState:
    observe_iteration(state)
    observe_iteration(state)
    assert state.control.stall_count == 1
    return state


def _switches(state: WorkflowState) -> list[StrategySwitch]:
    return [item.switch for item in strategy_advice(state)]


def test_no_advice_while_progressing() -> None:
    state = make_state(3)
    observe_iteration(state)
    resolve_atom(state, "p0")
    observe_iteration(state)
    assert strategy_advice(state) == []


def test_same_failing_command_is_flagged_as_inertia() -> None:
    state = make_state(2)
    record_failure(state, command="npm test", error="1 failing")
    assert find_inertia(state) == []
    record_failure(state, command="npm   test", error="1 failing")
    assert find_inertia(state) == [InertiaFlag("command", "npm test", 2)]
    advice = strategy_advice(state)
    assert advice[0].switch is StrategySwitch.DIFFERENT_APPROACH
    assert "`npm test` failed 2 times" in advice[0].message


def test_same_failing_atom_is_flagged_and_cleared_once_resolved() -> None:
    state = make_state(2)
    record_failure(state, atom_id="p0", command="try A")
    record_failure(state, atom_id="p0", command="try B")
    assert find_inertia(state) == [InertiaFlag("atom", "p0", 2)]
    resolve_atom(state, "p0")
    assert find_inertia(state) == []


def test_inertia_threshold_is_configurable() -> None:
    state = make_state(1, inertia_threshold=3)
    for _ in range(2):
        record_failure(state, command="make")
    assert find_inertia(state) == []
    record_failure(state, command="make")
    assert [flag.failures for flag in find_inertia(state)] == [3]


def test_expansion_advises_reintegration() -> None:
    state = make_state(2)
    observe_iteration(state)
    state.atoms = [*state.atoms, Atom(id="x1"), Atom(id="x2")]
    observe_iteration(state)
    advice = strategy_advice(state)
    assert advice[0].switch is StrategySwitch.REINTEGRATE
    assert "grew from 2 to 4" in advice[0].message


def test_failed_or_branch_with_untried_alternative_advises_backtrack() -> None:
    state = WorkflowState(
        atoms=[Atom(id="jwt", or_group="tokens"), Atom(id="opaque", or_group="tokens")]
    )
    record_failure(state, atom_id="jwt", error="no library")
    _stalled(state)
    advice = [a for a in strategy_advice(state) if a.switch is StrategySwitch.BACKTRACK]
    assert len(advice) == 1
    assert advice[0].atoms == ("jwt", "opaque")
    assert "switch to the alternative opaque" in advice[0].message
    abandon_atom(state, "jwt", switch_to="opaque")
    assert StrategySwitch.BACKTRACK not in _switches(state)


def test_nothing_ready_advises_reconsidering_dependencies() -> None:
    # vendor was abandoned, so nothing downstream of it can start
    state = WorkflowState(
        atoms=[
            Atom(id="vendor", status=AtomStatus.ABANDONED),
            Atom(id="base", depends_on=["vendor"]),
            Atom(id="api", depends_on=["base"]),
            Atom(id="ui", depends_on=["api"]),
        ]
    )
    _stalled(state)
    advice = strategy_advice(state)
    assert [a.switch for a in advice] == [StrategySwitch.RECONSIDER_DEPENDENCIES]
    assert advice[0].atoms == ("base", "api", "ui")


def test_needs_info_advises_probe() -> None:
    state = WorkflowState(atoms=[Atom(id="perf", needs_info=True)])
    _stalled(state)
    advice = strategy_advice(state)
    assert [a.switch for a in advice] == [StrategySwitch.PROBE]
    assert advice[0].atoms == ("perf",)


def test_unexplained_stall_falls_back_to_probe() -> None:
    state = _stalled(make_state(2))
    advice = strategy_advice(state)
    assert [a.switch for a in advice] == [StrategySwitch.PROBE]
    assert "no recorded failure explains it" in advice[0].message
