"""The one resume: `convergent.resume` claims the run, with a given agent or a rebuilt one."""

from __future__ import annotations

from pathlib import Path

import pytest

import convergent
from convergent import (
    Agent,
    Limits,
    ScriptedModel,
    StopPolicy,
    StopReason,
    UserError,
    calculator,
)
from convergent.durability.sqlite import PendingQuestion, RunStore
from convergent.resuming import answers_for
from convergent.testing import call, step, write_script


async def stopped_run(store: RunStore) -> None:
    """A run ``r`` stopped ``max_cycles`` after one calculation."""
    model = ScriptedModel([step(call("calculator", expression="1+1")), "2, so far"])
    agent = Agent(model, [calculator], limits=Limits(max_cycles=1), store=store)
    result = await agent.run("add", run_id="r")
    assert result.stop_reason is StopReason.MAX_CYCLES


async def test_a_resume_with_an_agent_is_refused_while_another_task_holds_the_run(
    tmp_path: Path,
) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        await stopped_run(store)
        held = store.claim("r")
        agent = Agent(ScriptedModel(["2"]), [calculator])
        with pytest.raises(UserError, match="'r' is running"):
            await convergent.resume("r", store=store, agent=agent)
        held.release()
        result = await convergent.resume("r", store=store, agent=agent)
    assert result.stop_reason is StopReason.COMPLETED and result.output == "2"


async def test_a_resume_with_an_agent_refuses_a_completed_run_like_one_without(
    tmp_path: Path,
) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        await stopped_run(store)
        agent = Agent(ScriptedModel(["2", "again"]), [calculator])
        resumed = await convergent.resume("r", store=store, agent=agent)
        assert resumed.stop_reason is StopReason.COMPLETED
        with pytest.raises(UserError, match="ended completed; there is nothing to resume"):
            await convergent.resume("r", store=store, agent=agent)
        with pytest.raises(UserError, match="ended completed; there is nothing to resume"):
            await convergent.resume("r", store=store)


def test_answers_are_checked_against_the_questions_the_run_waits_on() -> None:
    asked = [PendingQuestion("q1", "Which colour?")]
    assert answers_for("r", asked, "blue") == {"q1": "blue"}
    with pytest.raises(UserError, match="waits for an answer to: Which colour?"):
        answers_for("r", asked, None)
    with pytest.raises(UserError, match="is not waiting for an answer"):
        answers_for("r", [], "blue")
    assert answers_for("r", [], None) == {}


def test_the_old_import_paths_of_resume_still_work_with_a_deprecation() -> None:
    import convergent.durability
    import convergent.durability.resuming as old

    with pytest.warns(DeprecationWarning, match=r"import it from convergent\.resuming"):
        assert old.resume is convergent.resume
    with pytest.warns(DeprecationWarning, match=r"import it from convergent\.resuming"):
        from convergent.durability.resuming import answers_for as moved
    assert moved is answers_for
    with pytest.warns(DeprecationWarning, match=r"use convergent\.resume"):
        assert convergent.durability.resume is convergent.resume
    with pytest.raises(AttributeError, match="nothing"):
        _ = old.nothing


async def test_resume_limits_count_from_the_runs_start_and_a_used_up_budget_is_renewed(
    tmp_path: Path,
) -> None:
    script = tmp_path / "s.json"
    write_script(script, *[call("calculator", expression=f"{n}+1") for n in range(8)])
    spec = convergent.AgentSpec(
        model=f"scripted:{script}", tools=("calculator",), limits=Limits(max_cycles=2),
        policy=StopPolicy(final_answer=False),
    )  # fmt: skip
    with RunStore(tmp_path / "runs.db") as store:
        for run_id in ("a", "b", "c"):
            first = await convergent.build_agent(spec).run("add", run_id=run_id, store=store)
            assert first.cycles == 2
        given = await convergent.resume("a", store=store, limits=Limits(max_cycles=3))
        renewed = await convergent.resume("b", store=store)
        with pytest.raises(UserError, match=r"has used 2 of max_cycles=2: budgets count from"):
            await convergent.resume("c", store=store, limits=Limits(max_cycles=2))
    assert (given.stop_reason, given.cycles) == (StopReason.MAX_CYCLES, 3)
    assert (renewed.stop_reason, renewed.cycles) == (StopReason.MAX_CYCLES, 4)
