"""Built-in ``write_file`` and ``edit_file``: file changes confined to a workspace.

Both are marked ``modifies_files`` and take the file as ``path``, so a durable run
snapshots the file before either changes it and ``convergent rewind`` can restore it. A
path that resolves outside the workspace (through ``..`` or a symlink), into ``.git``
or ``.convergent``, or that is itself a symlink, is rejected as the model's mistake and
nothing is written. Writes are atomic and never follow a link (`convergent._files`).
"""

from __future__ import annotations

from pathlib import Path

from convergent._files import replace_file
from convergent.builtin_tools import resolve_in_workspace
from convergent.tools import Tool, ToolArgumentsError, tool

__all__ = ["edit_tools"]

_PROTECTED = frozenset({".git", ".convergent"})


def _target(root: Path, path: str) -> Path:
    target = resolve_in_workspace(root, path)
    named = Path(path) if Path(path).is_absolute() else root.resolve() / path
    if named.is_symlink():
        raise ToolArgumentsError(f"{path!r} is a symbolic link; refusing to replace it")
    relative = target.relative_to(root.resolve())
    if not relative.parts:
        raise ToolArgumentsError(f"{path!r} is the workspace folder, not a file")
    if _PROTECTED.intersection(relative.parts):
        raise ToolArgumentsError(f"{path!r} is inside a protected folder")
    if target.is_dir():
        raise ToolArgumentsError(f"{path!r} is a folder")
    return target


def edit_tools(workspace: str | Path = ".", *, max_bytes: int = 1_000_000) -> list[Tool]:
    """Build ``write_file`` and ``edit_file`` confined to ``workspace``.

    Args:
        workspace: The folder the tools may change.
        max_bytes: Largest file either tool writes.
    """
    root = Path(workspace)

    @tool(idempotent=True, modifies_files=True, timeout=10.0, read_only=False)
    def write_file(path: str, content: str) -> str:
        """Create or overwrite a UTF-8 text file inside the workspace.

        Args:
            path: File path relative to the workspace; missing folders are created.
            content: The complete new content of the file.
        """
        target = _target(root, path)
        size = len(content.encode("utf-8"))
        if size > max_bytes:
            raise ToolArgumentsError(f"content is {size} bytes; the limit is {max_bytes}")
        replace_file(root, target, content.encode("utf-8"))
        return f"wrote {size} bytes to {path}"

    @tool(modifies_files=True, timeout=10.0, read_only=False)
    def edit_file(path: str, old_text: str, new_text: str, replace_all: bool = False) -> str:
        """Replace exact text in a UTF-8 file inside the workspace.

        Args:
            path: File path relative to the workspace.
            old_text: Text to find; it must occur exactly once unless replace_all is true.
            new_text: Replacement text.
            replace_all: Replace every occurrence instead of exactly one.
        """
        target = _target(root, path)
        if not target.is_file():
            raise ToolArgumentsError(f"no such file: {path}")
        if not old_text:
            raise ToolArgumentsError("old_text must not be empty")
        text = target.read_text(encoding="utf-8")
        found = text.count(old_text)
        if found == 0:
            raise ToolArgumentsError(f"old_text not found in {path}")
        if found > 1 and not replace_all:
            raise ToolArgumentsError(
                f"ambiguous: old_text occurs {found} times in {path}; add context or set "
                "replace_all"
            )
        updated = text.replace(old_text, new_text)
        if len(updated.encode("utf-8")) > max_bytes:
            raise ToolArgumentsError(f"the edited file would exceed {max_bytes} bytes")
        replace_file(root, target, updated.encode("utf-8"))
        return f"replaced {found} occurrence(s) in {path}"

    return [write_file, edit_file]
