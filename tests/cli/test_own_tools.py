"""``convergent run --tool MODULE:ATTR``: your own tools, kept in the agent spec for resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from convergent.testing import call, write_script

from .test_runs import cli

TOOLS = '''
from convergent import tool


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper() + "!"


@tool
def whisper(text: str) -> str:
    """Lower-case the text."""
    return text.lower()


NOT_A_TOOL = 3
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "mytools.py").write_text(TOOLS)
    return tmp_path


def test_a_tool_from_the_current_folder_is_offered_and_kept_for_resume(project: Path) -> None:
    first = write_script(project / "a.json", call("shout", text="hey"))
    proc = cli("run", "shout", "--model", first, "--run-id", "r", "--max-cycles", "1",
               "--tool", "mytools:shout", "--tool", "mytools:whisper", "--json",
               cwd=project)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert [(c["name"], c["result"]) for c in data["tool_calls"]] == [("shout", "HEY!")]
    whisper = call("whisper", text="QUIET")
    second = write_script(project / "b.json", call("shout", text="again"), whisper, "done")
    resumed = cli("resume", "r", "--model", second, "--more-cycles", "5", "--json", cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    results = [c["result"] for c in json.loads(resumed.stdout)["tool_calls"]]
    assert results == ["HEY!", "AGAIN!", "quiet"]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("mytools", "error: --tool must be package.module:attribute, got 'mytools'"),
        ("nosuch:thing", "error: cannot import tool 'nosuch:thing': No module named 'nosuch'"),
        ("mytools:missing", "error: cannot import tool 'mytools:missing': "
                            "module 'mytools' has no attribute 'missing'"),
        ("mytools:NOT_A_TOOL",
         "error: tool 'mytools:NOT_A_TOOL' is not a Tool, a list of tools or a function"),
    ],
)  # fmt: skip
def test_a_bad_tool_path_is_one_line_and_exit_2(project: Path, path: str, message: str) -> None:
    proc = cli("run", "x", "--model", write_script(project / "s.json", "hi"), "--run-id", "bad",
               "--tool", path, cwd=project)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == message
    assert proc.stdout == ""


def test_beside_your_own_tools_the_general_builtins_step_back(project: Path) -> None:
    script = write_script(project / "s.json", call("calculator", expression="6 * 7"),
                          call("ask_user", question="which?"), "done")  # fmt: skip
    own = ("--tool", "mytools:shout", "--ask-via", "none", "--json")
    proc = cli("run", "x", "--model", script, "--run-id", "own", *own, cwd=project)
    outcomes = [(c["name"], c["outcome"]) for c in json.loads(proc.stdout)["tool_calls"]]
    # no calculator beside the user's tool; ask_user stays (it stops the run: no one to ask)
    assert outcomes[0] == ("calculator", "invalid")
    assert json.loads(proc.stdout)["stop_reason"] == "needs_user"
    back = cli("run", "x", "--model", script, "--run-id", "all", *own, "--builtin-tools",
               cwd=project)  # fmt: skip
    assert [c["outcome"] for c in json.loads(back.stdout)["tool_calls"]][0] == "ok"
