"""The harness itself: the real CLI talks to the fake, and nothing else gets out."""

from __future__ import annotations

import json

import httpx
import psutil
import pytest

from .claude_cli import ClaudeCode, LeftoverProcesses, UnexpectedTraffic, expected_version
from .fake_anthropic import FakeAnthropic, MessagesRequest, OutboundTrap, Reply, text, tool_use

# --- the fake on its own (fast) ----------------------------------------------------------


def test_the_fake_streams_text_and_tool_use_as_the_messages_api_does() -> None:
    script = [tool_use("Bash", {"command": "echo hi"}, say="Let me look.")]
    with (
        FakeAnthropic(script) as fake,
        httpx.stream(
            "POST", f"{fake.url}/v1/messages", json={"model": "m", "stream": True, "messages": []}
        ) as response,
    ):
        body = response.read().decode()
    events = [
        line.removeprefix("event: ") for line in body.splitlines() if line.startswith("event")
    ]
    assert events == [
        "message_start",
        *["content_block_start", "content_block_delta", "content_block_stop"],
        *[
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
        ],
        "message_delta",
        "message_stop",
    ]
    data = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
    pieces = [
        d["delta"]["partial_json"]
        for d in data
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    ]
    assert json.loads("".join(pieces)) == {"command": "echo hi"}
    assert data[-2]["delta"]["stop_reason"] == "tool_use"
    assert fake.problems == []


def test_the_fake_answers_without_streaming_and_records_the_request() -> None:
    def script(request: MessagesRequest) -> Reply:
        return text(f"you said {request.last_user_texts[-1]}")

    with FakeAnthropic(script) as fake:
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        reply = httpx.post(f"{fake.url}/v1/messages", json=body).json()
        tokens = httpx.post(f"{fake.url}/v1/messages/count_tokens", json=body).json()
    assert reply["content"] == [{"type": "text", "text": "you said hello"}]
    assert reply["stop_reason"] == "end_turn"
    assert tokens == {"input_tokens": 100}
    assert [r.body for r in fake.requests] == [body]
    assert fake.other_requests == ["POST /v1/messages/count_tokens"]


def test_the_fake_reports_what_it_could_not_answer() -> None:
    with FakeAnthropic([text("only one")]) as fake:
        body = {"model": "m", "messages": []}
        first = httpx.post(f"{fake.url}/v1/messages", json=body)
        second = httpx.post(f"{fake.url}/v1/messages", json=body)
        elsewhere = httpx.get(f"{fake.url}/v1/files")
    assert first.status_code == 200
    assert second.status_code == 400 and elsewhere.status_code == 404
    assert fake.problems == [
        "request 2: past the end of the script (1 replies)",
        "GET /v1/files: not served by the fake",
    ]


def test_the_trap_records_and_forwards_nothing() -> None:
    with OutboundTrap() as trap, httpx.Client(proxy=trap.url) as client:
        response = client.get("http://example.com/")
    assert response.status_code == 403
    assert trap.attempts == ["GET http://example.com/ HTTP/1.1"]


# --- the real CLI ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.claude_code
def test_the_cli_runs_a_tool_and_sends_its_result_back(claude_code: ClaudeCode) -> None:
    script = [
        tool_use("Bash", {"command": "echo made > made.txt && cat made.txt", "description": "x"}),
        text("The file says made."),
    ]
    with FakeAnthropic(script) as fake, OutboundTrap() as trap:
        session = claude_code.run("make the file", fake, trap, args=("--allowedTools", "Bash"))
    assert (claude_code.project / "made.txt").read_text() == "made\n"
    assert fake.problems == [] and fake.unconsumed() == 0
    assert fake.requests[0].last_user_texts[-1] == "make the file"
    assert "made" in fake.requests[1].last_user_texts
    assert session.result["result"] == "The file says made."
    assert session.result["terminal_reason"] == "completed"
    # the pinned version with .ci/run's install; another CLI (the SDK's) is the one it says
    assert session.events[0]["claude_code_version"] == expected_version(claude_code.binary)


@pytest.mark.slow
@pytest.mark.claude_code
def test_traffic_to_anywhere_but_the_fake_fails_the_run(claude_code: ClaudeCode) -> None:
    # with nonessential traffic allowed the CLI calls home; the trap catches it
    with FakeAnthropic([text("hi")]) as fake, OutboundTrap() as trap:
        with pytest.raises(UnexpectedTraffic, match="api.anthropic.com"):
            claude_code.run(
                "hello", fake, trap, env={"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": ""}
            )


@pytest.mark.slow
@pytest.mark.claude_code
def test_a_process_left_behind_fails_the_run_and_is_killed(claude_code: ClaudeCode) -> None:
    # one keeps the run's environment, the other drops it (and is found by its folder)
    command = (
        "setsid sleep 300 > /dev/null 2>&1 < /dev/null & "
        "env -i setsid sleep 301 > /dev/null 2>&1 < /dev/null &"
    )
    script = [tool_use("Bash", {"command": command, "description": "x"}), text("started")]
    with FakeAnthropic(script) as fake, OutboundTrap() as trap:
        with pytest.raises(LeftoverProcesses) as caught:
            claude_code.run("start it", fake, trap, args=("--allowedTools", "Bash"))
    assert sorted(caught.value.processes.values()) == ["sleep 300", "sleep 301"]
    for pid in caught.value.processes:
        assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
