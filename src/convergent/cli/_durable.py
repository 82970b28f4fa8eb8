"""What ``run`` and ``resume`` share beyond the model and the gate.

The stored run settings, checkpoints, the extra tools (file edits, skills),
compression, and steering from the database and the terminal.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from convergent.cli._terminal import HELP, TerminalSteering
from convergent.compaction import ContextCompressor
from convergent.edit_tools import edit_tools
from convergent.events import Event, ToolFinished, ToolStarted
from convergent.exceptions import UserError
from convergent.extensions import RunObserver
from convergent.gate import ASK_USER
from convergent.skills import Skills
from convergent.steering import SteeringQueue
from convergent.store import CheckpointObserver, DatabaseSteering, RunStore
from convergent.tools import Tool

__all__ = ["Durable", "RunConfig", "open_store"]

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(slots=True, kw_only=True)
class RunConfig:
    """The ``run`` options that ``resume`` needs to rebuild the same agent."""

    model: str | None = None
    """The ``--model`` value (None: the default model)."""
    base_url: str | None = None
    """The ``--base-url`` value."""
    protocol: str | None = None
    """Tool-call protocol; None means the model's own default."""
    workspace: str = "."
    """Absolute workspace folder."""
    system: str = ""
    """The system prompt, before the skills section."""
    tool_error: str = "stop"
    """Tool-error policy."""
    temperature: float | None = None
    """Sampling temperature."""
    allow_writes: bool = False
    """Whether ``write_file`` and ``edit_file`` are offered."""
    skills: list[str] = field(default_factory=list)
    """Skill folders (absolute)."""
    gate: str | None = None
    """The ``--gate`` threshold, if any."""
    ask_via: str | None = None
    """The ``--ask-via`` channel."""
    ask_timeout: float = 300.0
    """The ``--ask-timeout`` seconds."""
    gate_model: str | None = None
    """The ``--gate-model`` value."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form stored with the run."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Rebuild from `to_dict` output, ignoring unknown keys."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def open_store(db: Path, *, must_exist: bool) -> RunStore:
    """Open the checkpoint database.

    Raises:
        UserError: If ``must_exist`` and there is no database at ``db``.
    """
    if must_exist and not db.is_file():
        raise UserError(f"no checkpoint database at {db} (pass --db PATH)")
    return RunStore(db)


def new_run_id(store: RunStore | None, requested: str | None) -> str:
    """The id for a new run: ``requested`` if valid and unused, else a random one.

    Raises:
        UserError: If ``requested`` is malformed or already stored.
    """
    if requested is None:
        return uuid.uuid4().hex[:12]
    if not _RUN_ID.fullmatch(requested):
        raise UserError(
            f"--run-id must be 1-64 letters, digits, '.', '_' or '-', got {requested!r}"
        )
    if store is not None and store.exists(requested):
        raise UserError(f"run {requested!r} already exists; continue it with: resume {requested}")
    return requested


class Durable:
    """Checkpoints, file-edit and skill tools, compression and steering for one CLI run.

    Args:
        config: The run's settings.
        store: Checkpoint database, or None to run without checkpoints.
        run_id: Id of the run.
        steer: Read steering lines from standard input while the run goes on.
        quiet: Print no notices (``--json``).
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        store: RunStore | None,
        run_id: str,
        steer: bool,
        quiet: bool,
    ) -> None:
        self.config = config
        self.store = store
        self.run_id = run_id
        self.steer = steer
        self.quiet = quiet
        self.workspace = Path(config.workspace)
        self.skills = Skills.discover(*config.skills) if config.skills else Skills(())
        self.context_policy = ContextCompressor()
        self._notes = Console(stderr=True, highlight=False)
        self._reader: TerminalSteering | None = None

    @property
    def tools(self) -> list[Tool]:
        """``write_file`` / ``edit_file`` if writes are allowed, and the skill tools."""
        extra: list[Tool] = []
        if self.config.allow_writes:
            extra += edit_tools(self.workspace)
        if len(self.skills):
            extra += self.skills.tools()
        return extra

    def system_prompt(self) -> str | None:
        """The configured system prompt followed by the skills section."""
        return self.skills.system_prompt(self.config.system) or None

    def observers(self, tools: Sequence[Tool]) -> list[RunObserver]:
        """The checkpoint observer (none without a store)."""
        if self.store is None:
            return []
        return [
            CheckpointObserver(
                self.store, tools=tools, workspace=self.workspace, config=self.config.to_dict()
            )
        ]

    def on_event(self, event: Event) -> None:
        """Let ``ask_user`` have the terminal while it waits for an answer."""
        if self._reader is None:
            return
        if isinstance(event, ToolStarted) and event.name == ASK_USER:
            self._reader.suspend()
        elif isinstance(event, ToolFinished) and event.name == ASK_USER:
            self._reader.release()

    def note(self, text: str) -> None:
        """Print a notice on standard error unless quiet."""
        if not self.quiet:
            self._notes.print(f"[dim]{escape(text)}[/]")

    @contextmanager
    def steering(self, message: str | None = None) -> Iterator[SteeringQueue]:
        """The run's steering queue, with the terminal reader running while it is open.

        Raises:
            UserError: If terminal steering is asked for without a readable standard input.
        """
        queue: SteeringQueue = (
            DatabaseSteering(self.store, self.run_id) if self.store is not None else SteeringQueue()
        )
        if message:
            queue.send(message)
        if self.store is not None:
            self.note(f"run {self.run_id} · checkpoints in {self.store.path}")
        if self.steer:
            try:
                fd = sys.stdin.fileno()
            except (AttributeError, OSError, ValueError):
                raise UserError("--steer needs a readable standard input") from None
            self._reader = TerminalSteering(queue, fd, notify=self._warn).start()
            self.note(HELP)
        try:
            yield queue
        finally:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    def _warn(self, text: str) -> None:
        if not self.quiet:
            self._notes.print(f"[yellow]{escape(text)}[/]")


def default_steer(steer: bool | None, json_output: bool) -> bool:
    """``--steer`` default: on when standard input is a terminal and output is not JSON."""
    if steer is not None:
        return steer
    return not json_output and sys.stdin is not None and sys.stdin.isatty()
