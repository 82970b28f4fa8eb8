from __future__ import annotations

from pathlib import Path

import pytest

from convergent.coordinator import (
    ArtifactCheck,
    Atom,
    AtomStatus,
    AttemptReport,
    Coordinator,
    Failure,
    StateStore,
    StrategySwitch,
    WorkflowStatus,
    request_redirect,
    strategy_advice,
)
from convergent.stop import StopReason

from .conftest import make_state

DONE = ArtifactCheck(name="done", path="done.txt")


async def test_repeats_attempts_until_the_base_case_passes(
    store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(3, checks=[DONE], max_iterations=10, max_stall_count=5))
    calls: list[int] = []

    async def attempt(iteration: int) -> AttemptReport:
        calls.append(iteration)
        if iteration == 3:
            (tmp_path / "done.txt").write_text("ok")
        return AttemptReport(resolved=[f"p{iteration - 1}"], result=f"run {iteration}")

    result = await Coordinator(store).run(attempt)
    assert result.stop_reason is StopReason.COMPLETED
    assert calls == [1, 2, 3]
    assert result.iterations == 3
    assert [o.result for o in result.outcomes] == ["run 1", "run 2", "run 3"]
    assert [c.passed for c in result.checks] == [True]
    saved = store.load()
    assert saved.control.status is WorkflowStatus.COMPLETED
    assert saved.control.stop_reason is StopReason.COMPLETED
    assert saved.control.pending_history == [2, 1, 0]
    assert saved.control.iteration == 3


async def test_stops_on_stall_with_advice(store: StateStore) -> None:
    store.create(make_state(2, checks=[DONE], max_iterations=50, max_stall_count=2))

    async def attempt(iteration: int) -> AttemptReport:
        return AttemptReport(failures=[Failure(atom="p0", command="make fix", error="E1")])

    result = await Coordinator(store).run(attempt)
    assert result.stop_reason is StopReason.STALLED
    assert result.iterations == 3  # one observation, then two stalls
    assert result.detail == "max_stall_count exceeded: stall_count 2 >= max_stall_count 2"
    assert result.state.control.stop_detail == result.detail
    assert StrategySwitch.DIFFERENT_APPROACH in {a.switch for a in strategy_advice(result.state)}


async def test_stops_at_the_iteration_limit(store: StateStore) -> None:
    store.create(make_state(10, checks=[DONE], max_iterations=4, max_stall_count=9))

    async def attempt(iteration: int) -> AttemptReport:
        return AttemptReport(resolved=[f"p{iteration}"])

    result = await Coordinator(store).run(attempt)
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.iterations == 4
    assert result.state.control.iteration == 4


async def test_completion_on_the_last_allowed_iteration_wins_over_the_limit(
    store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(1, checks=[DONE], max_iterations=2))

    async def attempt(iteration: int) -> None:
        if iteration == 2:
            (tmp_path / "done.txt").write_text("ok")

    result = await Coordinator(store).run(attempt)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.iterations == 2


async def test_stop_requested_during_an_attempt(store: StateStore) -> None:
    store.create(make_state(5, checks=[DONE]))
    coordinator = Coordinator(store)

    async def attempt(iteration: int) -> AttemptReport:
        if iteration == 2:
            coordinator.request_stop("operator said so")
        return AttemptReport(resolved=[f"p{iteration}"])

    result = await coordinator.run(attempt)
    assert result.stop_reason is StopReason.STOPPED
    assert result.iterations == 2
    assert result.detail == "stop requested: operator said so"


async def test_base_case_already_satisfied_needs_no_attempt(
    store: StateStore, tmp_path: Path
) -> None:
    (tmp_path / "done.txt").write_text("ok")
    store.create(make_state(1, checks=[DONE]))

    async def attempt(iteration: int) -> None:
        raise AssertionError("no attempt expected")

    result = await Coordinator(store).run(attempt)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.iterations == 0


async def test_redirect_interrupts_without_stopping(store: StateStore) -> None:
    store.create(make_state(3, checks=[DONE]))

    async def attempt(iteration: int) -> AttemptReport:
        with store.update() as state:
            request_redirect(state, "focus on the API first")
        return AttemptReport(resolved=["p0"])

    result = await Coordinator(store).run(attempt)
    assert result.interrupted
    assert result.stop_reason is None
    assert result.detail == "interrupted: focus on the API first"
    assert result.state.control.status is WorkflowStatus.RUNNING
    assert result.iterations == 1


async def test_attempt_report_adds_atoms_and_records_failures(store: StateStore) -> None:
    store.create(make_state(1, checks=[DONE], max_iterations=1))

    async def attempt(iteration: int) -> AttemptReport:
        return AttemptReport(
            added=[Atom(id="found", title="discovered", depends_on=["p0"])],
            failures=[Failure(atom="p0", command="pytest", error="AssertionError\nmore")],
        )

    result = await Coordinator(store).run(attempt)
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.state.atom("found").depends_on == ["p0"]
    assert result.state.atom("p0").status is AtomStatus.FAILED
    assert result.state.attempts[0].error == "AssertionError"


async def test_attempt_exception_propagates_and_state_survives(store: StateStore) -> None:
    store.create(make_state(2, checks=[DONE]))

    async def attempt(iteration: int) -> None:
        raise RuntimeError("model backend down")

    with pytest.raises(RuntimeError, match="model backend down"):
        await Coordinator(store).run(attempt)
    assert store.load().control.status is WorkflowStatus.RUNNING


async def test_plain_return_values_are_kept(store: StateStore) -> None:
    store.create(make_state(1, max_iterations=2))

    async def attempt(iteration: int) -> dict[str, int]:
        return {"iteration": iteration}

    result = await Coordinator(store, verify_first=False).run(attempt)
    assert result.outcomes == [{"iteration": 1}, {"iteration": 2}]
    assert result.checks == []
    assert result.stop_reason is StopReason.MAX_CYCLES
