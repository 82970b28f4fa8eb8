"""What the console's forms do: steer, stop, pause, answer, resume and rewind a run.

Each action goes through the run database exactly as the command line does
(``convergent steer``, ``resume``, ``rewind``), so a run cannot tell the console from
a terminal. Resuming starts ``python -m convergent resume`` as a detached process: the
run goes on even if the console is closed, and the server never waits for it. The
console claims the run before it starts that process, and the process takes the claim
over, so an answer posted twice (or by two people at once) resumes the run once: the
second is refused with ``run ID is running (pid N)``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from convergent.durability.sqlite import RunClaim, RunStore, RunSummary
from convergent.exceptions import UserError
from convergent.resuming import pending_answers, resumable_run, steerable_run
from convergent.ui.questions import answer_question, open_questions

__all__ = ["Launcher", "answer", "control", "resume", "rewind", "steer"]

CONTROLS = ("stop", "pause", "resume")
"""Steering commands that act on a live run."""
MAX_ARGUMENT_BYTES = 100_000
"""Longest answer or message a resume takes (it is passed on the command line, whose
every argument Linux caps at 128 KiB)."""


def steer(store: RunStore, run_id: str, message: str) -> str:
    """Queue new instructions for the run (delivered at its next cycle, or when resumed).

    Raises:
        UserError: For an empty message, an unknown run or one that completed.
    """
    if not message.strip():
        raise UserError("the message is empty")
    run = steerable_run(store, run_id)
    store.send_steering(run_id, "message", message)
    if run.running:
        return "message sent; the run receives it before its next cycle"
    return "message queued; it is delivered when the run resumes"


def control(store: RunStore, run_id: str, kind: str) -> str:
    """Stop, pause or resume a running run.

    Raises:
        UserError: For another command, or a run that is not running.
    """
    if kind not in CONTROLS:
        raise UserError(f"unknown command {kind!r}; use one of {', '.join(CONTROLS)}")
    run = store.get_run(run_id)
    if not run.running:
        raise UserError(f"run {run_id!r} is not running ({run.status})")
    store.send_steering(
        run_id, kind, "stop requested from the web console" if kind == "stop" else ""
    )
    return {
        "stop": "stop sent; the run stops at its next cycle boundary",
        "pause": "pause sent; the run holds before its next cycle",
        "resume": "resume sent; the run goes on",
    }[kind]


def rewind(store: RunStore, run_id: str, cycle: int) -> str:
    """Restore the run's files and conversation to the end of ``cycle``.

    Raises:
        UserError: If the run is running or has no checkpoint for the cycle.
    """
    result = store.rewind(run_id, cycle)
    return (
        f"rewound to cycle {cycle}: {len(result.restored)} file(s) restored, "
        f"{len(result.deleted)} deleted, {len(result.skipped)} not restored; resume it to go on"
    )


@dataclass
class Launcher:
    """Starts ``convergent resume`` processes and reaps them when they end.

    Args:
        db: The run database the processes resume from.
        logs: Folder for each process's output (default: ``ui-logs`` next to the database).
    """

    db: Path
    logs: Path | None = None
    children: list[subprocess.Popen[bytes]] = field(default_factory=list)
    """Processes started so far."""

    def resume(
        self,
        store: RunStore,
        claim: RunClaim,
        *,
        answer: str | None = None,
        message: str | None = None,
        cwd: str | None = None,
    ) -> tuple[str, str]:
        """Start ``python -m convergent resume RUN_ID`` detached, and see it start.

        The process takes ``claim`` over; once it ends, the claim is released (which
        gives the run back only if the process never took it over). It waits until the
        process has taken the run over, or has ended, at most `STARTUP_SECONDS`, so a
        resume that could not start is reported as such, not as resuming.

        Args:
            store: The run database (to see the run taken over).
            claim: The console's claim on the run.
            answer: The reply to its question (``--answer``), if it waits on one.
            message: New instructions for its next cycle (``--message``), if any.
            cwd: Folder to start in (for runs whose spec holds paths relative to it).

        Returns:
            Where the process writes its output, and what became of it: ``running``,
            ``starting`` (not yet running after `STARTUP_SECONDS`) or the run's status
            once it ended.

        Raises:
            UserError: If the process failed before the run went on (with the last line
                it wrote).
        """
        run_id = claim.run_id
        folder = self.logs or self.db.parent / "ui-logs"
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"resume-{run_id}-{time.strftime('%Y%m%d-%H%M%S')}.log"
        command = [
            sys.executable,
            "-m",
            "convergent",
            "resume",
            run_id,
            "--db",
            str(self.db),
            *([f"--answer={answer}"] if answer is not None else []),
            *([f"--message={message}"] if message is not None else []),
            "--no-steer",
            f"--claim={claim.token}",
        ]
        with log.open("ab") as out:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd if cwd is not None and Path(cwd).is_dir() else None,
                start_new_session=True,
            )
        self.children.append(child)
        state = _started(store, claim, child)
        if child.returncode is None:

            def reap() -> None:
                child.wait()
                claim.release()

            # reaped in a thread, so an ended run leaves no zombie behind a long-lived server
            threading.Thread(target=reap, name=f"reap-{child.pid}", daemon=True).start()
        elif child.returncode not in (0, 1):  # 0: completed, 1: another stop reason
            raise UserError(f"the resume did not start: {_last_line(log)} (output: {log})")
        return str(log), state


STARTUP_SECONDS = 30.0
"""How long an answer waits at most to see its resume take the run over."""


def _started(store: RunStore, claim: RunClaim, child: subprocess.Popen[bytes]) -> str:
    """Wait until ``child`` takes the run over or ends; what it became (see `Launcher.resume`).

    A child that ended has its claim released here, so that the status read afterwards
    is the run's own, not the console's hold.
    """
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if child.poll() is not None:
            claim.release()
            return store.get_run(claim.run_id).status
        if store.get_run(claim.run_id).pid == child.pid:
            return "running"
        time.sleep(0.05)
    return "starting"


def _last_line(log: Path) -> str:
    """The last line a process wrote (its one-line error), at most 300 characters."""
    with log.open("rb") as file:
        file.seek(max(0, log.stat().st_size - 4096))
        lines = file.read().decode("utf-8", "replace").strip().splitlines()
    return (lines[-1] if lines else "it wrote nothing")[:300]


def answer(
    store: RunStore, launcher: Launcher, run_id: str, text: str, question_id: int | None
) -> str:
    """Answer the run's question: in the console's table while it runs, else by resuming.

    Raises:
        UserError: If the run waits for no answer, the question closed meanwhile, or
            another process holds the run (``run ID is running (pid N)``).
    """
    run = store.get_run(run_id)
    if run.running and question_id is not None:
        waiting = {q.id for q in open_questions(store, run_id)}
        if question_id not in waiting:
            raise UserError(f"run {run_id!r} is not waiting for that answer any more")
        if not answer_question(store, question_id, text):
            raise UserError("the question closed before the answer arrived; answer it again")
        return "answer sent; the run goes on with it"
    return _launch(store, launcher, run, "with your answer", answer=text)


def resume(store: RunStore, launcher: Launcher, run_id: str, message: str) -> str:
    """Resume a stopped or interrupted run, with new instructions if ``message`` is not blank.

    Raises:
        UserError: If the run is running, completed, waits for an answer (answer it
            instead), or another process holds it.
    """
    run = resumable_run(store, run_id)
    if store.pending_questions(run_id):
        raise UserError(f"run {run_id!r} waits for an answer: answer its question to resume it")
    note = "with your message" if message.strip() else ""
    return _launch(store, launcher, run, note, message=message if message.strip() else None)


def _launch(
    store: RunStore,
    launcher: Launcher,
    run: RunSummary,
    note: str,
    *,
    answer: str | None = None,
    message: str | None = None,
) -> str:
    """Claim the run and start its resume process; the notice saying what became of it."""
    for name, value in (("answer", answer), ("message", message)):
        size = len(value.encode()) if value is not None else 0
        if size > MAX_ARGUMENT_BYTES:
            raise UserError(f"the {name} is too long ({size:,} bytes; at most 100,000)")
    claim = store.claim(run.run_id)
    try:
        if answer is not None:
            pending_answers(store, run.run_id, answer)
        log, state = launcher.resume(
            store, claim, answer=answer, message=message, cwd=run.workspace
        )
    except BaseException:
        claim.release()
        raise
    note = f" {note}" if note else ""
    if state in ("running", "starting"):
        return f"resuming the run{note} (output: {log})"
    return f"resumed the run{note}; it ended {state} (output: {log})"
