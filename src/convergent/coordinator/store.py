"""Reading and writing the state file safely when several processes share it.

Claude Code can fire Stop and SubagentStop hooks concurrently, and a person may run
``convergent coordinator record`` at the same time, so every change is a
read-modify-write under an exclusive file lock (``<state>.lock``), and every write goes
to a temporary file in the same directory that is then renamed over the original. A
reader therefore sees either the old or the new file, never half of one, and no
update is lost. A file that cannot be read or parsed is reported, never overwritten.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from convergent.coordinator._lock import StateLock
from convergent.coordinator.state import StateFileError, WorkflowState, dump_state, parse_state

__all__ = ["DEFAULT_STATE_FILE", "StateStore", "read_state_file"]

DEFAULT_STATE_FILE = "workflow-state.yaml"
"""File name used when no state path is given."""


def read_state_file(path: Path) -> WorkflowState:
    """Read and parse a state file: the one reader of the hook, the CLI and the console.

    Only a regular file is read. A symbolic link is refused rather than followed: the
    hook reads the file in a folder the agent writes to, and its messages go back to
    the agent, so a link must not turn the hook into a reader of other files.

    Raises:
        StateFileError: The file is missing, a link or not a regular file, unreadable,
            not UTF-8, or does not parse (see `parse_state`).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise StateFileError(
            f"state file not found: {path} (create it with `convergent coordinator init`)"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateFileError(
                f"state file {path} is a symbolic link; convergent reads only a regular file"
            ) from None
        raise StateFileError(f"cannot read state file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StateFileError(f"state file {path} is not a regular file")
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StateFileError(f"cannot read state file {path}: not UTF-8") from None
    return parse_state(text, str(path))


def _temporary_file(directory: Path, name: str) -> tuple[int, str]:
    """A new file next to the state file, for its next version.

    What ``tempfile.mkstemp`` makes, without the import that every hook call would pay.
    """
    for attempt in range(100):
        path = directory / f".{name}.{os.getpid()}.{time.monotonic_ns()}.{attempt}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        try:
            return os.open(path, flags, 0o600), str(path)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for a temporary file in {directory}")


class StateStore:
    """A state file on disk with locked, atomic read-modify-write updates."""

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 30.0) -> None:
        """Point the store at a state file.

        Args:
            path: The YAML state file.
            lock_timeout: Seconds to wait for another process's update before giving up.
        """
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self._lock = StateLock(f"{self.path}.lock", timeout=lock_timeout)

    @property
    def base_dir(self) -> Path:
        """Directory that relative paths in checks refer to: the state file's directory."""
        return self.path.resolve().parent

    def exists(self) -> bool:
        """Whether the state file exists."""
        return self.path.is_file()

    def _read(self) -> WorkflowState:
        return read_state_file(self.path)

    def _write(self, state: WorkflowState) -> None:
        state.touch()
        text = dump_state(state)
        directory = self.path.parent if str(self.path.parent) else Path(".")
        fd, tmp_name = _temporary_file(directory, self.path.name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(OSError):
                mode = stat.S_IMODE(self.path.stat().st_mode) if self.path.exists() else 0o644
                os.chmod(tmp_name, mode)
            os.replace(tmp_name, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise

    def _require(self) -> None:
        # checked before locking, so that a missing file leaves no lock file behind
        if not self.path.is_file():
            raise StateFileError(
                f"state file not found: {self.path} (create it with `convergent coordinator init`)"
            )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            with self._lock:
                yield
        except TimeoutError:
            raise StateFileError(
                f"state file {self.path} is locked by another process "
                f"(waited {self.lock_timeout:g}s)"
            ) from None

    def load(self) -> WorkflowState:
        """Read the current state (under the lock, so never mid-update)."""
        self._require()
        with self._locked():
            return self._read()

    def create(self, state: WorkflowState, *, overwrite: bool = False) -> None:
        """Write a new state file.

        Raises:
            StateFileError: The file exists and ``overwrite`` is false.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            if self.path.exists() and not overwrite:
                raise StateFileError(
                    f"state file already exists: {self.path} (use --force to replace it)"
                )
            self._write(state)

    @contextlib.contextmanager
    def update(self) -> Iterator[WorkflowState]:
        """Lock, load, let the caller change the state, then write it atomically.

        Nothing is written if loading fails or the body raises.
        """
        self._require()
        with self._locked():
            state = self._read()
            yield state
            self._write(state)
