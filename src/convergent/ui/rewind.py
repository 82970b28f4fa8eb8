"""What a rewind would do to the run's files, for the confirmation page.

A rewind to cycle *K* gives every file snapshotted after *K* the content of its
earliest such snapshot (see `convergent.durability.sqlite.rollback`). This module reads those same
snapshots without touching anything, so the page can list each file and what will
become of it before the user confirms.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from convergent.builtin_tools import resolve_in_workspace
from convergent.durability.sqlite import RunStore
from convergent.tools import ToolArgumentsError

__all__ = ["FILES_SHOWN", "FileChange", "RewindPlan", "plan_rewind"]

FILES_SHOWN = 500
"""At most this many files are listed (the rest are counted)."""


@dataclass(frozen=True, slots=True)
class FileChange:
    """One workspace file a rewind would touch."""

    path: str
    """Path relative to the workspace."""
    action: Literal["restored", "deleted", "skipped"]
    """``restored`` (earlier content written back), ``deleted`` (it did not exist
    then) or ``skipped`` (it cannot be restored; `why` says so)."""
    why: str = ""
    """Why a skipped file cannot be restored."""


@dataclass(frozen=True, slots=True)
class RewindPlan:
    """The files a rewind to one cycle would restore, delete or leave."""

    files: list[FileChange]
    """The files, by path (at most `FILES_SHOWN`)."""
    more: int
    """Files not listed."""


def plan_rewind(store: RunStore, run_id: str, cycle: int) -> RewindPlan:
    """The files a rewind of ``run_id`` to ``cycle`` would change, read without changing any.

    Raises:
        UserError: If no run has this id.
    """
    workspace = store.get_run(run_id, clip=0).workspace
    after = [run_id, cycle]
    ((total,),) = store.query(
        "SELECT COUNT(DISTINCT path) FROM snapshots WHERE run_id = ? AND cycle > ?", after
    )
    rows = store.query(
        "SELECT s.path, s.hash, s.existed, b.hash IS NOT NULL FROM snapshots s "
        "JOIN (SELECT MIN(id) AS id FROM snapshots WHERE run_id = ? AND cycle > ? "
        "GROUP BY path) first ON s.id = first.id "
        "LEFT JOIN blobs b ON b.hash = s.hash ORDER BY s.path LIMIT ?",
        [*after, FILES_SHOWN],
    )
    files = [
        _change(Path(workspace) if workspace else None, path, bool(existed), bool(kept))
        for path, _, existed, kept in rows
    ]
    return RewindPlan(files, int(total) - len(files))


def _change(workspace: Path | None, path: str, existed: bool, kept: bool) -> FileChange:
    """What `rollback.restore` (SQLite backend) does with one file, in the same order."""
    if workspace is None:
        return FileChange(path, "skipped", "the run recorded no workspace")
    try:
        resolve_in_workspace(workspace, path)
    except ToolArgumentsError:
        return FileChange(path, "skipped", "it is outside the workspace now")
    if not existed:
        return FileChange(path, "deleted")
    if not kept:
        return FileChange(path, "skipped", "it was too large to keep a copy")
    return FileChange(path, "restored")
