"""Every Python block in the README and docs runs as written.

A block that cannot run here (it needs an API key, a server or a file on the user's
machine) says why in a ``<!-- not-run: REASON -->`` line right above it; it must
still compile.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(?:<!--\s*not-run:(?P<reason>[^>]*)-->\s*\n)?```python\n(?P<code>.*?)```", re.S
)


def _blocks() -> list[tuple[str, str, str | None]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("code"))
            reason = match.group("reason")
            where = f"{page.relative_to(ROOT)}:{line}"
            found.append((where, match.group("code"), None if reason is None else reason.strip()))
    return found


BLOCKS = _blocks()


def test_the_pages_have_python_blocks() -> None:
    assert len(BLOCKS) >= 10
    assert sum(reason is None for _, _, reason in BLOCKS) >= 8


def _params() -> list[Any]:
    """One case per block; a block that starts MCP servers (processes of their own) or
    loads another framework (an adapter's host) is slow."""
    heavy = ("MCPServer", "convergent.adapters")
    return [
        pytest.param(
            *block,
            id=block[0],
            marks=[pytest.mark.slow] if any(word in block[1] for word in heavy) else [],
        )
        for block in BLOCKS
    ]


@pytest.mark.parametrize(("where", "code", "reason"), _params())
def test_block_runs_as_written(where: str, code: str, reason: str | None, tmp_path: Path) -> None:
    compile(code, where, "exec")  # every block is valid Python, top-level await included
    if reason is not None:
        assert reason, f"{where}: say why the block cannot run"
        pytest.skip(f"not run: {reason}")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-2000:]}"


def test_the_versions_the_docs_give_are_the_codes() -> None:
    from convergent.durability.sqlite._schema import DB_SCHEMA_VERSION
    from convergent.spec import SPEC_VERSION
    from convergent.state import STATE_SCHEMA_VERSION

    text = " ".join((ROOT / "docs" / "durable-runs.md").read_text(encoding="utf-8").split())
    assert f"`DB_SCHEMA_VERSION`, now {DB_SCHEMA_VERSION}" in text
    assert f"`STATE_SCHEMA_VERSION` ({STATE_SCHEMA_VERSION})" in text
    assert f"`SPEC_VERSION` ({SPEC_VERSION})" in text
