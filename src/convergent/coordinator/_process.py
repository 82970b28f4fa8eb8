"""Running a check's command under a total deadline, leaving no process behind.

A command can outlive its own exit: a child it started in the background keeps the
output pipe open, so reading "until the end" never ends; one that calls ``setsid``
leaves the command's process group too. Every process the command starts inherits a
marker in its environment; when the command ends (or the deadline passes) the output
is read for a short grace period, then every process that carries the marker, in any
group, is killed and the pipe is closed.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = ["Finished", "run_bounded"]

GRACE_SECONDS = 0.5
"""How long output is still read after the command itself exited."""

_MARKER = "CONVERGENT_CHECK_RUN"


@dataclass(frozen=True, slots=True)
class Finished:
    """How a bounded command ended."""

    exit_code: int | None
    """Its exit code; None if it was still running at the deadline."""
    output: bytes
    """The end of what it wrote (stdout and stderr together)."""
    timed_out: bool
    """Whether the deadline passed before it exited."""


def _marked(token: str) -> list[psutil.Process]:
    """Processes whose environment carries this run's marker."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):  # gone meanwhile, or another user's
            if process.environ().get(_MARKER) == token:
                found.append(process)
    return found


def _kill_all(process: subprocess.Popen[bytes], token: str) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    for marked in _marked(token):
        with contextlib.suppress(psutil.Error):
            marked.kill()


def run_bounded(
    args: str | list[str], *, shell: bool, cwd: Path, timeout: float, keep: int = 2000
) -> Finished:
    """Run a command; return within ``timeout`` (plus a moment) whatever it does.

    Args:
        args: The command.
        shell: Run it through the shell.
        cwd: Its working directory.
        timeout: Total seconds it may take, output included.
        keep: How many bytes of output to keep (the end).

    Raises:
        OSError: If it cannot be started.
    """
    token = uuid.uuid4().hex
    started = time.monotonic()
    process = subprocess.Popen(
        args,
        shell=shell,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, _MARKER: token},
    )
    assert process.stdout is not None
    output = bytearray()
    exited_at: float | None = None
    deadline = started + timeout
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if exited_at is None and process.poll() is not None:
                    exited_at = now
                limit = deadline if exited_at is None else min(deadline, exited_at + GRACE_SECONDS)
                if now >= limit:
                    break
                if not selector.select(timeout=min(0.1, limit - now)):
                    continue
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    break
                output += chunk
                del output[:-keep]
        if process.poll() is None:  # the pipe closed as it exits, or it closed the pipe
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        timed_out = process.poll() is None
        _kill_all(process, token)
        process.stdout.close()
        process.wait()
    return Finished(None if timed_out else process.returncode, bytes(output), timed_out)
