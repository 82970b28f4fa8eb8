"""``convergent replay`` on the session transcripts the real Claude Code CLI writes.

The pinned CLI runs two prompts of one session against the fake Messages API: the first
turn tries the same failing ``Bash`` command four times, reads a file and answers; the
second answers at once. The transcript it leaves under its config folder is then read
and replayed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import invoke
from convergent.replay import Trajectory, detect_format, read_runs

from .claude_cli import ClaudeCode
from .fake_anthropic import FakeAnthropic, MessagesRequest, OutboundTrap, Reply, text, tool_use

pytestmark = [pytest.mark.slow, pytest.mark.claude_code]

_PLAN = [
    *[tool_use("Bash", {"command": "cat missing.txt", "description": "read it"}) for _ in range(4)],
    tool_use("Read", {"file_path": "/nonexistent/notes.txt"}),
    text("The file is missing."),
]


def _script(request: MessagesRequest) -> Reply:
    if "Bash" not in request.tool_names:  # Claude Code's own side requests (titles...)
        return text("ok")
    results = sum(
        1
        for message in request.messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    )
    if request.last_user_texts == ["And once more?"]:
        return text("Still missing.")
    return _PLAN[min(results, len(_PLAN) - 1)]


def test_a_real_session_transcript_is_read_and_replayed(claude_code: ClaudeCode) -> None:
    args = ("--allowedTools", "Bash,Read")
    with FakeAnthropic(_script) as fake, OutboundTrap() as trap:
        first = claude_code.run("Please read missing.txt", fake, trap, args=args)
        second = claude_code.run("And once more?", fake, trap, args=("--continue", *args))
        assert fake.problems == []
    assert first.returncode == second.returncode == 0
    (transcript,) = (claude_code.home / ".claude" / "projects").rglob("*.jsonl")
    assert detect_format(transcript) == "claude-code"
    (run,) = list(read_runs([transcript]))
    assert isinstance(run, Trajectory)
    assert run.name == first.result["session_id"] == transcript.stem
    assert len(run.turns) == 2
    calls = [(c.name, c.failed) for reply in run.turns[0] for c in reply.calls]
    assert calls == [("Bash", True)] * 4 + [("Read", True)]
    assert run.turns[0][-1].content == "The file is missing."
    assert [reply.content for reply in run.turns[1]] == ["Still missing."]
    assert all(reply.usage is not None for turn in run.turns for reply in turn)

    # the same failing command four times is a real loop, and the loop stops it
    done = invoke("replay", str(claude_code.home), "--success-if", "^found", "--json")
    assert done.returncode == 0, done.stderr
    (corpus,) = json.loads(done.stdout)["report"]["corpora"]
    assert corpus["runs"] == {"successful": 0, "failed": 1, "unlabelled": 0}
    (stopped,) = corpus["stopped"]
    assert stopped["verdict"] == "failed, stopped" and stopped["loop"]["fate"] == "stopped"
    stop = stopped["stops"][0]
    assert stop["turn"] == 0 and stop["real_loop"] is True
    assert stop["repeat"]["name"] == "Bash" and stop["replies_left"] >= 1
    assert stop["tokens_left"] == 25 * stop["replies_left"]  # the fake's usage per reply


def test_a_folder_without_transcripts_says_what_it_expected(tmp_path: Path) -> None:
    (tmp_path / "projects").mkdir()
    done = invoke("replay", str(tmp_path), "--format", "claude-code")
    assert done.returncode == 2
    assert "no recorded runs found (expected claude-code)" in done.stderr
