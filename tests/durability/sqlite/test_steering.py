"""Steering from another process, from the database and from the terminal."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from convergent import Agent, Limits, ModelResponse, ScriptedModel, calculator
from convergent.cli._terminal import TerminalSteering, parse_line
from convergent.durability.sqlite import DatabaseSteering, RunStore
from convergent.events import Redirected
from convergent.steering import SteeringCommand, SteeringKind, SteeringQueue
from convergent.stop import StopReason
from convergent.testing import answer, call, step

CHILD = Path(__file__).with_name("_steered_child.py")
EXE = shutil.which("convergent") or str(Path(sys.executable).with_name("convergent"))


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def steer(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, "steer", "steered", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_a_second_process_redirects_and_stops_a_running_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(tmp_path)], stderr=subprocess.PIPE
    )
    try:
        wait_for(lambda: (tmp_path / "cycle").exists(), "the run to start")
        sent = steer(db, "now count backwards")
        assert sent.returncode == 0, sent.stderr
        assert sent.stdout.strip() == "sent message to steered"
        wait_for(lambda: (tmp_path / "redirect").exists(), "the redirect to arrive")
        assert (tmp_path / "redirect").read_text() == "now count backwards"
        stopped = steer(db, "--stop")
        assert stopped.returncode == 0, stopped.stderr
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err.decode()
    reason, detail = (tmp_path / "stopped").read_text().split("\n")
    assert reason == "stopped"
    assert detail == "stop requested from another process"
    with RunStore(db) as store:
        run = store.get_run("steered")
        state = store.load("steered")
    assert run.stop_reason is StopReason.STOPPED and run.cycles < 5_000
    assert "now count backwards" in [m.content for m in state.messages if m.role == "user"]
    after = steer(db, "--stop")
    assert after.returncode == 2
    assert after.stderr.strip() == "error: run 'steered' is not running (stopped)"


async def test_pause_and_resume_from_the_database(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    queue = DatabaseSteering(store, "p")
    cycles: list[int] = []

    def script(messages: object, tools: object) -> ModelResponse:
        cycles.append(len(cycles) + 1)
        if len(cycles) == 1:
            store.send_steering("p", "pause")
            return step(call("calculator", expression="1"))
        return answer("done")

    agent = Agent(
        ScriptedModel(script),
        [calculator],
        store=store,
    )
    run = asyncio.ensure_future(agent.run("t", run_id="p", steering=queue))
    while not queue._paused:  # noqa: ASYNC110  (the pause arrives through the database)
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert cycles == [1] and not run.done()
    store.send_steering("p", "resume")
    result = await asyncio.wait_for(run, 30)
    assert result.stop_reason is StopReason.COMPLETED and cycles == [1, 2]


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("  focus on tests ", SteeringCommand("message", "focus on tests")),
        ("/stop", SteeringCommand("stop", "")),
        ("/stop enough", SteeringCommand("stop", "enough")),
        ("/pause", SteeringCommand("pause", "")),
        ("/resume", SteeringCommand("resume", "")),
        ("//etc is a folder", SteeringCommand("message", "/etc is a folder")),
        ("   ", None),
    ],
)
def test_parse_line(line: str, command: SteeringCommand | None) -> None:
    assert parse_line(line) == command


def test_parse_line_rejects_unknown_commands() -> None:
    with pytest.raises(ValueError, match="unknown command /stpo"):
        parse_line("/stpo")


async def test_terminal_lines_redirect_then_stop_a_run() -> None:
    read_fd, write_fd = os.pipe()
    queue = SteeringQueue()
    notices: list[str] = []
    reader = TerminalSteering(queue, read_fd, notify=notices.append).start()
    typed = [b"use smaller numbers\n/bogus\n", b"/stop from keyboard\n"]
    sent = 0

    async def script(messages: object, tools: object) -> ModelResponse:
        nonlocal sent
        if sent < len(typed):
            os.write(write_fd, typed[sent])
            sent += 1
            while reader.commands < sent:  # noqa: ASYNC110  (counted by the reader thread)
                await asyncio.sleep(0.01)
        return step(call("calculator", expression=str(sent)))

    try:
        agent = Agent(ScriptedModel(script), [calculator], limits=Limits(max_cycles=10))
        result = await agent.run("count", steering=queue)
    finally:
        reader.close()
        os.close(write_fd)
        os.close(read_fd)
    assert result.stop_reason is StopReason.STOPPED
    assert result.stop_detail == "from keyboard"
    assert result.cycles == 2
    redirects = [e.message for e in result.events if isinstance(e, Redirected)]
    assert redirects == ["use smaller numbers"]
    assert "unknown command /bogus; use /stop, /pause or /resume" in notices


async def test_a_process_that_takes_a_paused_run_starts_it_unpaused(tmp_path: Path) -> None:
    from convergent import resume

    store = RunStore(tmp_path / "runs.db")
    stopped = await Agent(
        ScriptedModel([step(call("calculator", expression="1"))]),
        [calculator],
        store=store,
        limits=Limits(max_cycles=1),
    ).run("t", run_id="r")
    assert stopped.stop_reason is StopReason.MAX_CYCLES
    # its last process took a pause before it ended (no resume came)
    store.send_steering("r", "pause")
    store.consume_steering(row for row, _, _ in store.stored_steering("r", 0))
    seen: list[str] = []

    def script(messages: object, tools: object) -> ModelResponse:
        seen.append(store.get_run("r").status)
        return answer("done")

    agent = Agent(ScriptedModel(script), [calculator], store=store)
    result = await resume("r", store=store, agent=agent)
    assert result.stop_reason is StopReason.COMPLETED
    assert seen == ["running"]


@contextmanager
def _held_by_a_write(store: RunStore) -> Iterator[list[bool]]:
    """``store`` held by a write (a transaction another thread keeps open) while the block
    runs. Yields, once the thread let go, whether it gave up waiting for the block (30 s):
    something in the block waited for the write."""
    inside, release = threading.Event(), threading.Event()
    timed_out: list[bool] = []

    def hold() -> None:
        with store.transaction():
            inside.set()
            timed_out.append(not release.wait(timeout=30))

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(timeout=30)
    try:
        yield timed_out
    finally:
        release.set()
        holder.join(timeout=30)


def test_a_poll_while_a_write_holds_the_store_does_not_wait_and_takes_it_later(
    tmp_path: Path,
) -> None:
    """A write of the store (here a transaction held open by another thread; in a run, the
    writer thread waiting for another process's lock) never makes a poll wait: the event
    loop, where the poll runs, goes on, and the command is taken at the next poll. The
    poll used to wait for the write, stalling every run on the loop."""
    store = RunStore(tmp_path / "runs.db")
    Agent(ScriptedModel([answer("done")])).run_sync("t", run_id="r", store=store)
    RunStore(tmp_path / "runs.db").send_steering("r", "message", "also check the totals")
    steering = DatabaseSteering(store, "r")
    with _held_by_a_write(store) as timed_out:
        taken_while_held = steering.take().messages
    assert timed_out == [False]  # the poll came back while the write still held the store
    assert taken_while_held == ()
    assert [command.text for command in steering.take().messages] == ["also check the totals"]
    store.close()


def test_marking_commands_consumed_while_a_write_holds_the_store_does_not_wait(
    tmp_path: Path,
) -> None:
    """A pause or resume is marked consumed as it is taken; with the store held by a write,
    the mark goes to the store's writer thread, after that write, instead of making the
    event loop wait for it."""
    store = RunStore(tmp_path / "runs.db")
    Agent(ScriptedModel([answer("done")])).run_sync("t", run_id="r", store=store)
    RunStore(tmp_path / "runs.db").send_steering("r", "pause")
    steering = DatabaseSteering(store, "r")
    (pause,) = store.stored_steering("r", 0)
    with _held_by_a_write(store) as timed_out:
        steering.acknowledge([SteeringCommand(SteeringKind.PAUSE, "", pause[0])])
    assert timed_out == [False]  # it came back while the write still held the store
    store.close()  # after the writes queued on the writer thread
    assert RunStore(tmp_path / "runs.db").stored_steering("r", 0) == []
