"""Frozen files written by each schema version still load (one fixture per version).

``runs.v1.db`` is a database of schema version 1 holding one run that was compacted
three times, wrote and edited a file, and stopped ``needs_user`` with a steering
message queued; ``state.v1.json`` is that run's `RunState.to_jsonable` output.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from convergent import AssistantMessage, RunState, ToolResultMessage, UserMessage
from convergent.compaction import SUMMARY_HEADER
from convergent.stop import StopReason
from convergent.store import DatabaseSteering, RunStore

FIXTURES = Path(__file__).with_name("fixtures")


@pytest.fixture
def v1_store(tmp_path: Path) -> RunStore:
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v1.db", copy)
    return RunStore(copy)


def test_v1_state_json_loads() -> None:
    data = json.loads((FIXTURES / "state.v1.json").read_text())
    assert data["schema_version"] == 1
    state = RunState.from_jsonable(data)
    assert state.run_id == "fixture-v1"
    assert state.stop_reason is StopReason.NEEDS_USER
    assert state.cycles == 4
    assert isinstance(state.messages[2], UserMessage)
    assert state.messages[2].content.startswith(SUMMARY_HEADER)
    assert [c.id for c in state.pending_calls()] == ["q4"]
    assert [r.id for r in state.tool_calls] == ["c1", "w2", "e3"]


def test_v1_database_loads_the_same_state(v1_store: RunStore) -> None:
    expected = RunState.from_jsonable(json.loads((FIXTURES / "state.v1.json").read_text()))
    assert v1_store.load("fixture-v1") == expected
    summary = v1_store.get_run("fixture-v1")
    assert summary.status == "needs_user" and summary.resumable
    assert summary.config == {"model": "scripted"}
    assert [(q.call_id, q.question) for q in v1_store.pending_questions("fixture-v1")] == [
        ("q4", "Which file?")
    ]


def test_v1_database_keeps_every_checkpoint(v1_store: RunStore) -> None:
    assert v1_store.checkpoint_cycles("fixture-v1") == [0, 1, 2, 3, 4]
    first = v1_store.load("fixture-v1", cycle=0)
    assert [m.role for m in first.messages] == ["system", "user"]
    second = v1_store.load("fixture-v1", cycle=2)
    assert isinstance(second.messages[-2], AssistantMessage)
    assert isinstance(second.messages[-1], ToolResultMessage)
    assert second.messages[-1].content == "wrote 2 bytes to a.txt"


def test_v1_database_delivers_queued_steering(v1_store: RunStore) -> None:
    queue = DatabaseSteering(v1_store, "fixture-v1")
    taken = queue.take()
    assert [(c.kind, c.text) for c in taken.messages] == [("message", "queued while stopped")]
    assert taken.stop is None
    assert queue.take().messages == ()
