"""Progress of long commands: a bar on a terminal, plain lines when output is a file or pipe."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import IO, Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["LineProgress", "ProgressDisplay", "progress_display"]


class ProgressDisplay(Protocol):
    """What the commands call: rich's `Progress` and `LineProgress` both provide it."""

    def add_task(self, description: str, *, total: float | None = ...) -> Any:
        """Start counting a task of ``total`` steps."""
        ...

    def advance(self, task_id: Any, advance: float = ...) -> None:
        """Count one more step done."""
        ...

    def update(self, task_id: Any, *, completed: float | None = ...) -> None:
        """Set how many steps are done."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Any: ...


class LineProgress:
    """One line per tenth of each task (and its end), for logs that cannot redraw a bar."""

    def __init__(self, stream: IO[str] | None = None, steps: int = 10) -> None:
        self._stream = stream
        self._steps = steps
        self._tasks: list[tuple[str, int]] = []
        self._done: list[int] = []
        self._shown: list[int] = []

    def add_task(self, description: str, *, total: float | None = None) -> int:
        """Start counting a task; returns its id."""
        self._tasks.append((description, int(total or 0)))
        self._done.append(0)
        self._shown.append(-1)
        task_id = len(self._tasks) - 1
        self.update(task_id, completed=0)
        return task_id

    def advance(self, task_id: int, advance: float = 1) -> None:
        """Count ``advance`` more steps done."""
        self.update(task_id, completed=self._done[task_id] + int(advance))

    def update(self, task_id: int, *, completed: float | None = None) -> None:
        """Set the steps done, printing a line when the next tenth is reached."""
        if completed is None:
            return
        description, total = self._tasks[task_id]
        done = self._done[task_id] = int(completed)
        step = done * self._steps // total if total else self._steps
        if step > self._shown[task_id]:
            self._shown[task_id] = step
            stream = self._stream or sys.stderr
            print(f"{description}: {done}/{total}", file=stream, flush=True)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None


def progress_display(console: Console) -> ProgressDisplay:
    """A live bar when ``console`` is a terminal, else `LineProgress` on its stream."""
    if console.is_terminal:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
    return LineProgress(console.file)
