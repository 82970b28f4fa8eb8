"""A reply as it streams, shared between the run's process and the console.

The streaming deltas are never journaled, so the console cannot read them from the
run database. Instead the process that runs the model writes the current reply so
far to a small file next to the database (`live_path`): ``runs.db-live/RUN_ID.json``,
holding its cycle, its text and whether tool calls follow.
`LiveTextWriter` writes it a few times a second while the text grows (each write
replaces the file whole; text that came too soon after a write is written once the
interval passes, so a model that pauses shows all it wrote) and removes it when the
next cycle starts or the run ends;
`read_live_text` is what the console reads, and `live_version` what its page's event
stream polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path

from convergent._run_id import check_run_id
from convergent.events import (
    CycleStarted,
    Event,
    ModelResponded,
    RunStopped,
    TextDelta,
    ToolCallDelta,
)
from convergent.exceptions import UserError
from convergent.state import RunState
from convergent.ui.timeline import CLIP, CycleView, RunView

__all__ = [
    "LiveText",
    "LiveTextWriter",
    "live_path",
    "live_version",
    "read_live_text",
    "show_live_text",
]

WRITE_INTERVAL = 0.1
"""Seconds between two writes of a growing reply (the console polls every 0.25 s)."""


def live_path(db: str | os.PathLike[str], run_id: str) -> Path:
    """The file that holds ``run_id``'s streaming reply, next to the database ``db``.

    Raises:
        UserError: If ``run_id`` breaks the run id rule (it names a file).
    """
    db = Path(db)
    return db.with_name(f"{db.name}-live") / f"{check_run_id(run_id)}.json"


@dataclass(frozen=True, slots=True)
class LiveText:
    """A reply as far as it has streamed."""

    cycle: int
    """The cycle whose model request it answers."""
    text: str
    """The text so far."""
    calls: bool
    """Whether tool calls follow it (the text is then the model thinking aloud)."""


def read_live_text(db: str | os.PathLike[str], run_id: str) -> LiveText | None:
    """The streaming reply of ``run_id``, or None when nothing is streaming."""
    try:
        data = json.loads(live_path(db, run_id).read_text(encoding="utf-8"))
        return LiveText(
            cycle=int(data["cycle"]),
            text=str(data["text"]),
            calls=bool(data["calls"]),
        )
    except (OSError, ValueError, KeyError, TypeError, UserError):
        return None


def show_live_text(view: RunView, live: LiveText | None) -> None:
    """Show the streaming reply in a running run's timeline, until its cycle's is stored.

    It goes into its cycle (added after the latest one shown if the store has not
    reached it yet); a cycle whose text is stored keeps that text.
    """
    if live is None or not view.summary.running or view.later:
        return
    cycle = next((c for c in view.cycles if c.number == live.cycle), None)
    if cycle is None:
        if view.cycles and live.cycle < view.cycles[-1].number:
            return
        cycle = CycleView(live.cycle)
        view.cycles.append(cycle)
    if cycle.text:
        return
    cycle.text, cycle.text_cut = live.text[:CLIP], max(0, len(live.text) - CLIP)
    cycle.streaming = "thinking" if live.calls else "model"


def live_version(db: str | os.PathLike[str], run_id: str) -> Hashable:
    """Changes whenever the streaming reply of ``run_id`` does (one ``stat``)."""
    try:
        stat = live_path(db, run_id).stat()
    except (OSError, UserError):
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


@dataclass(slots=True)
class _Reply:
    """One run's reply being written."""

    cycle: int
    """Its cycle."""
    text: list[str] = field(default_factory=list)
    """Its text so far, in pieces."""
    calls: bool = False
    """Whether tool calls were seen."""
    written: float | None = None
    """When it was last written (monotonic seconds)."""
    later: asyncio.TimerHandle | None = None
    """The write scheduled for text that came too soon after the last write."""


class LiveTextWriter:
    """Writes each streaming reply of the runs it sees for the console (see the module).

    Use it as an event handler (``on_event=``) or an observer (``observers=[...]``) of
    runs stored in the database ``db``. Writing is best effort: a failure to write
    never disturbs the run.

    Args:
        db: The run database the console shows.
        interval: Seconds between two writes of a growing reply.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        interval: float = WRITE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = Path(db)
        self.interval = interval
        self.clock = clock
        self._replies: dict[str, _Reply] = {}

    def on_event(self, event: Event, state: RunState) -> None:
        """Take one event of a run (as an observer)."""
        self(event)

    def __call__(self, event: Event) -> None:
        """Take one event of a run."""
        match event:
            case TextDelta(text=text):
                reply = self._replies.get(event.run_id)
                if reply is not None:
                    reply.text.append(text)
                    self._write(event.run_id, reply)
            case ToolCallDelta():
                reply = self._replies.get(event.run_id)
                if reply is not None and not reply.calls:
                    reply.calls = True
                    self._write(event.run_id, reply, now=True)
            case CycleStarted():
                self._remove(event.run_id)
                self._replies[event.run_id] = _Reply(event.cycle)
            case ModelResponded():
                reply = self._replies.get(event.run_id)
                if reply is not None and (reply.written is not None or event.content):
                    reply.text = [event.content]
                    reply.calls = bool(event.tool_calls)
                    self._write(event.run_id, reply, now=True)
            case RunStopped():
                self._remove(event.run_id)
                self._replies.pop(event.run_id, None)
            case _:
                pass

    def close(self) -> None:
        """Remove the files of every run still streaming (at the end of a process)."""
        for run_id in list(self._replies):
            self._remove(run_id)
        self._replies.clear()

    def _write(self, run_id: str, reply: _Reply, *, now: bool = False) -> None:
        moment = self.clock()
        if not now and reply.written is not None and moment - reply.written < self.interval:
            self._write_later(run_id, reply, self.interval - (moment - reply.written))
            return
        if reply.later is not None:
            reply.later.cancel()
            reply.later = None
        reply.written = moment
        data = {"cycle": reply.cycle, "text": "".join(reply.text), "calls": reply.calls}
        with contextlib.suppress(OSError, UserError):
            path = live_path(self.db, run_id)
            path.parent.mkdir(mode=0o700, exist_ok=True)
            partial = path.with_suffix(".part")
            partial.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
            os.replace(partial, path)

    def _write_later(self, run_id: str, reply: _Reply, delay: float) -> None:
        """Write the text held back by the interval once it passes (the model may pause)."""
        if reply.later is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # driven outside an event loop: the next event writes it
            return

        def write() -> None:
            reply.later = None
            if self._replies.get(run_id) is reply and reply.written is not None:
                self._write(run_id, reply, now=True)

        reply.later = loop.call_later(delay, write)

    def _remove(self, run_id: str) -> None:
        reply = self._replies.get(run_id)
        if reply is not None and reply.later is not None:
            reply.later.cancel()
            reply.later = None
        if reply is None or reply.written is None:
            return
        reply.written = None
        with contextlib.suppress(OSError, UserError):
            live_path(self.db, run_id).unlink(missing_ok=True)
