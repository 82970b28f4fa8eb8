from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from convergent.cli import main
from convergent.coordinator import (
    AtomStatus,
    CommandCheck,
    HookEvent,
    JudgmentCheck,
    StateStore,
    WorkflowStatus,
    answer_hook,
)
from convergent.stop import StopReason


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    else:
        code = 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


@pytest.fixture
def wf(state_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    ok = shlex.join([sys.executable, "-c", "pass"])
    code, out, _ = cli(
        capsys,
        "coordinator",
        "init",
        "--state",
        str(state_path),
        "--goal",
        "ship it",
        "--check-command",
        ok,
        "--judgment",
        "the docs read well",
        "--max-stall-count",
        "2",
    )
    assert code == 0
    assert out == f"created {state_path} with 2 check(s)\n"
    return str(state_path)


def test_init_writes_a_loadable_file(wf: str) -> None:
    state = StateStore(wf).load()
    assert state.goal == "ship it"
    assert [type(c) for c in state.base_case.checks] == [CommandCheck, JudgmentCheck]
    assert state.control.max_stall_count == 2


def test_init_refuses_to_overwrite(wf: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "coordinator", "init", "--state", wf)
    assert code == 2
    assert err == f"error: state file already exists: {wf} (use --force to replace it)\n"
    assert StateStore(wf).load().goal == "ship it"
    code, _, _ = cli(capsys, "coordinator", "init", "--state", wf, "--force")
    assert code == 0
    assert StateStore(wf).load().goal == ""


def test_init_rejects_a_bad_check(state_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "coordinator", "init", "-s", str(state_path), "--http", "localhost")
    assert code == 2
    assert err.startswith("error: invalid check: url: Expected `str` matching regex")
    assert err.count("\n") == 1
    assert not state_path.exists()


def test_missing_and_corrupt_files_give_one_line_errors(
    state_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "coordinator", "status", "--state", str(state_path))
    assert code == 2
    assert err.startswith(f"error: state file not found: {state_path}")
    state_path.write_text("atoms:\n  - id: a\n    depends_on: [a]\n")
    code, _, err = cli(capsys, "coordinator", "status", "--state", str(state_path))
    assert code == 2
    assert err == f"error: {state_path}: dependency cycle: a -> a\n"


def test_record_commands_and_status_json(wf: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = ("--state", wf)
    assert cli(capsys, "coordinator", "record", "add", "api", "--title", "API", *s)[0] == 0
    cli(capsys, "coordinator", "record", "add", "ui", "--depends-on", "api", *s)
    cli(capsys, "coordinator", "record", "add", "jwt", "--or-group", "tokens", *s)
    cli(capsys, "coordinator", "record", "add", "opaque", "--or-group", "tokens", *s)
    cli(capsys, "coordinator", "record", "start", "api", *s)
    code, out, _ = cli(
        capsys, "coordinator", "record", "fail", "jwt", "--command", "pip i jose", *s
    )
    assert (code, out) == (0, "recorded failure\n")
    code, out, _ = cli(
        capsys, "coordinator", "record", "fail", "jwt", "--command", "pip i jose", *s
    )
    assert "inertia: `pip i jose` failed 2 times" in out
    code, out, _ = cli(
        capsys, "coordinator", "record", "abandon", "jwt", "--switch-to", "opaque", *s
    )
    assert out == "abandoned atom jwt, switched to opaque\n"
    cli(capsys, "coordinator", "record", "resolve", "api", "--note", "tests green", *s)
    report = cli_json(capsys, "coordinator", "status", *s)
    assert report["goal"] == "ship it"
    assert report["status"] == "running"
    assert report["decision"] == {"action": "continue", "stop_reason": None, "pending": 2}
    assert report["metrics"]["pending_count"] == 2
    assert report["metrics"]["resolved_count"] == 1
    assert report["metrics"]["or_switches"] == 1
    assert [(a["id"], a["ready"]) for a in report["unresolved"]] == [
        ("ui", True),
        ("opaque", True),
    ]
    state = StateStore(wf).load()
    assert state.atom("api").note == "tests green"
    assert state.atom("opaque").status is AtomStatus.IN_PROGRESS


def test_unknown_atom_is_a_user_error(wf: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "coordinator", "record", "resolve", "ghost", "--state", wf)
    assert code == 2
    assert err == "error: no atom with id 'ghost'\n"


@pytest.mark.parametrize("atom_id", ["", "a b", "   ", "line\nbreak"])
def test_an_invalid_new_atom_id_is_one_line(
    wf: str, capsys: pytest.CaptureFixture[str], atom_id: str
) -> None:
    before = Path(wf).read_bytes()
    code, _, err = cli(capsys, "coordinator", "record", "add", atom_id, "--state", wf)
    assert code == 2
    assert err == f"error: atom id {atom_id!r} must be non-empty and without spaces\n"
    assert Path(wf).read_bytes() == before


def test_verify_exit_codes_and_confirmation(wf: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "coordinator", "verify", "--state", wf)
    assert code == 1
    assert "pass  command-1 (command): exit code 0" in out
    assert "FAIL  judgment-1 (judgment): needs a human confirmation" in out
    assert out.endswith("base case not satisfied\n")
    cli(capsys, "coordinator", "record", "confirm", "judgment-1", "--by", "alice", "--state", wf)
    code, out, _ = cli(capsys, "coordinator", "verify", "--state", wf, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["satisfied"] is True
    assert [r["passed"] for r in data["results"]] == [True, True]
    assert data["results"][1]["confirmed_by"] == "alice"
    state = StateStore(wf).load()
    assert state.control.status is WorkflowStatus.COMPLETED
    assert state.control.stop_reason is StopReason.COMPLETED


def test_stop_redirect_resume_and_iteration(wf: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = ("--state", wf)
    cli(capsys, "coordinator", "record", "add", "a", *s)
    data = cli_json(capsys, "coordinator", "record", "iteration", *s)
    assert data == {"action": "continue", "stop_reason": None, "pending": 1, "iteration": 1}
    cli(capsys, "coordinator", "record", "redirect", "--note", "new spec", *s)
    data = cli_json(capsys, "coordinator", "record", "iteration", *s)
    assert data["action"] == "interrupt" and data["detail"] == "new spec"
    cli(capsys, "coordinator", "record", "redirect", "--clear", *s)
    cli(capsys, "coordinator", "record", "stop", "--note", "done for today", *s)
    code, out, _ = cli(capsys, "coordinator", "record", "iteration", *s)
    assert out == "iteration 1: stop (stopped): stop requested: done for today\n"
    assert StateStore(wf).load().control.status is WorkflowStatus.STOPPED
    cli(capsys, "coordinator", "record", "resume", *s)
    data = cli_json(capsys, "coordinator", "record", "iteration", *s)
    assert (data["action"], data["iteration"]) == ("continue", 2)


def test_status_json_carries_what_the_hook_told_claude_code(
    wf: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "coordinator", "record", "add", "api", "--state", wf)
    assert cli_json(capsys, "coordinator", "status", "--state", wf)["hook"] == {
        "consecutive_blocks": 0,
        "max_consecutive_blocks": 5,
        "block_when_active": False,
        "last_answer": None,
    }
    cli(capsys, "coordinator", "record", "stop", "--note", "out of budget", "--state", wf)
    payload = {"cwd": str(Path(wf).parent), "hook_event_name": "Stop"}
    halt = answer_hook(HookEvent.STOP, json.dumps(payload), state=wf)
    report = cli_json(capsys, "coordinator", "status", "--state", wf)
    assert (report["stop_reason"], report["stop_detail"]) == (
        "stopped",
        "stop requested: out of budget",
    )
    last = report["hook"]["last_answer"]
    assert (last["event"], last["action"]) == ("Stop", "halt")
    assert last["message"] == halt.output["stopReason"]
    assert last["message"].startswith("convergent stopped the work (stopped): stop requested")
    _, view, _ = cli(capsys, "coordinator", "status", "--state", wf)
    assert "hook: halt at Stop (" in view
    assert "): convergent stopped the work (stopped): stop requested: out of budget." in view


def test_status_view_is_readable(wf: str, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "coordinator", "record", "add", "api", "--title", "the [bold]API", "--state", wf)
    code, out, _ = cli(capsys, "coordinator", "status", "--state", wf)
    assert code == 0
    assert f"{wf} - ship it" in out
    assert "status running" in out
    assert "next decision: continue (1 unresolved)" in out
    assert "iteration 0/20" in out
    assert "the [bold]API" in out
    assert "command-1" in out and "not run" in out


def status_in(folder: Path, exe: str) -> subprocess.CompletedProcess[str]:
    """``convergent coordinator status`` run by the console script in ``folder``."""
    return subprocess.run(
        [exe, "coordinator", "status"],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=60,
        check=False,
    )


def test_console_script_reports_user_errors_without_traceback(
    convergent_exe: str, tmp_path: Path
) -> None:
    proc = status_in(tmp_path, convergent_exe)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: state file not found: workflow-state.yaml")
    assert "Traceback" not in proc.stderr


def test_deeply_nested_state_file_is_a_one_line_error(convergent_exe: str, tmp_path: Path) -> None:
    (tmp_path / "workflow-state.yaml").write_text("atoms: " + "[" * 40_000 + "]" * 40_000)
    proc = status_in(tmp_path, convergent_exe)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: workflow-state.yaml: nested too deeply (over 100 levels at line 1)\n"
    )
