"""One rule for run ids: the store, `convergent.resume` and the agent refuse the same ids."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import convergent
from convergent import Agent, Limits, UserError, calculator
from convergent._run_id import MAX_RUN_ID, check_run_id, child_run_id
from convergent.durability.sqlite import RunStore
from convergent.testing import call, scripted

BAD = ["", "-x", "--db", ".hidden", "a/b", "../up", "a b", "a\nb", "é", "x" * (MAX_RUN_ID + 1)]
GOOD = ["r", "R2-d2", "run_1.2", "0" * MAX_RUN_ID, "a1bd731bbc4b"]


@pytest.mark.parametrize("run_id", GOOD)
def test_good_ids_pass(run_id: str) -> None:
    assert check_run_id(run_id) == run_id


@pytest.mark.parametrize("run_id", BAD)
def test_bad_ids_are_one_clear_line(run_id: str) -> None:
    with pytest.raises(UserError) as raised:
        check_run_id(run_id)
    message = str(raised.value)
    assert message.startswith("run id must be 1-128 letters, digits, '.', '_' or '-'")
    assert "\n" not in message and len(message) < 200


def test_a_long_id_is_shortened_in_the_message() -> None:
    with pytest.raises(UserError, match=r"got 'xxxx+'… \(300 characters\)$"):
        check_run_id("x" * 300)
    with pytest.raises(UserError, match="got a int$"):
        check_run_id(7)


@pytest.mark.parametrize("run_id", ["-x", "a/b", "x" * 231, "a\rb"])
def test_the_store_refuses_a_bad_id_before_writing_anything(tmp_path: Path, run_id: str) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        agent = Agent(scripted("done"), [calculator], store=store)
        with pytest.raises(UserError, match="run id must be"):
            agent.run_sync("task", run_id=run_id)
        assert store.count_runs() == 0


@pytest.mark.parametrize("run_id", ["-x", "a/b", "x" * 231, ""])
def test_resume_refuses_a_bad_id(tmp_path: Path, run_id: str) -> None:
    db = tmp_path / "runs.db"
    with pytest.raises(UserError, match="run id must be"):
        asyncio.run(convergent.resume(run_id, store=db))
    assert not db.exists()


def test_an_id_that_passes_is_stored_and_resumed(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        agent = Agent(
            scripted(call("calculator", expression="1")),
            [calculator],
            store=store,
            limits=Limits(max_cycles=1),
        )
        agent.run_sync("task", run_id="ok-1.x_2")
        assert store.get_run("ok-1.x_2").cycles == 1


def test_a_child_run_id_is_the_parents_cycle_and_call_and_never_shared() -> None:
    assert child_run_id("p", 3, "call_abc-1") == "p.3.call_abc-1"  # a plain id is kept
    alike = {child_run_id("p", 3, call_id) for call_id in ("call/1", "call-1", "call.1")}
    assert len(alike) == 3
    for made in alike:
        assert check_run_id(made) == made
    long = child_run_id("p" * 120, 3, "c" * 40)
    assert len(long) == MAX_RUN_ID and check_run_id(long) == long
