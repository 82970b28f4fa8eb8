from __future__ import annotations

from pathlib import Path

import pytest

from convergent import ToolArgumentsError
from convergent.edit_tools import edit_tools


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, object]:
    return {t.name: t for t in edit_tools(tmp_path / "ws", max_bytes=100)}


@pytest.fixture(autouse=True)
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


async def test_write_then_edit(tools: dict, workspace: Path) -> None:
    assert await tools["write_file"].call({"path": "d/x.txt", "content": "a b a"}) == (
        "wrote 5 bytes to d/x.txt"
    )
    assert (workspace / "d" / "x.txt").read_text() == "a b a"
    with pytest.raises(ToolArgumentsError, match="ambiguous: old_text occurs 2 times"):
        await tools["edit_file"].call({"path": "d/x.txt", "old_text": "a", "new_text": "c"})
    await tools["edit_file"].call({"path": "d/x.txt", "old_text": "b", "new_text": "B"})
    await tools["edit_file"].call(
        {"path": "d/x.txt", "old_text": "a", "new_text": "z", "replace_all": True}
    )
    assert (workspace / "d" / "x.txt").read_text() == "z B z"
    with pytest.raises(ToolArgumentsError, match="not found"):
        await tools["edit_file"].call({"path": "d/x.txt", "old_text": "q", "new_text": "c"})


@pytest.mark.parametrize(
    "path", ["../escape.txt", "/etc/passwd", ".git/config", ".convergent/x", "."]
)
async def test_paths_outside_or_protected_are_refused(
    tools: dict, workspace: Path, tmp_path: Path, path: str
) -> None:
    with pytest.raises(ToolArgumentsError):
        await tools["write_file"].call({"path": path, "content": "x"})
    assert not (tmp_path / "escape.txt").exists()


async def test_symlink_out_of_the_workspace_is_refused(
    tools: dict, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (workspace / "link.txt").symlink_to(outside)
    with pytest.raises(ToolArgumentsError, match="outside the workspace"):
        await tools["write_file"].call({"path": "link.txt", "content": "x"})
    assert outside.read_text() == "keep"


async def test_size_limit_and_flags(tools: dict) -> None:
    with pytest.raises(ToolArgumentsError, match="limit is 100"):
        await tools["write_file"].call({"path": "big.txt", "content": "x" * 101})
    assert tools["write_file"].modifies_files and tools["edit_file"].modifies_files
    assert tools["write_file"].idempotent and not tools["edit_file"].idempotent


async def test_a_link_planted_at_the_old_temporary_name_is_never_written_through(
    tools: dict, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    (workspace / ".a.txt.convergent-tmp").symlink_to(outside)
    await tools["write_file"].call({"path": "a.txt", "content": "inside"})
    await tools["edit_file"].call({"path": "a.txt", "old_text": "inside", "new_text": "edited"})
    assert outside.read_text() == "untouched"
    assert (workspace / "a.txt").read_text() == "edited"
    assert leftovers(workspace) == [".a.txt.convergent-tmp"]


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if "convergent-tmp" in p.name]


async def test_a_file_that_is_a_link_inside_the_workspace_is_not_replaced(
    tools: dict, workspace: Path
) -> None:
    (workspace / "real.txt").write_text("real")
    (workspace / "link.txt").symlink_to(workspace / "real.txt")
    with pytest.raises(ToolArgumentsError, match="symbolic link"):
        await tools["write_file"].call({"path": "link.txt", "content": "x"})
    assert (workspace / "link.txt").is_symlink() and (workspace / "real.txt").read_text() == "real"


async def test_a_written_file_keeps_its_permissions(tools: dict, workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o755)
    await tools["edit_file"].call({"path": "run.sh", "old_text": "1", "new_text": "2"})
    assert script.stat().st_mode & 0o777 == 0o755
