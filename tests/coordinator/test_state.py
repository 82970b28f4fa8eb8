from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from convergent.coordinator import (
    SCHEMA_VERSION,
    Atom,
    AtomStatus,
    BaseCase,
    CommandCheck,
    Control,
    JudgmentCheck,
    ProgressKind,
    StateFileError,
    StateStore,
    WorkflowState,
    dump_state,
    parse_state,
    resolve_atom,
)
from convergent.exceptions import UserError
from convergent.stop import StopReason

from .conftest import make_state

FIXTURE_V1 = Path(__file__).parent / "fixtures" / "workflow-state.v1.yaml"


def test_frozen_v1_fixture_still_loads() -> None:
    state = parse_state(FIXTURE_V1.read_text(), str(FIXTURE_V1))
    assert state.schema_version == 1
    assert [atom.id for atom in state.atoms] == [
        "schema",
        "endpoints",
        "tokens-jwt",
        "tokens-opaque",
        "docs",
    ]
    assert state.atom("tokens-jwt").status is AtomStatus.FAILED
    assert state.atom("docs").needs_info
    assert [check.kind for check in state.base_case.checks] == [
        "command",
        "command",
        "artifact",
        "http",
        "judgment",
    ]
    tests = state.base_case.checks[0]
    assert isinstance(tests, CommandCheck) and tests.command == ["pytest", "-q"]
    judgment = state.base_case.checks[4]
    assert isinstance(judgment, JudgmentCheck)
    assert judgment.confirmation is not None and judgment.confirmation.by == "alice"
    assert state.control.pending_history == [5, 4, 4]
    assert state.control.last_progress is ProgressKind.STALL
    assert state.control.hook.consecutive_blocks == 1
    assert state.attempts[0].error == "ImportError: no module named jose"


def test_dump_and_parse_round_trip() -> None:
    state = parse_state(FIXTURE_V1.read_text())
    again = parse_state(dump_state(state))
    assert again == state


def test_stop_reason_is_stored_in_the_loop_vocabulary() -> None:
    state = make_state(1)
    state.control.stop_reason = StopReason.STALLED
    state.control.stop_detail = "max_stall_count exceeded"
    text = dump_state(state)
    assert "stop_reason: stalled" in text
    assert "stop_detail: max_stall_count exceeded" in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("atoms: [\n  - id: a\n", "not valid YAML at line"),
        ("", "expected a mapping at the top level"),
        ("- just\n- a list\n", "expected a mapping"),
        ("atoms:\n  - id: a\n  - id: a\n", "duplicate atom id(s): a"),
        ("atoms:\n  - id: a\n    depends_on: [b]\n", "atom a depends on unknown atom(s): b"),
        (
            "atoms:\n  - {id: a, depends_on: [b]}\n  - {id: b, depends_on: [c]}\n"
            "  - {id: c, depends_on: [a]}\n",
            "dependency cycle: a -> b -> c -> a",
        ),
        ("atoms:\n  - id: a\n    status: done\n", "atoms.0.status"),
        ("control:\n  max_stall_count: 0\n", "control.max_stall_count"),
        ("colour: blue\n", "colour: unknown field"),
        ("schema_version: 99\n", "schema_version 99 is newer"),
        (
            "base_case:\n  checks:\n    - {name: t, kind: command, command: x}\n"
            "    - {name: t, kind: artifact, path: y}\n",
            "duplicate check name(s): t",
        ),
        ("base_case:\n  checks:\n    - {name: t, kind: telepathy}\n", "base_case.checks.0"),
        ("base_case:\n  checks:\n    - {name: h, kind: http, url: 'ftp://x'}\n", "url"),
    ],
)
def test_bad_files_give_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(StateFileError) as info:
        parse_state(text, "wf.yaml")
    assert message in str(info.value)
    assert str(info.value).startswith("wf.yaml: ")
    assert "\n" not in str(info.value)


def test_missing_file_error_names_the_path_and_the_fix(store: StateStore) -> None:
    with pytest.raises(StateFileError, match="state file not found: .*workflow-state.yaml"):
        store.load()
    with pytest.raises(StateFileError, match="state file not found"), store.update():
        pass
    assert list(store.path.parent.iterdir()) == []  # not even a lock file
    assert isinstance(StateFileError("x"), UserError)


def test_create_makes_missing_directories_and_keeps_file_mode(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "a" / "b" / "wf.yaml")
    store.create(make_state(1))
    store.path.chmod(0o640)
    with store.update() as state:
        state.goal = "changed"
    assert store.load().goal == "changed"
    assert store.path.stat().st_mode & 0o777 == 0o640


def test_corrupt_file_is_never_overwritten(store: StateStore, state_path: Path) -> None:
    state_path.write_text("atoms: [oops\n")
    with pytest.raises(StateFileError), store.update() as state:
        state.goal = "would overwrite"
    assert state_path.read_text() == "atoms: [oops\n"


def test_create_refuses_to_overwrite_without_force(store: StateStore) -> None:
    store.create(make_state(1))
    with pytest.raises(StateFileError, match="already exists"):
        store.create(make_state(5))
    assert len(store.load().atoms) == 1
    store.create(make_state(5), overwrite=True)
    assert len(store.load().atoms) == 5


def test_update_writes_atomically_and_leaves_no_temp_files(
    store: StateStore, state_path: Path
) -> None:
    store.create(make_state(2))
    with store.update() as state:
        resolve_atom(state, "p0")
    assert store.load().atom("p0").status is AtomStatus.RESOLVED
    assert store.load().updated_at is not None
    leftovers = [p.name for p in state_path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_update_body_error_writes_nothing(store: StateStore, state_path: Path) -> None:
    store.create(make_state(2))
    before = state_path.read_text()
    with pytest.raises(UserError, match="no atom with id 'zzz'"), store.update() as state:
        state.goal = "changed"
        resolve_atom(state, "zzz")
    assert state_path.read_text() == before


def test_assignment_is_validated() -> None:
    state = make_state(1)
    with pytest.raises(ValueError, match="max_iterations"):
        state.control.max_iterations = 0


def test_an_assignment_that_breaks_a_rule_across_fields_is_undone() -> None:
    state = make_state(2)
    before = list(state.atoms)
    with pytest.raises(ValueError, match=r"^duplicate atom id\(s\): p0$"):
        state.atoms = [*before, Atom(id="p0")]
    assert state.atoms == before


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Atom(id="has space"), "^id: Expected `str` matching regex"),
        (lambda: Control(stall_count=-1), "^stall_count: Expected `int` >= 0$"),
        (lambda: CommandCheck(name="t", command=[]), "^command must not be empty$"),
        (lambda: BaseCase(checks=["pytest"]), r"^checks\.0: Expected `object`, got `str`$"),
    ],
)
def test_records_are_checked_when_built(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_values_are_converted_when_built_as_when_read() -> None:
    atom = Atom(id="a", status="resolved")  # type: ignore[arg-type]
    assert atom.status is AtomStatus.RESOLVED
    assert atom == parse_state("atoms:\n  - {id: a, status: resolved}\n").atoms[0]


def test_the_file_leaves_out_unset_fields_and_json_keeps_them() -> None:
    state = make_state(1)
    assert "stop_reason" not in dump_state(state)
    assert state.control.to_data()["stop_reason"] is None
    assert state.control.to_data(drop_none=True).keys() == state.control.to_data().keys() - {
        "stop_reason",
        "stop_detail",
        "stop_note",
        "redirect_note",
        "last_progress",
    }


def test_new_state_has_current_schema_version() -> None:
    assert WorkflowState().schema_version == SCHEMA_VERSION


# --- hostile files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "goal: " + "[" * 150 + "]" * 150 + "\n",
        "".join("  " * depth + "- \n" for depth in range(150)),
        "goal: x\natoms:\n" + "".join("  " * depth + "  a:\n" for depth in range(150)),
    ],
    ids=["flow", "block sequences", "block mappings"],
)
def test_yaml_nested_too_deeply_is_refused_before_parsing(text: str) -> None:
    with pytest.raises(StateFileError) as info:
        parse_state(text, "wf.yaml")
    assert str(info.value).startswith("wf.yaml: nested too deeply (over 100 levels at line ")


def test_a_key_given_twice_is_refused_naming_it() -> None:
    text = "goal: first\natoms: []\ngoal: second\n"
    with pytest.raises(StateFileError) as info:
        parse_state(text, "wf.yaml")
    assert str(info.value) == "wf.yaml: duplicate key 'goal' at line 3"
    nested = "control:\n  iteration: 1\n  iteration: 2\n"
    with pytest.raises(StateFileError, match="^wf.yaml: duplicate key 'iteration' at line 3$"):
        parse_state(nested, "wf.yaml")


def test_merge_keys_may_still_be_overridden() -> None:
    state = parse_state(
        "control:\n  <<: {iteration: 1, max_iterations: 9}\n  iteration: 4\n", "wf.yaml"
    )
    assert (state.control.iteration, state.control.max_iterations) == (4, 9)


def test_long_lists_in_errors_are_cut_to_one_short_line() -> None:
    atoms = "".join(f"  - id: same{n % 20}\n" for n in range(40))
    with pytest.raises(StateFileError) as info:
        parse_state(f"atoms:\n{atoms}", "wf.yaml")
    assert str(info.value) == (
        "wf.yaml: duplicate atom id(s): same0, same1, same10, same11, same12 (and 15 more)"
    )
    unknown = ", ".join("x" * 200 + str(n) for n in range(10))
    with pytest.raises(StateFileError) as info:
        parse_state(f"atoms:\n  - {{id: a, depends_on: [{unknown}]}}\n", "wf.yaml")
    assert len(str(info.value)) < 500 and str(info.value).endswith("(and 5 more)")


def test_thousands_of_chained_atoms_load(store: StateStore, state_path: Path) -> None:
    atoms = "".join(f"  - {{id: a{n}, depends_on: [a{n + 1}]}}\n" for n in range(4999))
    state_path.write_text(f"atoms:\n{atoms}  - {{id: a4999}}\n")
    assert len(store.load().atoms) == 5000
    cycle = atoms + "  - {id: a4999, depends_on: [a0]}\n"
    state_path.write_text(f"atoms:\n{cycle}")
    with pytest.raises(StateFileError, match=r"dependency cycle: a0 -> a1 .*\(and 4996 more\)$"):
        store.load()


def test_a_symbolic_link_is_refused_not_followed(tmp_path: Path, state_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-password:\n")
    state_path.symlink_to(secret)
    with pytest.raises(StateFileError) as info:
        StateStore(state_path).load()
    assert str(info.value) == (
        f"state file {state_path} is a symbolic link; convergent reads only a regular file"
    )
    with pytest.raises(StateFileError, match="symbolic link"), StateStore(state_path).update():
        pass
    assert state_path.is_symlink() and secret.read_text() == "hunter2-password:\n"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    from convergent.coordinator.store import read_state_file

    fifo = tmp_path / "wf.yaml"
    os.mkfifo(fifo)
    with pytest.raises(StateFileError, match=r"wf.yaml is not a regular file$"):
        read_state_file(fifo)
