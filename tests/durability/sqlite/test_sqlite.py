from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from convergent import (
    Agent,
    Limits,
    ModelResponse,
    StorageError,
    ToolCall,
    UserError,
    calculator,
    tool,
)
from convergent.durability.sqlite import DB_SCHEMA_VERSION, RunStore
from convergent.messages import AssistantMessage, CallOutcome
from convergent.state import STATE_SCHEMA_VERSION, MonitorState
from convergent.stop import StopReason
from convergent.testing import call, scripted
from query_plans import outer_plan, recorded_queries


def agent_for(store: RunStore, script: list[Any], **kwargs: object) -> Agent:
    return Agent(
        scripted(*script),
        [calculator],
        system_prompt="sys",
        store=store,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_stored_state_equals_the_final_state(store: RunStore) -> None:
    script = [call("calculator", expression=f"{i}*2") for i in range(4)] + ["done"]
    agent = agent_for(store, script)
    result = await agent.run("double things", run_id="r1")
    loaded = store.load("r1")
    assert loaded.messages == list(result.messages)
    assert tuple(loaded.tool_calls) == result.tool_calls
    assert sorted(count for _, count in loaded.monitor.stretch.values()) == [1, 1, 1, 1]
    assert loaded.stop_reason is StopReason.COMPLETED
    assert loaded.cycles == 5 and loaded.usage == result.usage
    assert loaded.schema_version == STATE_SCHEMA_VERSION
    assert store.checkpoint_cycles("r1") == [0, 1, 2, 3, 4, 5]


async def test_checkpoint_at_a_cycle_is_the_state_after_that_cycle(store: RunStore) -> None:
    agent = agent_for(
        store, [call("calculator", expression="1+1"), call("calculator", expression="2+2"), "done"]
    )
    await agent.run("t", run_id="r1")
    after_one = store.load("r1", cycle=1)
    assert after_one.cycles == 1
    assert [m.role for m in after_one.messages] == ["system", "user", "assistant", "tool"]
    assert [r.result for r in after_one.tool_calls] == ["2"]
    assert after_one.monitor == MonitorState()  # a rewound run counts afresh
    assert after_one.stop_reason is None
    with pytest.raises(UserError, match="no checkpoint for cycle 9"):
        store.load("r1", cycle=9)


async def test_listing_and_summary(store: RunStore) -> None:
    await agent_for(store, ["a"]).run("first", run_id="one")
    await agent_for(store, [call("calculator", expression="1")], limits=Limits(max_cycles=1)).run(
        "second", run_id="two"
    )
    runs = {run.run_id: run for run in store.list_runs()}
    assert runs["one"].status == "completed" and not runs["one"].resumable
    assert runs["two"].status == "max_cycles" and runs["two"].resumable
    assert runs["two"].cycles == 1 and runs["two"].task == "second"
    assert store.list_runs(limit=1)[0].run_id == "two"
    assert [r.run_id for r in store.list_runs(limit=1, offset=1)] == ["one"]
    assert [r.run_id for r in store.list_runs(status="completed")] == ["one"]
    assert store.list_runs(limit=5, offset=1, status="max_cycles") == []
    assert store.count_runs() == 2 and store.count_runs("max_cycles") == 1
    assert store.count_runs("running") == 0 and store.count_runs("interrupted") == 0
    with pytest.raises(UserError, match="no run 'three'"):
        store.get_run("three")


@tool
def note(text: str) -> str:
    """Keep a note (a call that may not run twice: its end is committed as it comes).

    Args:
        text: The note.
    """
    return "kept"


async def test_the_tools_runs_called_are_listed_by_name(store: RunStore) -> None:
    """Calls committed as they end (``note``) and with the next cycle (the calculator's)
    each put their tool's name in the list, once."""
    script = scripted(
        call("calculator", expression="1"),
        call("note", text="a"),
        call("calculator", expression="2"),
        "done",
    )
    await Agent(script, [calculator, note], store=store).run("t", run_id="one")
    await agent_for(store, [call("calculator", expression="3"), "done"]).run("t", run_id="two")
    assert store.tool_names() == ["calculator", "note"]
    store.delete("one")
    assert store.tool_names() == ["calculator"]


@pytest.mark.parametrize("listing", ["list_runs", "iter_runs"])
async def test_runs_without_a_parent_are_read_in_the_index_order(
    store: RunStore, listing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing of the runs that are no run's child reads the ``updated_at`` index in order
    and stops at its page's end: it sorts none of them."""
    for name in ("one", "two", "three"):
        await agent_for(store, ["a"]).run(name, run_id=name)
    ran = recorded_queries(store, monkeypatch)
    if listing == "list_runs":
        listed = store.list_runs(2, top_only=True)
    else:
        listed = list(store.iter_runs(top_only=True, page=2))
    assert [run.run_id for run in listed][:2] == ["three", "two"]
    for query in ran:
        steps = outer_plan(store, query)
        assert "runs USING INDEX runs_updated" in steps[0], steps
        assert not [step for step in steps if "TEMP B-TREE" in step], steps


@pytest.mark.parametrize("status", ["running", "interrupted"])
async def test_runs_whose_row_says_running_are_found_by_an_index(
    store: RunStore, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The running and interrupted filters ask which rows say ``running`` (few, in a
    database of many runs) by the ``status`` index, not by reading every run."""
    for name in ("one", "two"):
        await agent_for(store, ["a"]).run(name, run_id=name)
    ran = recorded_queries(store, monkeypatch)
    assert store.count_runs(status) == 0 and store.list_runs(10, status=status) == []
    asked = [query for query in ran if "status = 'running'" in query[0]]
    assert asked
    for query in asked:
        steps = outer_plan(store, query)
        assert [step for step in steps if "USING" in step and "runs_status" in step], steps
        assert not [step for step in steps if step.startswith("SCAN runs")], steps


async def test_a_stop_reasons_runs_are_counted_by_its_index_and_listed_in_order(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting the runs of a stop reason reads its index alone; listing them reads the
    runs most recently updated first and stops at the page's end (no sort of them all)."""
    for name in ("one", "two", "three"):
        await agent_for(store, ["a"]).run(name, run_id=name)
    ran = recorded_queries(store, monkeypatch)
    assert store.count_runs("completed", top_only=True) == 3
    assert [run.run_id for run in store.list_runs(2, status="completed", top_only=True)] == [
        "three",
        "two",
    ]
    counted, listed = ran
    assert outer_plan(store, counted) == [
        "SEARCH runs USING COVERING INDEX runs_stop_reason (stop_reason=? AND parent_run_id=?)"
    ]
    steps = outer_plan(store, listed)
    assert steps[0] == "SCAN runs USING INDEX runs_updated", steps
    assert not [step for step in steps if "TEMP B-TREE" in step], steps


async def test_a_new_run_with_a_stored_id_is_refused(store: RunStore) -> None:
    await agent_for(store, ["a"]).run("first", run_id="same")
    with pytest.raises(UserError, match="already exists"):
        await agent_for(store, ["b"]).run("again", run_id="same")


async def test_gate_style_replacement_of_the_last_message_is_stored(store: RunStore) -> None:
    class Replace:
        tools = ()

        async def review(self, response, state, emit):  # type: ignore[no-untyped-def]
            return (ToolCall(id="swapped", name="calculator", arguments={"expression": "7"}),)

        async def after_tools(self, records, state, emit):  # type: ignore[no-untyped-def]
            return None

    agent = agent_for(store, [call("calculator", expression="1"), "done"], gate=Replace())
    result = await agent.run("t", run_id="g")
    loaded = store.load("g")
    assert loaded.messages == list(result.messages)
    assistant = loaded.messages[2]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.tool_calls[0].id == "swapped"


def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    RunStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {DB_SCHEMA_VERSION + 1}")
    with pytest.raises(UserError, match="schema version"):
        RunStore(path)


def test_an_unopenable_path_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StorageError, match="cannot open run database .*dir.db"):
        RunStore(tmp_path / "dir.db")


async def test_results_committed_before_a_crash_are_recovered(store: RunStore) -> None:
    """A batch whose results were committed but never appended still has them on load."""
    script = [
        ModelResponse(
            tool_calls=(
                ToolCall(id="a", name="calculator", arguments={"expression": "1+1"}),
                ToolCall(id="b", name="calculator", arguments={"expression": "2+2"}),
            )
        )
    ]
    agent = agent_for(store, script, limits=Limits(max_cycles=1))
    result = await agent.run("t", run_id="r")
    end = [m.role for m in result.messages].index("assistant") + 1
    with store.transaction() as conn:
        # Make the stored conversation end at the assistant message, as after a kill.
        conn.execute(
            "UPDATE runs SET message_count = ?, stop_reason = NULL WHERE run_id = 'r'", (end,)
        )
    state = store.load("r")
    assert [m.role for m in state.messages][end - 1 :] == ["assistant", "tool", "tool"]
    assert state.pending_calls() == []
    assert [m.content for m in state.messages[end:]] == ["2", "4"]


async def test_outcomes_are_the_enum_in_memory_and_their_values_in_the_database(
    store: RunStore,
) -> None:
    unknown = call("nope")
    result = await agent_for(store, [call("calculator", expression="2+2"), unknown, "done"]).run(
        "t", run_id="r1"
    )
    expected = [CallOutcome.OK, CallOutcome.INVALID]
    assert [r.outcome for r in result.tool_calls] == expected
    assert [type(r.outcome) for r in store.load("r1").tool_calls] == [CallOutcome] * 2
    stored = store.query("SELECT outcome FROM finished_calls ORDER BY cycle")
    assert stored == [("ok",), ("invalid",)]
    assert [type(outcome) for (outcome,) in stored] == [str, str]
