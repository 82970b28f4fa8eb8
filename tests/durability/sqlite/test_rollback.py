from __future__ import annotations

import os
from pathlib import Path

import pytest

from convergent import Agent, Limits, ModelResponse, ScriptedModel, UserError, tool
from convergent.durability.sqlite import RunStore
from convergent.edit_tools import edit_tools
from convergent.stop import StopReason
from convergent.testing import call, step


def make_agent(store: RunStore, workspace: Path, script: list[ModelResponse | str]) -> Agent:
    @tool(modifies_files=True)
    def scramble() -> str:
        """Rewrite notes.txt without saying which file it touches."""
        (workspace / "notes.txt").write_text("scrambled")
        return "ok"

    tools = [*edit_tools(workspace), scramble]
    return Agent(
        ScriptedModel(script),
        tools,
        limits=Limits(max_cycles=20),
        store=store,
        workspace=workspace,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("original notes")
    return root


async def run_four_cycles(store: RunStore, workspace: Path) -> None:
    script: list[ModelResponse | str] = [
        step(call("write_file", "w1", path="a.txt", content="v1")),
        step(call("edit_file", "e2", path="a.txt", old_text="v1", new_text="v2")),
        step(call("write_file", "w3", path="sub/b.txt", content="new file")),
        step(call("scramble", "s4")),
        "done",
    ]
    result = await make_agent(store, workspace, script).run("edit", run_id="r")
    assert result.stop_reason is StopReason.COMPLETED
    assert (workspace / "a.txt").read_text() == "v2"
    assert (workspace / "sub" / "b.txt").exists()
    assert (workspace / "notes.txt").read_text() == "scrambled"


async def test_rewind_restores_files_and_conversation(store: RunStore, workspace: Path) -> None:
    await run_four_cycles(store, workspace)
    result = store.rewind("r", 1)
    assert sorted(result.restored) == ["a.txt", "notes.txt"]
    assert result.deleted == ("sub/b.txt",)
    assert (workspace / "a.txt").read_text() == "v1"
    assert not (workspace / "sub" / "b.txt").exists()
    assert (workspace / "notes.txt").read_text() == "original notes"
    state = store.load("r")
    assert state.cycles == 1
    assert state.stop_reason is StopReason.STOPPED
    assert [r.id for r in state.tool_calls] == ["w1"]
    assert [m.role for m in state.messages] == ["user", "assistant", "tool"]
    assert store.checkpoint_cycles("r") == [0, 1]


async def test_rewind_to_zero_removes_created_files_and_the_run_resumes(
    store: RunStore, workspace: Path
) -> None:
    await run_four_cycles(store, workspace)
    result = store.rewind("r", 0)
    assert "a.txt" in result.deleted
    assert not (workspace / "a.txt").exists()
    agent = make_agent(
        store, workspace, [step(call("write_file", "w9", path="c.txt", content="c")), "ok"]
    )
    resumed = await agent.run(state=store.load("r"))
    assert resumed.stop_reason is StopReason.COMPLETED
    assert resumed.cycles == 2
    assert (workspace / "c.txt").read_text() == "c"
    assert [r.id for r in store.load("r").tool_calls] == ["w9"]


async def test_rewind_twice_to_the_same_cycle_is_stable(store: RunStore, workspace: Path) -> None:
    await run_four_cycles(store, workspace)
    store.rewind("r", 2)
    assert (workspace / "a.txt").read_text() == "v2"
    again = store.rewind("r", 2)
    assert again.restored == () and again.deleted == ()
    assert store.load("r").cycles == 2


async def test_rewind_refuses_a_running_run_and_unknown_cycles(
    store: RunStore, workspace: Path
) -> None:
    await run_four_cycles(store, workspace)
    with pytest.raises(UserError, match="no checkpoint for cycle 42"):
        store.rewind("r", 42)
    with store.transaction() as conn:
        conn.execute(
            "UPDATE runs SET status = 'running', pid = ? WHERE run_id = 'r'", (os.getpid(),)
        )
    with pytest.raises(UserError, match="is running"):
        store.rewind("r", 1)


async def test_snapshot_is_taken_before_the_change(store: RunStore, workspace: Path) -> None:
    await run_four_cycles(store, workspace)
    rows = store.query(
        "SELECT s.cycle, s.path, s.existed, b.data FROM snapshots s "
        "LEFT JOIN blobs b ON b.hash = s.hash WHERE s.run_id = 'r' AND s.path = 'a.txt' "
        "ORDER BY s.id"
    )
    # scramble (cycle 4) names no file, so every workspace file was saved before it ran
    assert rows == [(1, "a.txt", 0, None), (2, "a.txt", 1, b"v1"), (4, "a.txt", 1, b"v2")]


async def test_rewind_never_writes_through_a_planted_link(
    store: RunStore, workspace: Path, tmp_path: Path
) -> None:
    await run_four_cycles(store, workspace)
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    (workspace / ".a.txt.convergent-restore").symlink_to(outside)
    (workspace / "notes.txt").unlink()
    (workspace / "notes.txt").symlink_to(outside)
    result = store.rewind("r", 0)
    assert outside.read_text() == "untouched"
    assert "notes.txt" in result.skipped
