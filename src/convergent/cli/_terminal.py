"""Steering from the terminal: each line typed during a run becomes a steering command.

A plain line is a message (delivered at the next cycle boundary as a redirect);
``/stop [reason]`` ends the run ``stopped``; ``/pause`` and ``/resume`` hold and
release it. A line starting with ``//`` is a message that starts with ``/``.
"""

from __future__ import annotations

import codecs
import os
import select
import threading
from collections.abc import Callable

from convergent.steering import SteeringCommand, SteeringKind, SteeringQueue

__all__ = ["HELP", "TerminalSteering", "parse_line"]

HELP = "type a message + Enter to steer the run; /stop to stop it, /pause and /resume"


def parse_line(line: str) -> SteeringCommand | None:
    """The command a typed line means; None for a blank line.

    Raises:
        ValueError: For an unknown ``/command``.
    """
    text = line.strip()
    if not text:
        return None
    if text.startswith("//"):
        return SteeringCommand(SteeringKind.MESSAGE, text[1:])
    if not text.startswith("/"):
        return SteeringCommand(SteeringKind.MESSAGE, text)
    word, _, rest = text[1:].partition(" ")
    if word in ("stop", "pause", "resume"):
        return SteeringCommand(SteeringKind(word), rest.strip())
    raise ValueError(f"unknown command /{word}; use /stop, /pause or /resume")


class TerminalSteering:
    """Reads lines from a file descriptor in a background thread and steers a queue.

    The thread polls with ``select`` so that `close` ends it promptly, without leaving a
    thread blocked in a read at interpreter exit.

    Args:
        queue: The run's steering queue.
        fd: File descriptor to read (standard input by default).
        notify: Called with a short notice for each accepted or rejected line.
    """

    def __init__(
        self,
        queue: SteeringQueue,
        fd: int = 0,
        *,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.queue = queue
        self.fd = fd
        self.notify = notify or (lambda _: None)
        self.commands = 0
        """Commands handed to the queue so far."""
        self._closed = threading.Event()
        self._suspended = threading.Event()
        self._thread = threading.Thread(target=self._read, name="convergent-steer", daemon=True)

    def start(self) -> TerminalSteering:
        """Start reading."""
        self._thread.start()
        return self

    def suspend(self) -> None:
        """Stop taking lines (while another reader, such as ``ask_user``, needs them)."""
        self._suspended.set()

    def release(self) -> None:
        """Take lines again after `suspend`."""
        self._suspended.clear()

    def close(self) -> None:
        """Stop reading and wait for the thread."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def _read(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        while not self._closed.is_set():
            if self._suspended.is_set():
                self._closed.wait(0.05)
                continue
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
                if not ready or self._suspended.is_set():
                    continue
                chunk = os.read(self.fd, 4096)
            except (OSError, ValueError):
                return
            if not chunk:
                self._line(pending + decoder.decode(b"", final=True))
                return
            pending += decoder.decode(chunk)
            *lines, pending = pending.split("\n")
            for line in lines:
                self._line(line)

    def _line(self, line: str) -> None:
        try:
            command = parse_line(line)
        except ValueError as exc:
            self.notify(str(exc))
            return
        if command is None:
            return
        if command.kind is SteeringKind.STOP and not command.text:
            command = SteeringCommand(SteeringKind.STOP, "stopped from the terminal")
        self.queue.put(command)
        self.commands += 1
        self.notify(f"steering: {command.kind}" + (f" {command.text!r}" if command.text else ""))
