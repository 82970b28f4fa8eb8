"""The hook commands' short path: parse, read stdin under a deadline, answer, exit 0.

Claude Code runs ``convergent hook stop`` at every stop of an agent, so this path
imports only the coordinator's state and decision code: no typer, no agent stack.
The typer commands in `convergent.cli.hook` (for ``--help``) answer through it too.

Claude Code reads the hook's stdout as one JSON document, and ignores the answer when
anything else comes first. So while the hook decides, whatever is written to stdout,
by Python code or by a process it starts, goes to stderr; the answer is written last.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import stat
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TextIO

__all__ = [
    "STDIN_DEADLINE",
    "answer",
    "hook_event",
    "read_stdin",
    "run_hook",
    "stdout_kept_for_the_answer",
]

STDIN_DEADLINE = 3.0
"""Seconds the hook waits for stdin to be closed before answering with what arrived."""

_MAX_INPUT = 4 * 1024 * 1024
_EVENTS = {
    "stop": "Stop",
    "subagent-stop": "SubagentStop",
    "pre-tool-use": "PreToolUse",
    "post-tool-use": "PostToolUse",
}
_HELP = {"--help", "-h"}


def hook_event(args: Sequence[str]) -> str | None:
    """The hook event ``args`` ask to answer (``Stop``/``SubagentStop``), or None.

    None also for ``--help``, which the full command line renders.
    """
    if len(args) < 2 or args[0] != "hook" or args[1] not in _EVENTS:
        return None
    if any(arg in _HELP for arg in args[2:]):
        return None
    return _EVENTS[args[1]]


def read_stdin(deadline: float = STDIN_DEADLINE) -> str:
    """Read stdin until it closes or ``deadline`` seconds pass, whichever comes first.

    A writer that never closes the pipe must not hold the hook past its budget: what
    arrived by then is answered (an incomplete document is reported as unusable input).
    """
    stream = sys.stdin
    if stream is None or stream.isatty():
        return ""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError):  # not a real file (e.g. an in-memory stream)
        return stream.read()
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return _read_at_once(fd)  # a file ends
    chunks: list[bytes] = []
    size = 0
    end = time.monotonic() + deadline
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, selectors.EVENT_READ)
        except OSError:  # a device epoll cannot watch (/dev/null): always ready to read
            return _read_at_once(fd)
        while size < _MAX_INPUT:
            left = end - time.monotonic()
            if left <= 0 or not selector.select(left):
                print(
                    f"convergent hook: stdin still open after {deadline:g}s; "
                    "answering with what arrived",
                    file=sys.stderr,
                )
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _read_at_once(fd: int) -> str:
    """Up to the input limit from a source that never makes a reader wait."""
    chunks: list[bytes] = []
    size = 0
    while size < _MAX_INPUT:
        chunk = os.read(fd, min(65536, _MAX_INPUT - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _point_stdout_at_stderr() -> int | None:
    """Make descriptor 1 a copy of 2; return a copy of the old 1 (None if impossible)."""
    try:
        saved = os.dup(1)
    except OSError:  # no stdout descriptor: nothing can inherit one either
        return None
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr descriptor: leave stdout where it was
        os.close(saved)
        return None
    return saved


@contextlib.contextmanager
def stdout_kept_for_the_answer() -> Iterator[TextIO]:
    """Send everything bound for stdout to stderr; yield a stream on the real stdout.

    Both ``sys.stdout`` and file descriptor 1 (which child processes inherit) point at
    stderr until the block ends; only what is written to the yielded stream reaches
    stdout. Where the descriptors cannot be rearranged, ``sys.stdout`` alone is.
    """
    original = sys.stdout
    if original is not None:
        with contextlib.suppress(OSError, ValueError):
            original.flush()
    saved = _point_stdout_at_stderr()
    sys.stdout = sys.stderr
    try:
        if saved is None:
            yield original
        else:
            with open(saved, "w", encoding="utf-8", closefd=False) as real:
                yield real
    finally:
        sys.stdout = original
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def answer(event: str, state: str | None, verify: bool, unexpected: Sequence[str]) -> int:
    """Answer one hook call on stdout (notes on stderr); returns the exit code."""
    with stdout_kept_for_the_answer() as stdout:
        from convergent.coordinator.hook import HookEvent, answer_hook

        if unexpected:
            print(
                f"convergent hook: ignoring unexpected arguments {list(unexpected)}",
                file=sys.stderr,
            )
        reply = answer_hook(HookEvent(event), read_stdin(), state=state, verify=verify)
        if reply.message:
            print(reply.message, file=sys.stderr)
        sys.stderr.flush()
        stdout.write(reply.stdout)
        stdout.flush()
    return reply.exit_code


def run_hook(event: str, options: Sequence[str]) -> int:
    """Parse the hook's options leniently (unknown ones are noted, never fatal) and answer."""
    state: str | None = None
    verify = False
    unexpected: list[str] = []
    items = list(options)
    index = 0
    while index < len(items):
        item = items[index]
        if item == "--verify":
            verify = True
        elif item.startswith("--state="):
            state = item.removeprefix("--state=")
        elif item == "--state" and index + 1 < len(items):
            index += 1
            state = items[index]
        else:
            unexpected.append(item)
        index += 1
    return answer(event, state, verify, unexpected)
