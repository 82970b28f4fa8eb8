"""Frozen files written by each schema version still load (one fixture per version).

``runs.v1.db`` is a database of schema version 1 holding one run that was compacted
three times, wrote and edited a file, and stopped ``needs_user`` with a steering
message queued; ``state.v1.json`` is that run's `RunState.to_jsonable` output.
``runs.v2.db`` and ``state.v2.json`` are the same for schema version 2: a run built from
a spec with a gate, which wrote a file and stopped ``needs_user`` with a message queued.
``runs.v3.db`` (schema version 3: runs name their holder's start time and claim) holds a
run stopped ``needs_user`` with a message queued, and a run whose process was killed in
its second cycle, so that its row still names that process as its holder.
``runs.v4.db`` (schema version 4: runs keep their monitor and whether the output came
after the stop) and ``state.v3.json`` (run state version 3) hold a run whose lookups
failed twice, then repeated a calculation, was nudged, stopped ``stalled`` and answered
after the stop, with a message queued; ``write_v4.py`` wrote them.
``runs.v5.db`` (schema version 5: runs name the run and call that started them) holds a
run that called an agent as a tool and its linked child run; ``write_v5.py`` wrote it.
``runs.v6.db`` (schema version 6: runs keep their typed output's data) and
``state.v4.json`` (run state version 4) hold a run of an agent with an output type
whose third answer validated; ``write_v6.py`` wrote them. ``state.v7.json`` (run state
version 7: the stop's rule) holds a run stopped ``tool_error`` by
``max_repeated_failures``; ``write_state_v7.py`` wrote it. ``runs.v7.db`` (schema
version 7: runs keep the rule of their stop) holds the same run; ``write_v7.py`` wrote it.
``state.v8.json`` (run state version 8: the counters know each call by a digest of its
canonical key) holds a run whose status read repeated with a new clock time, noted then
stopped ``stalled``, after a lookup that failed; ``write_state_v8.py`` wrote it.
``runs.v8.db`` (schema version 8: the names of the tools the runs called) holds a run
that called a lookup twice, then the calculator; ``write_v8.py`` wrote it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from convergent import ModelResponse, RunResult, RunState, ScriptedModel
from convergent.compaction import SUMMARY_HEADER
from convergent.digest import call_digest
from convergent.durability.sqlite import DB_SCHEMA_VERSION, DatabaseSteering, RunStore
from convergent.messages import AssistantMessage, CallOutcome, ToolResultMessage, UserMessage
from convergent.state import MonitorState
from convergent.stop import StopReason

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


@pytest.fixture
def v2_store(tmp_path: Path) -> RunStore:
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v2.db", copy)
    return RunStore(copy)


def test_v2_state_json_loads() -> None:
    """``state.v2.json``: a gated run that wrote a file and stopped ``needs_user``."""
    data = json.loads((FIXTURES / "state.v2.json").read_text())
    assert data["schema_version"] == 2
    state = RunState.from_jsonable(data)
    assert state.run_id == "fixture-v2" and state.cycles == 4
    assert state.stop_reason is StopReason.NEEDS_USER
    # the replay positions it stored are not kept: the same script, built afresh, finds
    # its place in the conversation, after its 4 replies, where the stored position was
    assert data["model_positions"] == {"model": 4, "scorer": 3}
    assert "model_positions" not in state.to_jsonable()
    replies = [m for m in state.messages if isinstance(m, AssistantMessage)]
    script = ScriptedModel(
        [ModelResponse(content=m.content, tool_calls=m.tool_calls) for m in replies] + ["next"]
    )
    assert asyncio.run(script.request(state.messages, ())).content == "next"
    # its repeat counts and streak were per run: it continues with fresh counters
    assert "call_counts" in data and state.monitor == MonitorState()
    assert [c.name for c in state.pending_calls()] == ["ask_user"]


def test_v2_database_loads_the_same_state_spec_and_events(v2_store: RunStore) -> None:
    expected = RunState.from_jsonable(json.loads((FIXTURES / "state.v2.json").read_text()))
    assert v2_store.load("fixture-v2") == expected
    # the replay positions are kept beside the state, to resume its scripts
    assert v2_store.model_positions("fixture-v2") == {"model": 4, "scorer": 3}
    summary = v2_store.get_run("fixture-v2")
    assert summary.status == "needs_user" and summary.spec is not None
    assert summary.spec["version"] == 1 and summary.spec["gate"]["threshold"] == 0.5
    with pytest.warns(DeprecationWarning, match=r"RunSummary\.spec"):
        assert summary.recipe == summary.spec  # the spec's first name still reads
    kinds = [event["type"] for _, event in v2_store.events("fixture-v2")]
    assert kinds == ["gate_decided"] * 4 + ["user_answered"]
    assert v2_store.checkpoint_cycles("fixture-v2") == [0, 1, 2, 3, 4]
    taken = DatabaseSteering(v2_store, "fixture-v2").take()
    assert [c.text for c in taken.messages] == ["queued while stopped"]


def test_a_v2_database_is_upgraded_and_its_run_claimed(v2_store: RunStore) -> None:
    assert v2_store.query("PRAGMA user_version") == [(DB_SCHEMA_VERSION,)]
    before = v2_store.load("fixture-v2")
    claim = v2_store.claim("fixture-v2")
    assert v2_store.get_run("fixture-v2").running
    claim.release()
    assert v2_store.get_run("fixture-v2").status == "needs_user"
    assert v2_store.load("fixture-v2") == before


@pytest.fixture
def v3_store(tmp_path: Path) -> RunStore:
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v3.db", copy)
    return RunStore(copy)


def test_v3_database_names_holders_and_a_dead_one_blocks_nothing(v3_store: RunStore) -> None:
    asked, cut = v3_store.get_run("fixture-v3"), v3_store.get_run("fixture-v3-cut")
    assert asked.status == "needs_user" and asked.cycles == 2
    assert [q.question for q in v3_store.pending_questions("fixture-v3")] == [
        "What is your favourite colour?"
    ]
    assert [c.text for c in DatabaseSteering(v3_store, "fixture-v3").take().messages] == [
        "queued while stopped"
    ]
    assert cut.status == "interrupted" and cut.resumable
    state = v3_store.load("fixture-v3-cut")
    assert [c.name for c in state.pending_calls()] == ["crash"]
    for run_id in ("fixture-v3", "fixture-v3-cut"):
        v3_store.claim(run_id).release()


@pytest.fixture
def v4_store(tmp_path: Path) -> RunStore:
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v4.db", copy)
    return RunStore(copy)


def test_v3_state_json_loads() -> None:
    """``state.v3.json`` (run state version 3): nudged, stalled, answered after the stop."""
    data = json.loads((FIXTURES / "state.v3.json").read_text())
    assert data["schema_version"] == 3
    state = RunState.from_jsonable(data)
    assert state.run_id == "fixture-v4" and state.cycles == 6
    assert state.stop_reason is StopReason.STALLED
    assert state.output == "2, I believe" and state.output_after_stop
    # a version-3 monitor counted repeats by exact results: its counts start afresh
    assert state.monitor.notes_given == 0 and state.monitor.stretch == {}
    assert [r.name for r in state.tool_calls] == ["lookup", "lookup", "calculator", "calculator"]


def test_v3_database_loads_the_same_state_and_summary(v4_store: RunStore) -> None:
    expected = RunState.from_jsonable(json.loads((FIXTURES / "state.v3.json").read_text()))
    assert v4_store.load("fixture-v4") == expected
    summary = v4_store.get_run("fixture-v4")
    assert summary.status == "stalled" and summary.output_after_stop
    assert summary.output == "2, I believe"
    taken = DatabaseSteering(v4_store, "fixture-v4").take()
    assert [c.text for c in taken.messages] == ["queued while stopped"]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_older_databases_load_without_an_answer_after_the_stop(
    version: int, tmp_path: Path
) -> None:
    copy = tmp_path / f"runs.v{version}.db"
    shutil.copy(FIXTURES / copy.name, copy)
    with RunStore(copy) as store:
        run_id = f"fixture-v{version}"
        assert not store.get_run(run_id).output_after_stop
        assert store.load(run_id).monitor == MonitorState()


def test_stored_outcomes_load_as_the_enum(v4_store: RunStore) -> None:
    """Outcomes stored as their values (``failed``, ``ok``) come back as `CallOutcome`."""
    records = v4_store.load("fixture-v4").tool_calls
    assert [r.outcome for r in records] == [CallOutcome.FAILED] * 2 + [CallOutcome.OK] * 2
    assert all(type(r.outcome) is CallOutcome for r in records)
    old = RunState.from_jsonable(json.loads((FIXTURES / "state.v1.json").read_text()))
    assert all(type(r.outcome) is CallOutcome for r in old.tool_calls)


def test_v5_database_links_a_child_run_to_its_parent_call(tmp_path: Path) -> None:
    """``runs.v5.db`` (schema version 5): a run that called an agent as a tool."""
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v5.db", copy)
    with RunStore(copy) as store:  # upgraded: schema 6 came later
        (child,) = store.children("fixture-v5")
        parent = store.get_run("fixture-v5")
        top = [run.run_id for run in store.iter_runs(top_only=True)]
    assert (child.run_id, child.parent_run_id, child.parent_call_id) == (
        "fixture-v5.1.ask-1",
        "fixture-v5",
        "ask-1",
    )
    assert child.task == "6*7?" and child.output == "42"
    assert parent.parent_run_id is None and parent.output == "The mathematician says 42."
    assert top == ["fixture-v5"]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_older_databases_are_upgraded_to_runs_without_parents(version: int, tmp_path: Path) -> None:
    copy = tmp_path / f"runs.v{version}.db"
    shutil.copy(FIXTURES / copy.name, copy)
    with RunStore(copy) as store:
        assert store.query("PRAGMA user_version") == [(DB_SCHEMA_VERSION,)]
        runs = store.list_runs()
        assert runs and all(run.parent_run_id is None for run in runs)
        assert [run.run_id for run in store.iter_runs(top_only=True)] == [r.run_id for r in runs]
        assert store.children(f"fixture-v{version}") == []


def test_v4_state_json_loads_with_its_output_data() -> None:
    data = json.loads((FIXTURES / "state.v4.json").read_text())
    assert data["schema_version"] == 4
    state = RunState.from_jsonable(data)
    assert state.stop_reason is StopReason.COMPLETED and state.cycles == 4
    assert state.output == '{"total": 6, "unit": "apples"}'
    assert state.output_json == {"total": 6, "unit": "apples"}


def test_v6_database_loads_the_same_state_and_summary(tmp_path: Path) -> None:
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v6.db", copy)
    with RunStore(copy) as store:
        expected = RunState.from_jsonable(json.loads((FIXTURES / "state.v4.json").read_text()))
        assert store.load("fixture-v6") == expected
        summary = store.get_run("fixture-v6")
        assert summary.status == "completed"
        assert summary.output_data == {"total": 6, "unit": "apples"}
        assert store.load("fixture-v6").stop_rule == ""  # version 6 did not keep it
        assert store.query("PRAGMA user_version") == [(DB_SCHEMA_VERSION,)] == [(8,)]


def test_v7_database_keeps_the_rule_of_the_stop(tmp_path: Path) -> None:
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v7.db", copy)
    with RunStore(copy) as store:
        state = store.load("fixture-v7")
        assert state.stop_reason is StopReason.TOOL_ERROR
        assert state.stop_rule == "max_repeated_failures"
        assert RunResult.from_state(state).stop_rule == "max_repeated_failures"
        # a rewind is a stop from outside
        store.rewind("fixture-v7", 2)
        assert store.load("fixture-v7").stop_rule == "stop_requested"


def test_a_v7_database_upgraded_knows_the_tools_its_runs_called(tmp_path: Path) -> None:
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v7.db", copy)
    with RunStore(copy) as store:
        assert store.tool_names() == ["lookup"]


def test_v8_database_keeps_the_names_of_the_tools_called(tmp_path: Path) -> None:
    """``runs.v8.db`` (``write_v8.py``): two lookups, then the calculator; a rewind to
    before the calculator's call, and then deleting the run, take their names away."""
    copy = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs.v8.db", copy)
    with RunStore(copy) as store:
        assert store.query("PRAGMA user_version") == [(DB_SCHEMA_VERSION,)] == [(8,)]
        assert store.tool_names() == ["calculator", "lookup"]
        assert [r.name for r in store.load("fixture-v8").tool_calls] == [
            "lookup",
            "lookup",
            "calculator",
        ]
        store.rewind("fixture-v8", 2)
        assert store.tool_names() == ["lookup"]
        store.delete("fixture-v8")
        assert store.tool_names() == []


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_older_databases_are_upgraded_and_load_without_output_data(
    version: int, tmp_path: Path
) -> None:
    copy = tmp_path / f"runs.v{version}.db"
    shutil.copy(FIXTURES / copy.name, copy)
    with RunStore(copy) as store:
        assert store.query("PRAGMA user_version") == [(DB_SCHEMA_VERSION,)] == [(8,)]
        run_id = f"fixture-v{version}"
        assert store.get_run(run_id).output_data is None
        assert store.load(run_id).output_json is None


def test_v5_state_json_loads_with_its_counters() -> None:
    """``state.v5.json`` (run state version 5, ``write_state_v5.py``): a status read that
    repeated with a new clock time, noted then stopped; counters kept across a resume."""
    data = json.loads((FIXTURES / "state.v5.json").read_text())
    assert data["schema_version"] == 5
    state = RunState.from_jsonable(data)
    assert state.stop_reason is StopReason.STALLED and state.cycles == 5
    monitor = state.monitor
    assert monitor.notes_given == 1 and len(monitor.watched) == 1
    assert [count for _, count in monitor.stretch.values()] == [1, 4]
    assert monitor.budget.tool_calls == 5
    again = RunState.from_jsonable(json.loads(json.dumps(state.to_jsonable())))
    assert again.monitor == monitor


def test_v5_counters_go_on_under_the_digests_of_the_calls_they_stored() -> None:
    """Versions 5 to 7 kept each call's canonical key; version 8 its digest, which the
    calls made after the resume are looked up by."""
    data = json.loads((FIXTURES / "state.v5.json").read_text())
    monitor = RunState.from_jsonable(data).monitor
    status, lookup = call_digest("status", {"job": "j1"}), call_digest("lookup", {"customer": "c1"})
    assert list(monitor.stretch) == list(monitor.started) == [lookup, status]
    assert monitor.stretch[status][1] == 4
    # the recent calls and the watched pattern were digests already: they still match
    assert monitor.watched == [status] and monitor.recent[-1] >> 64 == status


def test_v6_state_json_loads_with_its_output_json() -> None:
    """``state.v6.json`` (run state version 6, ``write_state_v6.py``): a typed answer that
    validated, its JSON data under ``output_json``."""
    data = json.loads((FIXTURES / "state.v6.json").read_text())
    assert data["schema_version"] == 6 and "output_data" not in data
    state = RunState.from_jsonable(data)
    assert state.stop_reason is StopReason.COMPLETED and state.cycles == 3
    assert state.output_json == {"total": 6, "unit": "apples"}
    assert state.stop_rule == ""  # version 6 did not keep the rule
    assert RunState.from_jsonable(json.loads(json.dumps(state.to_jsonable()))) == state


def test_v7_state_json_keeps_the_rule_of_its_stop() -> None:
    """``state.v7.json`` (run state version 7, ``write_state_v7.py``): a lookup that failed
    the same way four times, stopped by ``max_repeated_failures``."""
    data = json.loads((FIXTURES / "state.v7.json").read_text())
    assert data["schema_version"] == 7
    state = RunState.from_jsonable(data)
    assert state.stop_reason is StopReason.TOOL_ERROR and state.cycles == 4
    assert state.stop_rule == "max_repeated_failures"
    assert RunResult.from_state(state).stop_rule == "max_repeated_failures"
    assert RunState.from_jsonable(json.loads(json.dumps(state.to_jsonable()))) == state


def test_v7_counters_go_on_under_the_digest_of_the_failed_call() -> None:
    """``state.v7.json`` kept the failed lookup's canonical key in its failure streak."""
    data = json.loads((FIXTURES / "state.v7.json").read_text())
    monitor = RunState.from_jsonable(data).monitor
    lookup = call_digest("lookup", {"customer": "c1"})
    assert monitor.failed_calls == [lookup] * 4
    assert list(monitor.stretch) == list(monitor.results) == list(monitor.ended) == [lookup]


def test_v8_state_json_loads_with_its_counters_under_the_calls_digests() -> None:
    """``state.v8.json`` (run state version 8, ``write_state_v8.py``): a status read that
    repeated with a new clock time, noted then stopped, after a lookup that failed."""
    data = json.loads((FIXTURES / "state.v8.json").read_text())
    assert data["schema_version"] == 8
    state = RunState.from_jsonable(data)
    assert state.stop_reason is StopReason.STALLED and state.cycles == 5
    assert state.stop_rule == "max_repeated_calls"
    monitor = state.monitor
    status, lookup = call_digest("status", {"job": "j1"}), call_digest("lookup", {"customer": "c1"})
    assert list(monitor.stretch) == list(monitor.started) == [lookup, status]
    assert monitor.stretch[status][1] == 4 and monitor.watched == [status]
    assert RunState.from_jsonable(json.loads(json.dumps(state.to_jsonable()))) == state


def test_v5_state_json_names_its_output_data_output_json_now() -> None:
    data = json.loads((FIXTURES / "state.v5.json").read_text())
    assert "output_data" in data
    assert RunState.from_jsonable(data).output_json == data["output_data"]
