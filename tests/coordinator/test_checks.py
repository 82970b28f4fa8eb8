from __future__ import annotations

import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from convergent.coordinator import (
    ArtifactCheck,
    CommandCheck,
    HttpCheck,
    JudgmentCheck,
    base_case_satisfied,
    confirm_judgment,
    run_check,
    run_checks,
)

from .conftest import make_state

PY = sys.executable


def test_command_exit_zero_passes_with_evidence(tmp_path: Path) -> None:
    check = CommandCheck(name="t", command=[PY, "-c", "print('all 3 tests passed')"])
    result = run_check(check, tmp_path)
    assert result.passed
    assert result.exit_code == 0
    assert result.output_tail is not None and "all 3 tests passed" in result.output_tail
    assert result.summary == "exit code 0"


def test_command_nonzero_exit_fails_and_keeps_output_tail(tmp_path: Path) -> None:
    script = (
        "import sys; print('x' * 5000); print('FAILED test_login', file=sys.stderr); sys.exit(3)"
    )
    result = run_check(CommandCheck(name="t", command=[PY, "-c", script]), tmp_path)
    assert not result.passed
    assert result.exit_code == 3
    assert result.summary == "exit code 3, expected 0"
    assert result.output_tail is not None
    assert result.output_tail.rstrip().endswith("FAILED test_login")
    assert len(result.output_tail) <= 2000


def test_command_expected_exit_code_can_be_nonzero(tmp_path: Path) -> None:
    check = CommandCheck(name="t", command=[PY, "-c", "raise SystemExit(1)"], expect_exit=1)
    assert run_check(check, tmp_path).passed


def test_command_string_runs_without_a_shell_by_default(tmp_path: Path) -> None:
    command = f"{shlex.quote(PY)} -c 'import sys; print(sys.argv[1])' '$HOME;ls'"
    result = run_check(CommandCheck(name="t", command=command), tmp_path)
    assert result.passed
    assert result.output_tail is not None and result.output_tail.strip() == "$HOME;ls"


def test_command_shell_true_uses_the_shell(tmp_path: Path) -> None:
    check = CommandCheck(name="t", command="echo one && echo two | tr a-z A-Z", shell=True)
    result = run_check(check, tmp_path)
    assert result.passed
    assert result.output_tail == "one\nTWO\n"


def test_command_runs_in_the_state_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "marker.txt").write_text("here")
    check = CommandCheck(name="t", command=[PY, "-c", "open('marker.txt').read()"], cwd="sub")
    assert run_check(check, tmp_path).passed


def test_command_timeout_kills_it_and_fails(tmp_path: Path) -> None:
    script = "import time; print('starting', flush=True); time.sleep(60)"
    check = CommandCheck(name="slow", command=[PY, "-c", script], timeout=0.5)
    result = run_check(check, tmp_path)
    assert not result.passed
    assert result.exit_code is None
    assert result.summary == "timed out after 0.5s"
    assert result.output_tail is not None and "starting" in result.output_tail


def test_command_that_cannot_start_fails_cleanly(tmp_path: Path) -> None:
    check = CommandCheck(name="t", command=["/nonexistent/definitely-not-here"])
    result = run_check(check, tmp_path)
    assert not result.passed
    assert result.exit_code is None
    assert result.summary.startswith("could not start command")


def test_artifact_path_exists_and_missing(tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "bundle.js").write_text("//")
    found = run_check(ArtifactCheck(name="a", path="dist/bundle.js"), tmp_path)
    assert found.passed
    assert found.matches == [str(tmp_path / "dist" / "bundle.js")]
    missing = run_check(ArtifactCheck(name="a", path="dist/app.css"), tmp_path)
    assert not missing.passed
    assert missing.matches == []
    assert missing.summary == "0 path(s) match dist/app.css, need 1"


def test_artifact_glob_with_min_matches_and_recursion(tmp_path: Path) -> None:
    for name in ("a/x.txt", "a/b/y.txt", "a/b/c/z.txt"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    assert run_check(ArtifactCheck(name="g", path="a/**/*.txt", min_matches=3), tmp_path).passed
    shallow = run_check(ArtifactCheck(name="g", path="a/*.txt", min_matches=2), tmp_path)
    assert not shallow.passed
    assert shallow.matches == [str(tmp_path / "a" / "x.txt")]


def test_artifact_absolute_path(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("{}")
    assert run_check(ArtifactCheck(name="a", path=str(target)), Path("/")).passed


def test_http_health_check_against_real_server(http_base: str, tmp_path: Path) -> None:
    ok = run_check(HttpCheck(name="h", url=f"{http_base}/health"), tmp_path)
    assert ok.passed
    assert ok.status_code == 200
    down = run_check(HttpCheck(name="h", url=f"{http_base}/down"), tmp_path)
    assert not down.passed
    assert down.status_code == 503
    assert down.summary == "HTTP 503, expected 200"
    expected_503 = HttpCheck(name="h", url=f"{http_base}/down", expect_status=503)
    assert run_check(expected_503, tmp_path).passed


def test_http_body_must_contain_text(http_base: str, tmp_path: Path) -> None:
    good = HttpCheck(name="h", url=f"{http_base}/health", contains="ok")
    assert run_check(good, tmp_path).passed
    bad = run_check(HttpCheck(name="h", url=f"{http_base}/health", contains="ready"), tmp_path)
    assert not bad.passed
    assert bad.status_code == 200
    assert "lacks 'ready'" in bad.summary


def test_http_connection_refused_fails_with_evidence(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run_check(HttpCheck(name="h", url=f"http://127.0.0.1:{port}/", timeout=5), tmp_path)
    assert not result.passed
    assert result.status_code is None
    assert result.summary.startswith("request failed: ConnectError")


def test_judgment_needs_a_recorded_human_confirmation(tmp_path: Path) -> None:
    state = make_state(
        checks=[JudgmentCheck(name="auth", statement="the auth API operates normally")]
    )
    before = run_checks(state.base_case.checks, tmp_path)
    assert not before[0].passed
    assert "human confirmation" in before[0].summary
    assert not base_case_satisfied(before)
    confirm_judgment(state, "auth", by="alice", note="logged in on staging")
    after = run_checks(state.base_case.checks, tmp_path)
    assert after[0].passed
    assert after[0].confirmed_by == "alice"
    assert base_case_satisfied(after)


def test_base_case_needs_at_least_one_check_and_all_passing(tmp_path: Path) -> None:
    assert not base_case_satisfied([])
    ok = CommandCheck(name="ok", command=[PY, "-c", "pass"])
    bad = CommandCheck(name="bad", command=[PY, "-c", "raise SystemExit(1)"])
    assert base_case_satisfied(run_checks([ok], tmp_path))
    results = run_checks([ok, bad], tmp_path)
    assert [r.passed for r in results] == [True, False]
    assert not base_case_satisfied(results)


def run_in_child(code: str, tmp_path: Path) -> str:
    """Run a check in a child process with a deadline: a regression fails, never hangs."""
    program = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from convergent.coordinator import CommandCheck, HttpCheck, run_check\n"
        f"{code}\n"
        "print(json.dumps([result.passed, result.summary, result.exit_code]))\n"
    )
    proc = subprocess.run(
        [PY, "-c", program], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=True
    )
    return proc.stdout.strip()


def leftover(pattern: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return found.stdout.split()


def test_a_detached_child_holding_the_pipe_neither_hangs_the_check_nor_survives(
    tmp_path: Path,
) -> None:
    code = (
        "check = CommandCheck(name='bg', command='setsid sleep 41.3 & echo started', "
        "shell=True, timeout=30)\n"
        "result = run_check(check, Path('.'))"
    )
    assert run_in_child(code, tmp_path) == '[true, "exit code 0", 0]'
    assert leftover("sleep 41.3") == []


@pytest.mark.slow
def test_a_timed_out_command_and_its_detached_children_are_all_killed(tmp_path: Path) -> None:
    code = (
        "check = CommandCheck(name='hang', command='setsid sleep 42.7 & sleep 43.1', "
        "shell=True, timeout=1)\n"
        "result = run_check(check, Path('.'))"
    )
    assert run_in_child(code, tmp_path) == '[false, "timed out after 1s", null]'
    assert leftover("sleep 42.7") == [] and leftover("sleep 43.1") == []


@pytest.fixture
def dripping_server() -> Iterator[str]:
    """Sends headers, then one byte of body every 0.2 s for a minute."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
            self.send_response(200)
            self.send_header("Content-Length", "300")
            self.end_headers()
            for _ in range(300):
                try:
                    self.wfile.write(b".")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.2)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_slow_drip_http_server_is_cut_off_at_the_total_timeout(
    dripping_server: str, tmp_path: Path
) -> None:
    check = HttpCheck(name="drip", url=dripping_server, timeout=1.0)
    result = run_check(check, tmp_path)
    assert not result.passed
    assert result.summary == "timed out after 1s"
