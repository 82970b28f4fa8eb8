"""``--temporal`` on the command line, against the dev server and a worker process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from convergent.bench.convergence import SCENARIOS
from convergent.testing import call, write_script

from .conftest import WorkerProcess

if TYPE_CHECKING:
    from convergent.temporal import DevServer

EXE = str(Path(sys.executable).with_name("convergent"))

pytestmark = pytest.mark.temporal


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


@pytest.fixture
def queue(temporal_server: DevServer, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A worker process on a fresh task queue: (address, queue).

    It shares the payload store of the commands the test runs in ``tmp_path``.
    """
    name = f"cli-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(temporal_server.address, name, tmp_path / ".convergent" / "runs.db")
    try:
        yield temporal_server.address, name
    finally:
        worker.stop()


def test_an_unreachable_server_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from convergent.temporal import free_port

    address = f"127.0.0.1:{free_port()}"
    for args in (["run", "x", "--temporal", address], ["worker", "--temporal", address]):
        proc = cli(*args, cwd=tmp_path)
        assert proc.returncode == 2
        assert proc.stderr.strip() == (
            f"error: cannot reach the Temporal server at {address}: connection refused"
        )


def test_run_runs_steer_and_resume_on_temporal(tmp_path: Path, queue: tuple[str, str]) -> None:
    address, name = queue
    target = ["--temporal", address, "--task-queue", name]
    model = write_script(tmp_path / "script.json", call("calculator", expression="17*23"), "391")
    proc = cli("run", "17*23?", "--model", model, "--run-id", "c1", "--json", *target, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["stop_reason"], data["output"], data["cycles"]) == ("completed", "391", 2)

    listed = json.loads(cli("runs", "--json", *target, cwd=tmp_path).stdout)
    assert {"run_id": "c1", "status": "completed", "cycles": 2} in [
        {k: run[k] for k in ("run_id", "status", "cycles")} for run in listed
    ]

    stopped = cli("steer", "c1", "--stop", *target, cwd=tmp_path)
    assert stopped.returncode == 2 and stopped.stderr.startswith("error: run 'c1' is not running")

    asking = write_script(
        tmp_path / "ask.json", call("ask_user", question="Which colour?"), "blue it is"
    )
    waits = cli(
        "run",
        "paint",
        "--model",
        asking,
        "--run-id",
        "c2",
        "--ask-timeout",
        "1",
        "--json",
        *target,
        cwd=tmp_path,
    )
    assert waits.returncode == 1 and json.loads(waits.stdout)["stop_reason"] == "needs_user"
    resumed = cli("resume", "c2", "--answer", "blue", "--json", *target, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output"] == "blue it is"


@pytest.mark.slow
def test_a_tool_given_with_tool_runs_on_the_worker(
    tmp_path: Path, temporal_server: DevServer
) -> None:
    (tmp_path / "mytools.py").write_text(
        "def shout(text: str) -> str:\n"
        '    """Upper-case the text."""\n'
        '    return text.upper() + "!"\n'
    )
    name = f"tool-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        temporal_server.address, name, tmp_path / ".convergent" / "runs.db", cwd=tmp_path
    )
    try:
        model = write_script(tmp_path / "script.json", call("shout", text="hey"), "HEY!")
        proc = cli("run", "shout", "--model", model, "--tool", "mytools:shout", "--json",
                   "--temporal", temporal_server.address, "--task-queue", name,
                   cwd=tmp_path)  # fmt: skip
    finally:
        worker.stop()
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [(c["name"], c["result"]) for c in data["tool_calls"]] == [("shout", "HEY!")]


def test_a_detached_run_is_listed_with_its_task_and_live_cycles(
    tmp_path: Path, queue: tuple[str, str]
) -> None:
    address, name = queue
    target = ["--temporal", address, "--task-queue", name]
    model = write_script(
        tmp_path / "script.json", call("ask_user", question="Which colour?"), "blue"
    )
    started = cli("run", "paint  the\nfence", "--model", model, "--run-id", "d1",
                  "--ask-timeout", "120", "--detach", *target, cwd=tmp_path)  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert started.stdout == "d1\n"
    deadline = time.monotonic() + 60
    while True:  # until the run waits on its question, one cycle in
        listed = json.loads(cli("runs", "--json", *target, cwd=tmp_path).stdout)
        (live,) = [run for run in listed if run["run_id"] == "d1"] or [None]
        if live is not None and live["cycles"] == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert live is not None
    assert (live["status"], live["cycles"], live["task"]) == ("running", 1, "paint  the\nfence")
    table = cli("runs", *target, cwd=tmp_path).stdout
    (row,) = [line for line in table.splitlines() if line.startswith("d1")]
    assert row.split()[1:3] == ["running", "1"] and row.endswith("paint the fence")
    # the detached command returned while the run waits on its question: answering goes on
    answered = cli("resume", "d1", "--answer", "blue", "--json", *target, cwd=tmp_path)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["output"] == "blue"
    listed = json.loads(cli("runs", "--json", *target, cwd=tmp_path).stdout)
    (done,) = [run for run in listed if run["run_id"] == "d1"]
    assert (done["status"], done["cycles"], done["task"]) == ("completed", 2, "paint  the\nfence")
    as_json = cli("run", "x", "--model", write_script(tmp_path / "b.json", "done"),
                  "--run-id", "d2", "--detach", "--json", *target, cwd=tmp_path)  # fmt: skip
    assert json.loads(as_json.stdout) == {"run_id": "d2", "status": "running"}
    local = cli("run", "x", "--detach", cwd=tmp_path)
    assert local.returncode == 2
    assert local.stderr == "error: --detach needs --temporal: a local run ends with its command\n"


def test_the_live_view_follows_a_temporal_run(tmp_path: Path, queue: tuple[str, str]) -> None:
    address, name = queue
    model = write_script(tmp_path / "script.json", call("calculator", expression="2+2"), "4")
    proc = cli(
        "run",
        "2+2?",
        "--model",
        model,
        "--temporal",
        address,
        "--task-queue",
        name,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "cycle 1 model: 1 tool call(s)" in proc.stdout
    assert "ok calculator" in proc.stdout and "stopped: completed" in proc.stdout


def test_bench_fans_the_convergence_suite_out_over_the_workers(
    tmp_path: Path, queue: tuple[str, str]
) -> None:
    address, name = queue
    args = ["bench", "--tasks-per-scenario", "2", "--json"]
    remote = cli(*args, "--temporal", address, "--task-queue", name, cwd=tmp_path)
    local = cli(*args[:1], "convergence", *args[1:], cwd=tmp_path)
    assert remote.returncode == 0, remote.stderr
    policies = json.loads(remote.stdout)["suites"]["convergence"]["policies"]
    assert policies == json.loads(local.stdout)["suites"]["convergence"]["policies"]
    assert policies["objective"]["tasks"] == 2 * len(SCENARIOS)
    refused = cli("bench", "bfcl", "--temporal", address, cwd=tmp_path)
    assert refused.returncode == 2 and "convergence suite only" in refused.stderr


def test_the_live_view_shows_a_question_and_how_to_answer_it(
    tmp_path: Path, queue: tuple[str, str]
) -> None:
    address, name = queue
    model = write_script(
        tmp_path / "script.json", call("ask_user", question="Which colour?"), "done"
    )
    proc = cli(
        "run",
        "paint",
        "--model",
        model,
        "--ask-timeout",
        "3",
        "--run-id",
        "q1",
        "--temporal",
        address,
        "--task-queue",
        name,
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert "the run asks Which colour?" in proc.stderr
    hint = f"convergent resume q1 --temporal {address} --task-queue {name} --answer TEXT"
    assert hint in " ".join(proc.stderr.split())  # however the terminal wraps it
    assert "stopped: needs_user" in proc.stdout


@pytest.mark.slow
def test_a_malformed_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    commands = (
        ["run", "x"],
        ["runs"],
        ["steer", "r1", "--stop"],
        ["resume", "r1"],
        ["bench", "convergence"],
        ["worker"],
    )
    cases = [(command, "bad host:x") for command in commands] + [
        (["run", "x"], address) for address in ("127.0.0.1:99999", "", ":abc")
    ]
    for command, address in cases:
        proc = cli(*command, "--temporal", address, cwd=tmp_path)
        assert proc.returncode == 2, (command, address, proc.stderr)
        reason = (
            "port 99999 is not between 1 and 65535"
            if address.endswith("99999")
            else "expected HOST:PORT, e.g. 127.0.0.1:7233"
        )
        assert proc.stderr == f"error: invalid Temporal address {address!r}: {reason}\n"


@pytest.mark.slow
def test_run_with_no_worker_on_the_queue_is_one_line_and_exit_2(
    tmp_path: Path, temporal_server: DevServer
) -> None:
    address, name = temporal_server.address, f"idle-{uuid.uuid4().hex[:8]}"
    model = write_script(tmp_path / "script.json", "hi")
    target = ["--temporal", address, "--task-queue", name]
    expected = (
        f"error: no worker polls task queue {name!r} at {address}; start one: "
        f"convergent worker --temporal {address} --task-queue {name} --db .convergent/runs.db\n"
    )
    for command in (
        ["run", "x", "--model", model, "--run-id", "idle-1"],
        ["run", "x", "--model", model, "--run-id", "idle-2", "--json"],
        ["resume", "idle-1"],
        ["bench", "convergence", "--tasks-per-scenario", "1", "--json"],
    ):
        proc = cli(*command, *target, cwd=tmp_path)
        assert (proc.returncode, proc.stderr) == (2, expected), command
        if "--json" in command:
            assert json.loads(proc.stdout)["error"] == expected[len("error: ") : -1]
        else:
            assert proc.stdout == ""
    listed = json.loads(cli("runs", "--json", "--limit", "1000", *target, cwd=tmp_path).stdout)
    assert not {"idle-1", "idle-2"} & {run["run_id"] for run in listed}  # nothing was queued


def test_a_spec_the_workers_cannot_build_is_one_line_and_exit_2(
    tmp_path: Path, queue: tuple[str, str]
) -> None:
    address, name = queue
    bad = ["run", "x", "--model", "scripted:/nonexistent.json"]
    local = cli(*bad, cwd=tmp_path)
    assert (local.returncode, local.stderr) == (
        2,
        "error: script file not found: /nonexistent.json\n",
    )
    for extra in (["--json"], []):
        remote = cli(*bad, "--temporal", address, "--task-queue", name, *extra, cwd=tmp_path)
        assert (remote.returncode, remote.stderr) == (2, local.stderr)
        assert "Traceback" not in remote.stderr + remote.stdout


def test_a_client_on_another_payload_store_is_told_so(
    tmp_path: Path, queue: tuple[str, str]
) -> None:
    address, name = queue
    model = write_script(tmp_path / "script.json", "hi")
    proc = cli(
        "run", "x", "--model", model, "--db", "elsewhere.db", "--json",
        "--temporal", address, "--task-queue", name, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        f"error: the payload store {tmp_path / '.convergent' / 'runs.db'} does not hold payload "
    )
    assert proc.stderr.count("\n") == 1


def wait_for_text(path: Path, text: str) -> None:
    """Wait until ``text`` shows in the file (a safety net of two minutes)."""
    deadline = time.monotonic() + 120
    while text not in path.read_text():
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.2)


class Asking:
    """A worker on a fresh task queue, and ``run --temporal`` following a run that asks.

    The follower's output goes to ``out.txt`` and ``err.txt``; the run asks "Which
    colour?" and, answered, completes with "painted".
    """

    def __init__(self, tmp_path: Path, address: str) -> None:
        self.folder = tmp_path
        self.address = address
        self.run_id = f"asks-{uuid.uuid4().hex[:8]}"
        self.db = tmp_path / ".convergent" / "runs.db"
        self.target = ["--temporal", address, "--task-queue", self.run_id]
        self.first = self.worker()
        model = write_script(
            tmp_path / "script.json", call("ask_user", question="Which colour?"), "painted"
        )
        self.err = tmp_path / "err.txt"
        with (tmp_path / "out.txt").open("w") as stdout, self.err.open("w") as stderr:
            self.follower = subprocess.Popen(
                [EXE, "run", "paint", "--model", model, "--ask-timeout", "600"]
                + ["--run-id", self.run_id, *self.target],
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
            )

    def worker(self) -> WorkerProcess:
        """Another worker process on the task queue."""
        return WorkerProcess(self.address, self.run_id, self.db)

    def answer(self) -> None:
        """Answer the question with ``convergent resume``, which follows the run to its end."""
        answered = cli("resume", self.run_id, "--answer", "blue", *self.target, cwd=self.folder)
        assert answered.returncode == 0, answered.stderr

    def end_on_a_second_worker(self, *, answer: bool) -> None:
        """Start a second worker (answer the question then), and wait for the follower to end."""
        second = self.worker()
        try:
            if answer:
                self.answer()
            assert self.follower.wait(timeout=120) == 0
        finally:
            second.stop()

    def shown(self) -> str:
        """What the follower showed, once it is ended (killed if it still runs)."""
        self.first.kill()
        if self.follower.poll() is None:
            self.follower.kill()
            self.follower.wait()
        return (self.folder / "out.txt").read_text() + self.err.read_text()


@pytest.fixture
def asking(tmp_path: Path, temporal_server: DevServer) -> Asking:
    return Asking(tmp_path, temporal_server.address)


@pytest.mark.slow
def test_a_run_whose_worker_died_is_followed_without_a_flood(asking: Asking) -> None:
    try:
        wait_for_text(asking.err, "the run asks Which colour?")
        asking.first.kill()
        # the follower's queries now reach no worker: it says so once, then waits
        wait_for_text(asking.err, "do not answer; waiting for the run")
        asking.end_on_a_second_worker(answer=True)
    finally:
        shown = asking.shown()
    assert "stopped: completed" in shown
    assert "WARN" not in shown and "consistent query" not in shown
    assert shown.count("do not answer") == 1


@pytest.mark.slow
def test_the_end_of_a_run_is_shown_when_no_worker_answers_the_first_look_after_it(
    asking: Asking,
) -> None:
    try:
        wait_for_text(asking.err, "the run asks Which colour?")
        # frozen, the follower next looks at the run once it has ended and its worker is gone
        asking.follower.send_signal(signal.SIGSTOP)
        asking.answer()
        asking.first.kill()
        asking.follower.send_signal(signal.SIGCONT)
        wait_for_text(asking.err, "the run has ended; waiting for a worker")
        asking.end_on_a_second_worker(answer=False)
    finally:
        shown = asking.shown()
    assert "stopped: completed" in shown
    assert "painted" in shown
    assert shown.count("waiting for a worker") == 1
