"""Who holds a stored run, and taking that hold in one transaction.

A run's row names its holder: the process id (``pid``), that process's start time
(``pid_start``, so that a process that later got the same id is not taken for it), and
a token unique to each claim (``claim``, so that two tasks of one process are told
apart). A holder is alive while its process runs; a holder in this process is alive
while this process holds its token, so a task that failed lets go of the run at once,
not when the process ends.

A claim is one write transaction (``BEGIN IMMEDIATE``): it reads the holder, refuses
when the holder is alive, and writes itself as the holder, so of any number of
processes and tasks claiming a run at once exactly one succeeds.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from convergent.exceptions import UserError
from convergent.stop import StopReason

__all__ = [
    "Holder",
    "drop",
    "give_back",
    "hold",
    "holder_alive",
    "new_token",
    "own_start",
    "running_error",
    "take",
]

_HELD: set[str] = set()
"""Tokens of the claims this process holds now."""
_OWN_START: dict[int, int | None] = {}
"""This process's start time, by pid (a forked child has a pid of its own)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """A run's holder as its row names it, to put back when a claim is given up."""

    status: str
    """The row's status (``running`` or ``stopped``)."""
    pid: int | None
    """Id of the holding process."""
    start: int | None
    """Start time of that process (see `_start_of`), where known."""
    token: str | None
    """Token of its claim (None in rows written before claims had tokens)."""


def new_token() -> str:
    """A fresh claim token."""
    return secrets.token_hex(16)


def hold(token: str) -> None:
    """Note that this process holds the claim ``token``."""
    _HELD.add(token)


def drop(token: str) -> None:
    """Note that this process no longer holds the claim ``token``."""
    _HELD.discard(token)


_TICKS_SINCE_BOOT = sys.platform.startswith("linux")
"""Whether start times are read as clock ticks since boot (see `_start_of`)."""


def _start_of(process: psutil.Process) -> int | None:
    """When ``process`` started, in a unit that stays the same while it runs.

    On Linux: clock ticks since boot, from ``/proc/PID/stat``. psutil gives the start
    only as a wall-clock time, worked out from the boot time, which moves when the
    system clock is set: a live holder would then look like another process. The
    ticks are also what every stored row holds. Elsewhere the system keeps the
    wall-clock start fixed: psutil's, in hundredths of a second.
    """
    try:
        if _TICKS_SINCE_BOOT:
            stat = Path(f"/proc/{process.pid}/stat").read_text()
            return int(stat.rpartition(")")[2].split()[19])
        return round(process.create_time() * 100)
    except (OSError, IndexError, ValueError, psutil.Error):
        return None


def own_start() -> int | None:
    """This process's start time, where the system tells it."""
    pid = os.getpid()
    if pid not in _OWN_START:
        _OWN_START[pid] = _start_of(psutil.Process(pid))
    return _OWN_START[pid]


def holder_alive(pid: int | None, start: int | None, token: str | None) -> bool:
    """Whether the holder a row names still runs (and, in this process, still holds it).

    Args:
        pid: The holder's process id.
        start: That process's start time, if recorded (else the pid has to do).
        token: Its claim's token, if recorded (a holder in this process without one,
            as older versions wrote, counts as holding).
    """
    if pid is None or pid <= 0:
        return False
    if pid == os.getpid():
        mine = own_start()
        if start is not None and mine is not None and start != mine:
            return False  # an earlier process that had this id
        return token is None or token in _HELD
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            # a killed child that its parent has not reaped yet still has its id
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            started = _start_of(process)
    except psutil.NoSuchProcess:  # a zombie, on systems that say so, too
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True
    return start is None or started is None or started == start


def running_error(run_id: str, pid: int | None) -> UserError:
    """The refusal a claimant gets while another holds the run."""
    return UserError(f"run {run_id!r} is running (pid {pid})")


def take(
    conn: sqlite3.Connection,
    path: Path,
    run_id: str,
    token: str,
    *,
    handed: str | None = None,
    resumable: bool = False,
) -> Holder:
    """Make this process, with ``token``, the holder of ``run_id`` (inside a transaction).

    Args:
        conn: A connection inside a write transaction.
        path: The database (for messages).
        run_id: The run.
        token: The new claim's token (held by this process once this returns).
        handed: A claim token that is taken over even though its holder is alive (a
            claim another process took for this one).
        resumable: Also refuse a run that ended for good (``completed``).

    Returns:
        The holder it replaced.

    Raises:
        UserError: If the run is unknown, held by a live holder, or (``resumable``)
            ended for good.
    """
    row = conn.execute(
        "SELECT status, pid, pid_start, claim, stop_reason FROM runs WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    if row is None:
        raise UserError(f"no run {run_id!r} in {path}")
    status, pid, start, held, reason = row
    handed_over = handed is not None and held == handed
    if status == "running" and not handed_over and holder_alive(pid, start, held):
        raise running_error(run_id, pid)
    if resumable and reason is not None and not StopReason(reason).resumable:
        raise UserError(f"run {run_id!r} ended {reason}; there is nothing to resume")
    conn.execute(
        "UPDATE runs SET status = 'running', pid = ?, pid_start = ?, claim = ? WHERE run_id = ?",
        (os.getpid(), own_start(), token, run_id),
    )
    hold(token)
    return Holder(status, pid, start, held)


def give_back(conn: sqlite3.Connection, run_id: str, token: str, previous: Holder) -> None:
    """Put back the holder a claim replaced, if the claim still holds the run."""
    conn.execute(
        "UPDATE runs SET status = ?, pid = ?, pid_start = ?, claim = ? "
        "WHERE run_id = ? AND claim = ?",
        (previous.status, previous.pid, previous.start, previous.token, run_id, token),
    )
