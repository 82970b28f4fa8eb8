"""The rewind confirmation page lists the files the rewind would restore or delete."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.edit_tools import edit_tools  # noqa: E402
from convergent.testing import call, step  # noqa: E402
from convergent.ui.rewind import FileChange, plan_rewind  # noqa: E402

from .conftest import BASE, SCRIPT_XSS, make_run, post  # noqa: E402


def edited_run(store: RunStore, workspace: Path, run_id: str = "files") -> None:
    """A run whose cycle 1 writes notes.txt, cycle 2 rewrites it and creates new.txt."""
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("before\n")
    make_run(
        store,
        run_id,
        [
            step(call("write_file", path="notes.txt", content="cycle 1\n")),
            step(
                call("write_file", path="notes.txt", content="cycle 2\n"),
                call("write_file", path=f"{SCRIPT_XSS}.txt", content="new\n"),
            ),
            "done",
        ],
        tools=edit_tools(workspace),
        workspace=str(workspace),
    )


def test_the_plan_names_each_file_and_what_becomes_of_it(store: RunStore, tmp_path: Path) -> None:
    edited_run(store, tmp_path / "ws")
    plan = plan_rewind(store, "files", 1)
    assert plan.files == [
        FileChange(f"{SCRIPT_XSS}.txt", "deleted"),
        FileChange("notes.txt", "restored"),
    ]
    assert plan.more == 0
    # to cycle 0 notes.txt gets its content from before the run (still one entry)
    assert plan_rewind(store, "files", 0).files[1] == FileChange("notes.txt", "restored")
    assert plan_rewind(store, "files", 2).files == []
    # the plan is what the rewind then does
    result = store.rewind("files", 1)
    assert result.restored == ("notes.txt",) and result.deleted == (f"{SCRIPT_XSS}.txt",)
    assert (tmp_path / "ws" / "notes.txt").read_text() == "cycle 1\n"


def test_files_that_cannot_be_restored_say_why(store: RunStore, tmp_path: Path) -> None:
    edited_run(store, tmp_path / "ws")
    with store.transaction() as conn:  # as if the file had been too large to keep
        conn.execute("UPDATE snapshots SET hash = NULL WHERE path = 'notes.txt'")
    (notes,) = [f for f in plan_rewind(store, "files", 1).files if f.path == "notes.txt"]
    assert notes == FileChange("notes.txt", "skipped", "it was too large to keep a copy")
    with store.transaction() as conn:
        conn.execute("UPDATE runs SET workspace = NULL")
    assert {f.why for f in plan_rewind(store, "files", 1).files} == {
        "the run recorded no workspace"
    }


def test_the_confirmation_page_lists_the_files_escaped(
    store: RunStore, client: TestClient, tmp_path: Path
) -> None:
    edited_run(store, tmp_path / "ws")
    page = client.get(f"{BASE}/runs/files/rewind?cycle=1").text
    assert "<code>notes.txt</code></td><td>restored to its content at the end of cycle 1" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.txt</code></td><td>deleted" in page
    assert SCRIPT_XSS not in page
    later = client.get(f"{BASE}/runs/files/rewind?cycle=2").text
    assert "no file is touched" in later
    assert post(client, f"{BASE}/runs/files/rewind", cycle="1").status_code == 303
    assert not (tmp_path / "ws" / f"{SCRIPT_XSS}.txt").exists()
