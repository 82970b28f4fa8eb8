"""Rollback: file contents saved before a tool changes them, and restored on rewind.

Before a tool marked ``modifies_files`` runs, the run's journal calls `capture` (in a
worker thread, so sibling calls go on) and stores the result with `save_snapshot`.
The files it saves are the ones the call names in a path-like
argument (see `PATH_ARGUMENTS`); a call that names none gets every workspace file
saved instead (folders such as ``.git`` and ``.convergent`` excluded). Contents are
stored once per distinct content (``blobs``, keyed by SHA-256) and each snapshot row
records whether the file existed.

Rewinding to cycle *K* gives every file snapshotted after *K* the content of its
earliest such snapshot, which is what it held at the end of cycle *K*. A file that
did not exist then is deleted. Files created by a tool that named no path are not
known, so they are left in place.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent._files import replace_file
from convergent.builtin_tools import resolve_in_workspace
from convergent.tools import ToolArgumentsError

__all__ = [
    "MAX_SNAPSHOT_BYTES",
    "PATH_ARGUMENTS",
    "FileState",
    "RewindResult",
    "capture",
    "drop_unused_blobs",
    "paths_in_arguments",
    "restore",
    "save_snapshot",
]

PATH_ARGUMENTS = ("path", "paths", "file", "files", "file_path", "filename")
"""Argument names whose values are taken as the files a modifying tool touches."""

MAX_SNAPSHOT_BYTES = 20_000_000
"""Larger files are recorded as not restorable instead of being copied."""

MAX_WORKSPACE_FILES = 5_000
"""At most this many files are saved when a call names no path."""

_SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".convergent",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RewindResult:
    """What `RunStore.rewind` did."""

    run_id: str
    """The rewound run."""
    cycle: int
    """The cycle the run now ends at."""
    restored: tuple[str, ...] = ()
    """Workspace files written back to their earlier content."""
    deleted: tuple[str, ...] = ()
    """Files removed because they did not exist at that cycle."""
    skipped: tuple[str, ...] = ()
    """Files that could not be restored (too large, outside the workspace, no workspace)."""


def paths_in_arguments(arguments: Mapping[str, Any]) -> list[str]:
    """The file paths a call names through `PATH_ARGUMENTS`."""
    found: list[str] = []
    for name in PATH_ARGUMENTS:
        value = arguments.get(name)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list | tuple):
            found.extend(item for item in value if isinstance(item, str))
    return found


def _workspace_files(root: Path) -> Iterator[Path]:
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file():
                continue
            yield path
            count += 1
            if count >= MAX_WORKSPACE_FILES:
                return


@dataclass(frozen=True, slots=True)
class FileState:
    """The content (or absence) of one workspace file at one moment."""

    relative: str
    """Path relative to the workspace, with forward slashes."""
    existed: bool
    """Whether it was a file then."""
    digest: str | None = None
    """SHA-256 of the content (None: absent, or too large to keep)."""
    data: bytes | None = None
    """The content, when kept."""


def capture(workspace: Path, arguments: Mapping[str, Any]) -> list[FileState]:
    """Read the files a modifying call is about to touch (no database; safe in a thread).

    The files are the ones the call names through `PATH_ARGUMENTS`, or every workspace
    file when it names none.
    """
    named = paths_in_arguments(arguments)
    root = workspace.resolve()
    if named:
        targets: list[Path] = []
        for raw in named:
            try:
                targets.append(resolve_in_workspace(root, raw))
            except ToolArgumentsError:
                continue  # the tool itself rejects it; there is nothing of ours to save
    else:
        targets = list(_workspace_files(root))
    states: list[FileState] = []
    seen: set[str] = set()
    for path in targets:
        relative = path.relative_to(root).as_posix()
        if relative in seen or path.is_dir():
            continue
        seen.add(relative)
        if not path.is_file():
            states.append(FileState(relative, existed=False))
        elif path.stat().st_size > MAX_SNAPSHOT_BYTES:
            states.append(FileState(relative, existed=True))
        else:
            data = path.read_bytes()
            states.append(FileState(relative, True, hashlib.sha256(data).hexdigest(), data))
    return states


def save_snapshot(
    conn: sqlite3.Connection,
    run_id: str,
    cycle: int,
    call_id: str,
    files: Iterable[FileState],
    now: float,
) -> int:
    """Store captured files for rewind, each path once per cycle; return how many."""
    done = {
        path
        for (path,) in conn.execute(
            "SELECT path FROM snapshots WHERE run_id = ? AND cycle = ?", (run_id, cycle)
        )
    }
    rows: list[tuple[Any, ...]] = []
    for file in files:
        if file.relative in done:
            continue
        done.add(file.relative)
        if file.digest is not None and file.data is not None:
            conn.execute(
                "INSERT OR IGNORE INTO blobs (hash, data) VALUES (?, ?)", (file.digest, file.data)
            )
        rows.append((run_id, cycle, call_id, file.relative, file.digest, int(file.existed), now))
    conn.executemany(
        "INSERT INTO snapshots (run_id, cycle, call_id, path, hash, existed, taken_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    return len(rows)


def restore(
    conn: sqlite3.Connection, run_id: str, cycle: int, workspace: Path | None
) -> RewindResult:
    """Give every file snapshotted after ``cycle`` its content at the end of ``cycle``."""
    earliest: dict[str, tuple[str | None, bool]] = {}
    for path, digest, existed in conn.execute(
        "SELECT path, hash, existed FROM snapshots WHERE run_id = ? AND cycle > ? ORDER BY id",
        (run_id, cycle),
    ):
        earliest.setdefault(path, (digest, bool(existed)))
    restored: list[str] = []
    deleted: list[str] = []
    skipped: list[str] = []
    for relative, (digest, existed) in earliest.items():
        if workspace is None:
            skipped.append(relative)
            continue
        try:
            target = resolve_in_workspace(workspace, relative)
        except ToolArgumentsError:
            skipped.append(relative)
            continue
        if not existed:
            if target.is_file():
                target.unlink()
                deleted.append(relative)
            continue
        row = conn.execute("SELECT data FROM blobs WHERE hash = ?", (digest,)).fetchone()
        if digest is None or row is None:
            skipped.append(relative)
            continue
        try:
            replace_file(workspace, target, bytes(row[0]))
        except ToolArgumentsError:
            skipped.append(relative)  # a link was planted there: never written through
            continue
        restored.append(relative)
    return RewindResult(
        run_id=run_id,
        cycle=cycle,
        restored=tuple(restored),
        deleted=tuple(deleted),
        skipped=tuple(skipped),
    )


def drop_unused_blobs(conn: sqlite3.Connection) -> None:
    """Delete stored contents that no snapshot refers to any more."""
    conn.execute(
        "DELETE FROM blobs WHERE hash NOT IN (SELECT hash FROM snapshots WHERE hash IS NOT NULL)"
    )
