"""Writing a workspace file safely: atomically, never through a link, never outside.

The content goes to a fresh temporary file created exclusively (``O_CREAT|O_EXCL``,
which never follows a link someone planted at its name) in the target's own folder, and
then replaces the target. The folder is resolved again after it is created, so a link
that leads out of the workspace is refused, and a target that is itself a link is
refused rather than replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from convergent.exceptions import ToolArgumentsError

__all__ = ["replace_file"]


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


_NEW_FILE_MODE = 0o666 & ~_umask()


def replace_file(root: Path, target: Path, data: bytes) -> None:
    """Give ``target`` (a path inside ``root``) the content ``data``, atomically.

    Raises:
        ToolArgumentsError: If the target's folder resolves outside ``root``, or the
            target is a symbolic link.
    """
    base = root.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = target.parent.resolve()
    if folder != base and base not in folder.parents:
        raise ToolArgumentsError(f"{target.name!r} would be written outside the workspace")
    final = folder / target.name
    if final.is_symlink():
        raise ToolArgumentsError(f"{target.name!r} is a symbolic link; refusing to replace it")
    mode = stat.S_IMODE(final.stat().st_mode) if final.exists() else _NEW_FILE_MODE
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".convergent-tmp", dir=folder
    )
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, mode)
        # rename replaces a name, never what a link points to
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
