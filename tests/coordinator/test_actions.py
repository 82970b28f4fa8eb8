from __future__ import annotations

from datetime import UTC, datetime

import pytest

from convergent.coordinator import (
    Atom,
    AtomStatus,
    CheckKind,
    CheckResult,
    CommandCheck,
    JudgmentCheck,
    WorkflowState,
    WorkflowStatus,
    abandon_atom,
    add_atom,
    confirm_judgment,
    record_failure,
    record_verification,
    request_redirect,
    request_stop,
    resume,
)
from convergent.exceptions import UserError
from convergent.stop import StopReason

from .conftest import make_state


def _result(passed: bool) -> CheckResult:
    return CheckResult(
        name="t",
        kind=CheckKind.COMMAND,
        passed=passed,
        summary="exit code 0" if passed else "exit code 1, expected 0",
        checked_at=datetime.now(UTC),
    )


def test_add_atom_checks_ids_and_dependencies() -> None:
    state = make_state(1)
    add_atom(state, "new", title="new work", depends_on=["p0"])
    assert state.atom("new").depends_on == ["p0"]
    with pytest.raises(UserError, match="atom 'new' already exists"):
        add_atom(state, "new")
    with pytest.raises(UserError, match="no atom with id 'ghost'"):
        add_atom(state, "other", depends_on=["ghost"])
    assert [a.id for a in state.atoms] == ["p0", "new"]


def test_abandon_with_switch_counts_an_or_switch() -> None:
    state = WorkflowState(
        atoms=[Atom(id="a", or_group="g"), Atom(id="b", or_group="g"), Atom(id="c")]
    )
    abandon_atom(state, "a", switch_to="b", note="library unmaintained")
    assert state.atom("a").status is AtomStatus.ABANDONED
    assert state.atom("a").note == "library unmaintained"
    assert state.atom("b").status is AtomStatus.IN_PROGRESS
    assert state.control.or_switches == 1
    with pytest.raises(UserError, match="not alternatives"):
        abandon_atom(state, "b", switch_to="c")
    assert state.control.or_switches == 1


def test_record_failure_marks_atom_and_keeps_first_error_line() -> None:
    state = make_state(1)
    state.control.iteration = 4
    attempt = record_failure(state, atom_id="p0", command="pytest", error="E  boom\ntraceback")
    assert state.atom("p0").status is AtomStatus.FAILED
    assert (attempt.error, attempt.iteration) == ("E  boom", 4)
    with pytest.raises(UserError, match="needs an atom, a command, or both"):
        record_failure(state)


def test_confirm_only_judgment_checks() -> None:
    state = make_state(
        checks=[
            CommandCheck(name="tests", command="pytest"),
            JudgmentCheck(name="ux", statement="the page reads well"),
        ]
    )
    with pytest.raises(UserError, match="is a command check"):
        confirm_judgment(state, "tests", by="bob")
    with pytest.raises(UserError, match="no check named 'nope'"):
        confirm_judgment(state, "nope", by="bob")
    with pytest.raises(UserError, match="name of the person"):
        confirm_judgment(state, "ux", by="  ")
    confirmation = confirm_judgment(state, "ux", by="bob", note="read it twice")
    assert confirmation.by == "bob"


def test_record_verification_completes_and_reverts() -> None:
    state = make_state(1)
    assert record_verification(state, [_result(True)])
    assert state.control.to_data()["status"] == "completed"
    assert state.control.to_data()["stop_reason"] == "completed"
    assert state.base_case.verified_at is not None
    assert not record_verification(state, [_result(True), _result(False)])
    assert state.control.status is WorkflowStatus.RUNNING
    assert state.control.stop_reason is None
    assert not record_verification(state, [])


def test_resume_clears_flags_and_stall() -> None:
    state = make_state(1)
    request_stop(state, "lunch")
    request_redirect(state, "new plan")
    state.control.stall_count = 3
    state.control.status = WorkflowStatus.STOPPED
    state.control.stop_reason = StopReason.STOPPED
    state.control.hook.consecutive_blocks = 4
    resume(state)
    control = state.control
    assert (control.stop_requested, control.redirect_requested) == (False, False)
    assert (control.stop_note, control.redirect_note) == (None, None)
    assert control.stall_count == 0
    assert control.hook.consecutive_blocks == 0
    assert control.status is WorkflowStatus.RUNNING
    assert control.stop_reason is None
