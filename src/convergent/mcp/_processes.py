"""Ending a stdio MCP server with every process it started (machinery).

A server runs in a session and process group of its own, and carries a mark in its
environment (``CONVERGENT_MCP_SERVER=<token>``) that its children inherit. When the
server ends, whether it was stopped or crashed, everything left of it is ended: the
members of its process group, its descendants, and any process that still carries its
mark, such as a daemon that left the group and lost its parent. A child that both
leaves the group and clears its environment after its parent has gone cannot be told
from any other process, and is left alone.
"""

from __future__ import annotations

import os
import secrets

import psutil

__all__ = ["MARK", "end_server_processes", "new_mark", "server_alive"]

MARK = "CONVERGENT_MCP_SERVER"
"""The environment variable that marks a server's processes."""

TERM_GRACE = 2.0
"""Seconds between asking the processes to end (SIGTERM) and killing them (SIGKILL)."""


def new_mark() -> str:
    """A value of `MARK` for one server start: this process's id and a random token."""
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def server_alive(pid: int, mark: str) -> bool:
    """Whether the server process ``pid`` of the start marked ``mark`` still runs.

    An exited process that its parent has not reaped yet (a zombie) does not run, and a
    process that was given the number later carries no such mark.
    """
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and process.environ().get(MARK) == mark
    except psutil.Error:  # gone, or its environment went with it
        return False


def _belongs(process: psutil.Process, group: int, mark: str) -> bool:
    try:
        if os.getpgid(process.pid) == group:
            return True
        return bool(process.environ().get(MARK) == mark)
    except (psutil.Error, OSError):  # gone meanwhile, or another user's
        return False


def server_processes(group: int, mark: str) -> list[psutil.Process]:
    """The live processes of the server whose process group is ``group``."""
    found: dict[int, psutil.Process] = {}
    try:
        leader = psutil.Process(group)
        if leader.environ().get(MARK) == mark:  # not a process that was given its number
            found.update((child.pid, child) for child in leader.children(recursive=True))
    except psutil.Error:  # the server itself has exited
        pass
    for process in psutil.process_iter():
        if process.pid not in found and _belongs(process, group, mark):
            found[process.pid] = process
    me = os.getpid()
    # this process's own children (the server itself) are waited for by their owner:
    # reaping them here would take their exit status from the event loop
    return [process for pid, process in found.items() if pid != me and _parent(process) != me]


def _parent(process: psutil.Process) -> int | None:
    try:
        parent: int = process.ppid()
    except psutil.Error:
        return None
    return parent


def end_server_processes(group: int, mark: str) -> None:
    """End every process left of a server: SIGTERM, then SIGKILL after `TERM_GRACE` seconds.

    Blocking (it waits for the processes to go); call it from a worker thread.
    """
    processes = server_processes(group, mark)
    for process in processes:
        try:
            process.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(processes, timeout=TERM_GRACE)
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=TERM_GRACE)
