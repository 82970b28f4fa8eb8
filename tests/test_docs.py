"""Every Python block in the README and docs runs as written.

A block that cannot run here (it needs an API key, a server or a file on the user's
machine) says why in a ``<!-- not-run: REASON -->`` line right above it; it must
still compile.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
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


_RUNNER = """
import json, os, signal, sys, traceback
import convergent.agent  # loaded once, before any block; each block runs in a fork
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.chdir(job["cwd"])
        output = os.open(job["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(output, 1)
        os.dup2(output, 2)
        signal.alarm(job["timeout"])
        sys.argv = ["-c"]
        try:
            exec(compile(job["code"], "<string>", "exec"), {"__name__": "__main__"})
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            raise SystemExit(1)
        raise SystemExit(0)  # ends the child as an interpreter ends: threads, atexit, flush
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""
"""Runs each block as ``python -c BLOCK`` would, in a fork of a process that has
imported convergent already: a fresh interpreter for every block without paying for its
start and imports each time. The process has no threads, so forking it is safe."""


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", _RUNNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path_factory.mktemp("runner"),
    ) as process:
        yield process
        assert process.stdin is not None
        process.stdin.close()  # the runner ends with its input
        process.wait(timeout=30)


def run_block(runner: subprocess.Popen[str], code: str, folder: Path) -> tuple[int, str]:
    """The exit code and the output (standard output and error) of ``code`` run in ``folder``."""
    assert runner.stdin is not None and runner.stdout is not None
    output = folder.parent / f"{folder.name}.output"
    job = {"code": code, "cwd": str(folder), "output": str(output), "timeout": 120}
    runner.stdin.write(json.dumps(job) + "\n")
    runner.stdin.flush()
    code_line = runner.stdout.readline()
    assert code_line, "the block runner ended"
    return int(code_line), output.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize(("where", "code", "reason"), _params())
def test_block_runs_as_written(
    where: str, code: str, reason: str | None, tmp_path: Path, runner: subprocess.Popen[str]
) -> None:
    compile(code, where, "exec")  # every block is valid Python, top-level await included
    if reason is not None:
        assert reason, f"{where}: say why the block cannot run"
        pytest.skip(f"not run: {reason}")
    returncode, output = run_block(runner, code, tmp_path)
    assert returncode == 0, f"{where} failed:\n{output[-2000:]}"


def test_the_runner_runs_a_block_as_a_fresh_interpreter_would(
    tmp_path: Path, runner: subprocess.Popen[str]
) -> None:
    """In the block's folder, as ``__main__``, with its exit code, its output, a traceback
    for an error, and its ``atexit`` functions run; nothing it does reaches the next block."""
    block = (
        "import atexit, os, sys\n"
        "atexit.register(print, 'at exit')\n"
        "print(os.getcwd(), __name__, sys.argv)\n"
        "import convergent\n"
        "convergent.LEFT_BEHIND = 1\n"
        "sys.exit(3)\n"
    )
    assert run_block(runner, block, tmp_path) == (3, f"{tmp_path} __main__ ['-c']\nat exit\n")
    again = "import convergent\nprint(hasattr(convergent, 'LEFT_BEHIND'))\n1 / 0\n"
    returncode, output = run_block(runner, again, tmp_path)
    assert returncode == 1
    assert output.startswith("False\nTraceback") and output.endswith(
        "ZeroDivisionError: division by zero\n"
    )


def test_the_versions_the_docs_give_are_the_codes() -> None:
    from convergent.durability.sqlite import DB_SCHEMA_VERSION
    from convergent.spec import SPEC_VERSION
    from convergent.state import STATE_SCHEMA_VERSION

    text = " ".join((ROOT / "docs" / "durable-runs.md").read_text(encoding="utf-8").split())
    assert f"`DB_SCHEMA_VERSION`, now {DB_SCHEMA_VERSION}" in text
    assert f"`STATE_SCHEMA_VERSION` ({STATE_SCHEMA_VERSION})" in text
    assert f"`SPEC_VERSION` ({SPEC_VERSION})" in text
