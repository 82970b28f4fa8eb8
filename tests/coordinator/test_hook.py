from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from convergent.coordinator import (
    ArtifactCheck,
    CheckResult,
    HookEvent,
    StateStore,
    WorkflowStatus,
    answer_hook,
    observe_iteration,
    record_failure,
    request_redirect,
    request_stop,
)
from convergent.coordinator.hook import (
    CLAUDE_CODE_BLOCK_CAP,
    HookInput,
    claude_code_block_cap,
    decide_hook,
)
from convergent.stop import StopReason

from .conftest import make_state

SAFETY_TIMEOUT = 60  # seconds; a safety net against hangs, not a timing assertion


def stop_payload(cwd: Path, *, active: bool = False) -> dict[str, Any]:
    """Shaped like Claude Code's documented Stop hook input."""
    return {
        "session_id": "abc123",
        "transcript_path": "/home/dev/.claude/projects/demo/abc123.jsonl",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": active,
        "last_assistant_message": "I'm confident everything is done.",
    }


def subagent_payload(cwd: Path, *, active: bool = False) -> dict[str, Any]:
    """Shaped like Claude Code's documented SubagentStop hook input."""
    return {
        **stop_payload(cwd, active=active),
        "hook_event_name": "SubagentStop",
        "agent_id": "a7f3c2e1",
        "agent_type": "general-purpose",
        "agent_transcript_path": "/home/dev/.claude/projects/demo/abc123/subagents/a7f3.jsonl",
    }


def run_hook(
    exe: str, event: str, stdin: str, *args: str, cwd: Path
) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [exe, "hook", event, *args],
        input=stdin.encode(),
        capture_output=True,
        cwd=cwd,
        timeout=SAFETY_TIMEOUT,
        check=False,
    )
    stdout = proc.stdout.decode()
    assert stdout.endswith("\n") and stdout.count("\n") == 1, stdout
    return proc.returncode, json.loads(stdout), proc.stderr.decode()


def _allowed(output: dict[str, Any]) -> bool:
    return "decision" not in output and output.get("continue", True) is True


# --- the installed command, fed real payloads -------------------------------------------


def test_stop_blocks_while_work_is_unresolved(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(2, 1, checks=[ArtifactCheck(name="bundle", path="dist/app.js")]))
    payload = json.dumps(stop_payload(tmp_path))
    code, output, _ = run_hook(convergent_exe, "stop", payload, cwd=tmp_path)
    assert code == 0
    assert output["decision"] == "block"
    reason = output["reason"]
    assert reason.startswith("convergent: the work is not done (iteration 1 of 20; 2 unresolved")
    assert "- p0 [pending] pending 0 (ready)" in reason
    assert "- p1 [pending] pending 1 (ready)" in reason
    assert "Base case not verified yet (checks: bundle)" in reason
    state = store.load()
    assert state.control.iteration == 1
    assert state.control.pending_history == [2]
    assert state.control.hook.consecutive_blocks == 1


def test_subagent_stop_blocks_with_strategy_advice(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    state = make_state(2, max_stall_count=5)
    observe_iteration(state)
    record_failure(state, atom_id="p0", command="npm test", error="1 failing")
    record_failure(state, atom_id="p0", command="npm test", error="1 failing")
    store.create(state)
    payload = json.dumps(subagent_payload(tmp_path))
    code, output, _ = run_hook(convergent_exe, "subagent-stop", payload, cwd=tmp_path)
    assert code == 0
    assert output["decision"] == "block"
    assert "last iteration: stall; stall 1 of 5" in output["reason"]
    assert "Strategy:\n- different_approach: atom p0 failed 2 times" in output["reason"]
    assert "\n- different_approach: `npm test` failed 2 times" in output["reason"]
    assert store.load().control.stall_count == 1


def test_completed_base_case_lets_the_agent_stop(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    state = make_state(1)
    state.control.status = WorkflowStatus.COMPLETED
    store.create(state)
    code, output, _ = run_hook(
        convergent_exe, "subagent-stop", json.dumps(subagent_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert _allowed(output)
    assert output["systemMessage"].startswith("convergent: base case satisfied")
    assert store.load().control.iteration == 0


@pytest.mark.parametrize("active", [False, True], ids=["new stop", "stop_hook_active"])
def test_verify_option_runs_checks_and_completes(
    convergent_exe: str, store: StateStore, tmp_path: Path, active: bool
) -> None:
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "app.js").write_text("//")
    store.create(make_state(1, checks=[ArtifactCheck(name="bundle", path="dist/app.js")]))
    payload = json.dumps(stop_payload(tmp_path, active=active))
    code, output, _ = run_hook(convergent_exe, "stop", payload, "--verify", cwd=tmp_path)
    assert code == 0
    assert output == {"systemMessage": "convergent: base case satisfied (1 check(s) passed)"}
    state = store.load()
    assert state.control.status is WorkflowStatus.COMPLETED
    assert state.control.stop_reason is StopReason.COMPLETED
    assert state.base_case.last_results[0].matches == [str(tmp_path / "dist" / "app.js")]
    assert state.control.iteration == 0  # completion is no iteration of work


def test_stall_stops_the_work(convergent_exe: str, store: StateStore, tmp_path: Path) -> None:
    state = make_state(2, max_stall_count=1)
    observe_iteration(state)
    store.create(state)
    code, output, _ = run_hook(
        convergent_exe, "stop", json.dumps(stop_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert output["continue"] is False
    assert output["stopReason"].startswith(
        "convergent stopped the work (stalled): max_stall_count exceeded: "
        "stall_count 1 >= max_stall_count 1."
    )
    assert "Unresolved: p0, p1." in output["stopReason"]
    saved = store.load().control
    assert (saved.status, saved.stop_reason) == (WorkflowStatus.STOPPED, StopReason.STALLED)
    assert saved.stop_detail == "max_stall_count exceeded: stall_count 1 >= max_stall_count 1"


def test_iteration_limit_stops_the_work(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(1, max_iterations=1))
    code, output, _ = run_hook(
        convergent_exe, "stop", json.dumps(stop_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert output["continue"] is False
    assert (
        "(max_cycles): max_iterations reached: iteration 1 >= max_iterations 1"
        in (output["stopReason"])
    )
    assert store.load().control.stop_reason is StopReason.MAX_CYCLES


def test_stop_request_stops_the_work(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    state = make_state(3)
    request_stop(state, "out of time")
    store.create(state)
    code, output, _ = run_hook(
        convergent_exe, "subagent-stop", json.dumps(subagent_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert output == {
        "continue": False,
        "stopReason": "convergent stopped the work (stopped): stop requested: out of time. "
        "Unresolved: p0, p1, p2.",
    }
    assert store.load().control.status is WorkflowStatus.STOPPED


def test_redirect_allows_the_stop_without_ending_the_work(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    state = make_state(3)
    request_redirect(state, "new requirements")
    store.create(state)
    code, output, _ = run_hook(
        convergent_exe, "stop", json.dumps(stop_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert _allowed(output)
    assert "redirect in progress (new requirements)" in output["systemMessage"]
    saved = store.load().control
    assert saved.status is WorkflowStatus.RUNNING
    assert saved.iteration == 0


def test_stop_hook_active_allows_and_leaves_state_alone(
    convergent_exe: str, store: StateStore, state_path: Path, tmp_path: Path
) -> None:
    store.create(make_state(3))
    before = state_path.read_bytes()
    payload = json.dumps(stop_payload(tmp_path, active=True))
    code, output, stderr = run_hook(convergent_exe, "stop", payload, cwd=tmp_path)
    assert code == 0
    assert output == {}
    assert "stop_hook_active is true; allowing the stop" in stderr
    assert state_path.read_bytes() == before


def test_opt_in_chained_blocks_are_capped(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    state = make_state(3, max_stall_count=10)
    state.control.hook.block_when_active = True
    state.control.hook.max_consecutive_blocks = 2
    store.create(state)
    first = json.dumps(stop_payload(tmp_path))
    chained = json.dumps(stop_payload(tmp_path, active=True))
    answers = [
        run_hook(convergent_exe, "stop", text, cwd=tmp_path)[1]
        for text in (first, chained, chained)
    ]
    assert [a.get("decision") for a in answers] == ["block", "block", None]
    assert "after 2 consecutive blocks" in answers[2]["systemMessage"]
    saved = store.load().control
    assert saved.iteration == 2
    assert saved.hook.consecutive_blocks == 0


@pytest.mark.parametrize(
    ("stdin", "problem"),
    [
        ("{not json", "stdin is not valid JSON"),
        ("", "empty input on stdin"),
        ("   \n", "empty input on stdin"),
        ("[1, 2]", "stdin JSON is a list, expected an object"),
        ('{"stop_hook_active": "very"}', "stdin JSON field 'stop_hook_active' has the wrong type"),
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "stdin is nested too deeply"),
        ("[" * 100_000 + "]" * 100_000, "stdin is nested too deeply"),
    ],
)
def test_unusable_stdin_allows_the_stop(
    convergent_exe: str,
    store: StateStore,
    state_path: Path,
    tmp_path: Path,
    stdin: str,
    problem: str,
) -> None:
    store.create(make_state(3))
    before = state_path.read_bytes()
    code, output, stderr = run_hook(convergent_exe, "stop", stdin, cwd=tmp_path)
    assert code == 0
    assert _allowed(output)
    assert problem in output["systemMessage"]
    assert f"convergent hook: {problem}" in stderr and "allowing the stop" in stderr
    assert "Traceback" not in stderr
    assert state_path.read_bytes() == before


@pytest.mark.slow
def test_stdin_left_open_is_answered_after_the_read_deadline(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(3))
    proc = subprocess.Popen(
        [convergent_exe, "hook", "stop"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(json.dumps(stop_payload(tmp_path)).encode())
        proc.stdin.flush()
        code = proc.wait(timeout=SAFETY_TIMEOUT)  # the pipe is still open
        output = json.loads(proc.stdout.read())
        stderr = proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()
    assert code == 0
    assert output["decision"] == "block"
    assert "stdin still open after 3s" in stderr


def test_missing_state_file_allows_the_stop_quietly(convergent_exe: str, tmp_path: Path) -> None:
    code, output, stderr = run_hook(
        convergent_exe, "stop", json.dumps(stop_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert output == {}
    assert f"no state file at {tmp_path / 'workflow-state.yaml'}; allowing the stop" in stderr
    assert not (tmp_path / "workflow-state.yaml").exists()


def test_corrupt_state_file_allows_the_stop_and_is_kept(
    convergent_exe: str, state_path: Path, tmp_path: Path
) -> None:
    state_path.write_text("control: [broken\n")
    code, output, stderr = run_hook(
        convergent_exe, "subagent-stop", json.dumps(subagent_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert _allowed(output)
    assert "state file unusable" in output["systemMessage"]
    assert "not valid YAML" in stderr
    assert state_path.read_text() == "control: [broken\n"


def test_state_option_is_relative_to_the_session_cwd(convergent_exe: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    StateStore(project / "plans" / "wf.yaml").create(make_state(1))
    payload = json.dumps(stop_payload(project))
    code, output, _ = run_hook(
        convergent_exe, "stop", payload, "--state", "plans/wf.yaml", cwd=tmp_path
    )
    assert code == 0
    assert output["decision"] == "block"
    assert StateStore(project / "plans" / "wf.yaml").load().control.iteration == 1


def test_unknown_options_are_ignored_not_fatal(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(1))
    code, output, stderr = run_hook(
        convergent_exe, "stop", json.dumps(stop_payload(tmp_path)), "--frobnicate", cwd=tmp_path
    )
    assert code == 0
    assert output["decision"] == "block"
    assert "ignoring unexpected arguments ['--frobnicate']" in stderr


@pytest.mark.slow
def test_concurrent_invocations_lose_no_update(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(4, max_iterations=100, max_stall_count=100))
    payloads = [
        json.dumps(stop_payload(tmp_path)) if i % 2 else json.dumps(subagent_payload(tmp_path))
        for i in range(20)
    ]
    procs = []
    for i, payload in enumerate(payloads):
        # each gets its whole payload and end of input at once, as Claude Code sends it:
        # a pipe left open until the test reads the answers would run into the stdin
        # deadline on a busy machine
        read, write = os.pipe()
        os.write(write, payload.encode())
        os.close(write)
        procs.append(
            subprocess.Popen(
                [convergent_exe, "hook", "stop" if i % 2 else "subagent-stop"],
                stdin=read,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=tmp_path,
            )
        )
        os.close(read)
    iterations = []
    for proc in procs:
        out, err = proc.communicate(timeout=SAFETY_TIMEOUT * 2)
        assert proc.returncode == 0, err
        answer = json.loads(out)
        assert answer["decision"] == "block"
        iterations.append(int(answer["reason"].split("(iteration ")[1].split(" ")[0]))
    assert sorted(iterations) == list(range(1, 21))
    state = store.load()
    assert state.control.iteration == 20
    assert state.control.pending_history == [4] * 20
    assert state.control.stall_count == 19
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


# --- the same logic in-process ----------------------------------------------------------


def test_internal_error_degrades_to_allowing_the_stop(store: StateStore, tmp_path: Path) -> None:
    store.create(make_state(1, checks=[ArtifactCheck(name="a", path="x")]))

    def broken(_: StateStore) -> list[CheckResult]:
        raise RuntimeError("disk on fire")

    answer = answer_hook(
        HookEvent.STOP, json.dumps(stop_payload(tmp_path)), verify=True, verifier=broken
    )
    assert answer.action == "allow"
    assert answer.exit_code == 0
    assert answer.message == (
        "convergent hook: internal error (RuntimeError: disk on fire); allowing the stop"
    )
    assert store.load().control.iteration == 0


def test_event_name_mismatch_is_noted_but_answered(store: StateStore, tmp_path: Path) -> None:
    store.create(make_state(1))
    answer = answer_hook(HookEvent.SUBAGENT_STOP, json.dumps(stop_payload(tmp_path)))
    assert answer.action == "block"
    assert answer.message is not None
    assert "hook_event_name is 'Stop' but installed as SubagentStop" in answer.message


def test_unknown_payload_fields_are_tolerated(store: StateStore, tmp_path: Path) -> None:
    store.create(make_state(1))
    payload = {**stop_payload(tmp_path), "future_field": {"nested": True}}
    assert answer_hook(HookEvent.STOP, json.dumps(payload)).action == "block"


# --- hostile state files and stdin, through the real entry ------------------------------


def test_deeply_nested_yaml_allows_the_stop_instead_of_crashing(
    convergent_exe: str, state_path: Path, tmp_path: Path
) -> None:
    deep = "goal: " + "[" * 40_000 + "]" * 40_000 + "\n"
    state_path.write_text(deep)
    code, output, stderr = run_hook(
        convergent_exe, "stop", json.dumps(stop_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert _allowed(output)
    assert "nested too deeply (over 100 levels at line 1)" in output["systemMessage"]
    assert state_path.read_text() == deep


def test_a_symlinked_state_file_is_not_read(convergent_exe: str, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere" / "credentials"
    secret.parent.mkdir()
    secret.write_text("s3cr3t-token-value:\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "workflow-state.yaml").symlink_to(secret)
    code, output, stderr = run_hook(
        convergent_exe, "stop", json.dumps(stop_payload(project)), cwd=project
    )
    assert code == 0
    assert _allowed(output)
    assert "is a symbolic link" in output["systemMessage"]
    assert "s3cr3t" not in json.dumps(output) + stderr


def test_a_huge_goal_is_not_echoed_in_full(
    convergent_exe: str, store: StateStore, state_path: Path, tmp_path: Path
) -> None:
    state = make_state(2)
    state.goal = "g" * 3_000_000
    store.create(state)
    code, output, stderr = run_hook(
        convergent_exe, "stop", json.dumps(stop_payload(tmp_path)), cwd=tmp_path
    )
    assert code == 0
    assert output["decision"] == "block"
    reason = output["reason"]
    assert len(reason) <= 16_000
    assert f"Goal: {'g' * 1000}" in reason and "more characters)" in reason
    assert "- p0 [pending] pending 0 (ready)" in reason  # the rest of the answer is kept
    assert len(StateStore(state_path).load().goal) == 3_000_000


def test_stdin_from_dev_null_gets_a_json_answer(convergent_exe: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [convergent_exe, "hook", "stop"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=tmp_path,
        timeout=SAFETY_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {
        "systemMessage": "convergent: hook input unusable (empty input on stdin)"
    }
    assert proc.stderr.decode() == "convergent hook: empty input on stdin; allowing the stop\n"


def tool_payload(cwd: Path, tool: str = "Agent") -> dict[str, Any]:
    """Shaped like Claude Code's PostToolUse hook input after a subagent returned."""
    return {
        **stop_payload(cwd),
        "hook_event_name": "PostToolUse",
        "tool_name": tool,
        "tool_input": {"description": "port a module", "prompt": "port core"},
        "tool_response": {"status": "completed", "agentId": "a7f3c2e1"},
        "tool_use_id": "toolu_01",
    }


# --- Claude Code's own cap on consecutive blocks ----------------------------------------


@pytest.mark.parametrize(
    ("value", "cap"),
    [
        (None, CLAUDE_CODE_BLOCK_CAP),
        ("3", 3),
        (" 4", 4),
        ("3.5", 3),
        ("4abc", 4),
        ("abc", CLAUDE_CODE_BLOCK_CAP),
        ("", CLAUDE_CODE_BLOCK_CAP),
        ("0", None),
        ("-1", None),
    ],
)
def test_claude_codes_block_cap_is_read_as_claude_code_reads_it(
    value: str | None, cap: int | None
) -> None:
    environ = {} if value is None else {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": value}
    assert claude_code_block_cap(environ) == cap


def test_a_lower_claude_code_cap_ends_the_chain_before_an_undelivered_block() -> None:
    state = make_state(2, max_stall_count=50)
    state.control.hook.block_when_active = True
    state.control.hook.max_consecutive_blocks = 5
    first = HookInput(hook_event_name="Stop")
    chained = HookInput(hook_event_name="Stop", stop_hook_active=True)
    answers = [decide_hook(state, payload, claude_cap=2) for payload in (first, chained, chained)]
    assert [a.action for a in answers] == ["block", "block", "allow"]
    assert answers[2].output["systemMessage"] == (
        "convergent: allowed the stop after 2 consecutive blocks (Claude Code's "
        "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP is 2, below control.hook.max_consecutive_blocks 5)"
    )
    warning = (
        "convergent hook: warning: Claude Code's CLAUDE_CODE_STOP_HOOK_BLOCK_CAP is 2, below "
        "control.hook.max_consecutive_blocks 5; at most 2 blocks in a row are given"
    )
    assert [a.message for a in answers[:2]] == [warning, warning]
    assert state.control.iteration == 2  # the third call counted nothing


def test_a_higher_or_absent_claude_code_cap_leaves_the_own_cap() -> None:
    for claude_cap in (None, 9):
        state = make_state(2, max_stall_count=50)
        state.control.hook.block_when_active = True
        state.control.hook.max_consecutive_blocks = 2
        chained = HookInput(hook_event_name="Stop", stop_hook_active=True)
        answers = [decide_hook(state, chained, claude_cap=claude_cap) for _ in range(3)]
        assert [a.action for a in answers] == ["block", "block", "allow"]
        assert answers[0].message is None
        assert (
            answers[2]
            .output["systemMessage"]
            .endswith("after 2 consecutive blocks (control.hook.max_consecutive_blocks)")
        )


def test_the_installed_command_reads_claude_codes_cap_from_its_environment(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    state = make_state(2, max_stall_count=50)
    state.control.hook.block_when_active = True
    state.control.hook.consecutive_blocks = 3
    store.create(state)
    proc = subprocess.run(
        [convergent_exe, "hook", "stop"],
        input=json.dumps(stop_payload(tmp_path, active=True)).encode(),
        capture_output=True,
        cwd=tmp_path,
        timeout=SAFETY_TIMEOUT,
        env={**os.environ, "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "3"},
        check=False,
    )
    output = json.loads(proc.stdout)
    assert _allowed(output)
    assert "after 3 consecutive blocks (Claude Code's" in output["systemMessage"]
    assert store.load().control.iteration == 0


# --- --verify while stop_hook_active -----------------------------------------------------


def test_verify_while_active_with_failing_checks_allows_and_records(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(1, checks=[ArtifactCheck(name="bundle", path="dist/app.js")]))
    payload = json.dumps(stop_payload(tmp_path, active=True))
    code, output, stderr = run_hook(convergent_exe, "stop", payload, "--verify", cwd=tmp_path)
    assert code == 0
    assert output == {}
    assert "stop_hook_active is true; checks recorded, allowing the stop" in stderr
    state = store.load()
    assert state.control.status is WorkflowStatus.RUNNING
    assert [r.passed for r in state.base_case.last_results] == [False]
    assert state.control.hook.last_answer is not None
    assert state.control.hook.last_answer.action == "allow"


# --- PostToolUse: a stop at a subagent reaches the main agent ---------------------------


def test_post_tool_use_says_nothing_while_the_work_goes_on(
    convergent_exe: str, store: StateStore, state_path: Path, tmp_path: Path
) -> None:
    store.create(make_state(2))
    before = state_path.read_bytes()
    payload = json.dumps(tool_payload(tmp_path))
    code, output, _ = run_hook(convergent_exe, "post-tool-use", payload, cwd=tmp_path)
    assert code == 0
    assert output == {}
    assert state_path.read_bytes() == before


def test_post_tool_use_tells_the_main_agent_once_then_ends_its_session(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    state = make_state(2, max_stall_count=1)
    observe_iteration(state)
    store.create(state)
    subagent = json.dumps(subagent_payload(tmp_path))
    _, halted, _ = run_hook(convergent_exe, "subagent-stop", subagent, cwd=tmp_path)
    assert halted["continue"] is False
    payload = json.dumps(tool_payload(tmp_path))
    _, told, _ = run_hook(convergent_exe, "post-tool-use", payload, cwd=tmp_path)
    _, ended, _ = run_hook(convergent_exe, "post-tool-use", payload, cwd=tmp_path)
    assert told["decision"] == "block"
    assert told["reason"] == (
        f"{halted['stopReason']} Start no more work and call no more tools: give the user "
        "your final answer now (what is done, what is left), saying that the work was "
        "stopped and why."
    )
    assert ended == {"continue": False, "stopReason": halted["stopReason"]}
    saved = store.load().control
    assert saved.hook.halt_reported
    assert saved.hook.last_answer is not None
    assert (saved.hook.last_answer.event, saved.hook.last_answer.action) == (
        "PostToolUse",
        "halt",
    )


def test_post_tool_use_after_completion_says_nothing(store: StateStore, tmp_path: Path) -> None:
    state = make_state(1)
    state.control.status = WorkflowStatus.COMPLETED
    store.create(state)
    answer = answer_hook(HookEvent.POST_TOOL_USE, json.dumps(tool_payload(tmp_path)))
    assert (answer.action, answer.output) == ("allow", {})


# --- PreToolUse: nothing runs once the work ended ----------------------------------------


def pre_tool_payload(cwd: Path, tool: str = "Agent", agent_id: str | None = None) -> str:
    """Shaped like Claude Code's PreToolUse hook input (``agent_id``: a subagent's call)."""
    payload = {**tool_payload(cwd, tool), "hook_event_name": "PreToolUse"}
    del payload["tool_response"]
    if agent_id is not None:
        payload["agent_id"] = agent_id
    return json.dumps(payload)


def _halted(store: StateStore, tmp_path: Path) -> str:
    """A state whose work a subagent's stop just ended; returns the halt's reason."""
    state = make_state(2, max_stall_count=1)
    observe_iteration(state)
    store.create(state)
    answer = answer_hook(HookEvent.SUBAGENT_STOP, json.dumps(subagent_payload(tmp_path)))
    reason: str = answer.output["stopReason"]
    return reason


def test_pre_tool_use_lets_every_call_run_while_the_work_goes_on(
    convergent_exe: str, store: StateStore, state_path: Path, tmp_path: Path
) -> None:
    store.create(make_state(2))
    before = state_path.read_bytes()
    code, output, _ = run_hook(
        convergent_exe, "pre-tool-use", pre_tool_payload(tmp_path, "Bash"), cwd=tmp_path
    )
    assert (code, output) == (0, {})
    assert state_path.read_bytes() == before  # read only: nothing written


def test_pre_tool_use_denies_the_next_subagent_then_ends_the_session(
    store: StateStore, tmp_path: Path
) -> None:
    reason = _halted(store, tmp_path)
    first = answer_hook(HookEvent.PRE_TOOL_USE, pre_tool_payload(tmp_path))
    later = answer_hook(HookEvent.PRE_TOOL_USE, pre_tool_payload(tmp_path, "Bash"))
    denied = first.output["hookSpecificOutput"]
    assert (denied["hookEventName"], denied["permissionDecision"]) == ("PreToolUse", "deny")
    assert denied["permissionDecisionReason"].startswith(f"{reason} Start no more work")
    assert "continue" not in first.output
    assert later.output["hookSpecificOutput"]["permissionDecisionReason"] == reason
    assert (later.output["continue"], later.output["stopReason"]) == (False, reason)
    record = store.load().control.hook.last_answer
    assert record is not None and (record.event, record.action) == ("PreToolUse", "halt")


def test_pre_tool_use_denies_a_subagents_own_calls_without_telling_the_main_agent(
    store: StateStore, tmp_path: Path
) -> None:
    reason = _halted(store, tmp_path)
    call = pre_tool_payload(tmp_path, "Bash", agent_id="a7f3c2e1")
    answer = answer_hook(HookEvent.PRE_TOOL_USE, call)
    told = answer.output["hookSpecificOutput"]["permissionDecisionReason"]
    assert told == f"{reason} Call no more tools: end your work now and report what you did."
    assert "continue" not in answer.output  # only the subagent's call is stopped
    assert not store.load().control.hook.halt_reported  # the main agent is still to be told
    main = answer_hook(HookEvent.PRE_TOOL_USE, pre_tool_payload(tmp_path))
    assert "continue" not in main.output


def test_work_that_goes_on_again_is_reported_afresh(store: StateStore, tmp_path: Path) -> None:
    state = make_state(2)
    request_stop(state, "lunch")
    store.create(state)
    payload = json.dumps(tool_payload(tmp_path))
    assert answer_hook(HookEvent.POST_TOOL_USE, payload).action == "block"
    with store.update() as current:
        current.control.stop_requested = False  # as `coordinator record resume` does
    assert answer_hook(HookEvent.STOP, json.dumps(stop_payload(tmp_path))).action == "block"
    assert not store.load().control.hook.halt_reported
    with store.update() as current:
        request_stop(current, "dinner")
    assert answer_hook(HookEvent.POST_TOOL_USE, payload).action == "block"


# --- stdout carries only the answer -----------------------------------------------------

NOISY_DECISION = """
import os, subprocess, sys
import convergent.coordinator.hook as hook
decide = hook.decide_hook
def noisy(*args, **kwargs):
    print("print() while deciding")
    os.write(1, b"a write to descriptor 1\\n")
    subprocess.run(["echo", "a child process"], check=True)
    return decide(*args, **kwargs)
hook.decide_hook = noisy
sys.argv = ["convergent", "hook", "stop"]
from convergent.cli import main
main()
"""


def test_stdout_carries_only_the_answer(store: StateStore, tmp_path: Path) -> None:
    store.create(make_state(1))
    done = subprocess.run(
        [sys.executable, "-c", NOISY_DECISION],
        input=json.dumps(stop_payload(tmp_path)).encode(),
        capture_output=True,
        cwd=tmp_path,
        timeout=SAFETY_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0
    stdout = done.stdout.decode()
    assert stdout.count("\n") == 1
    assert json.loads(stdout)["decision"] == "block"
    stderr = done.stderr.decode()
    for noise in ("print() while deciding", "a write to descriptor 1", "a child process"):
        assert noise in stderr


# --- PreToolUse fails closed ---------------------------------------------------------


def test_pre_tool_use_after_a_stop_denies_the_call_when_stdin_is_unusable(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    """Claude Code runs the hook in the session's folder: the state is found there."""
    reason = _halted(store, tmp_path)
    code, output, stderr = run_hook(convergent_exe, "pre-tool-use", "{not json", cwd=tmp_path)
    assert code == 0
    denied = output["hookSpecificOutput"]
    assert (denied["permissionDecision"], denied["permissionDecisionReason"]) == ("deny", reason)
    assert stderr.startswith("convergent hook: the hook's input is unusable (stdin is not valid")
    assert stderr.endswith("; the work was stopped, the tool call is denied\n")


def test_pre_tool_use_after_a_stop_denies_the_call_while_the_state_is_locked(
    store: StateStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convergent.coordinator import hook
    from convergent.coordinator._lock import StateLock

    reason = _halted(store, tmp_path)
    monkeypatch.setattr(hook, "HOOK_LOCK_TIMEOUT", 0.2)
    with StateLock(f"{store.path}.lock", timeout=1):  # another process holds it
        answer = answer_hook(HookEvent.PRE_TOOL_USE, pre_tool_payload(tmp_path, "Bash"))
    denied = answer.output["hookSpecificOutput"]
    assert (denied["permissionDecision"], denied["permissionDecisionReason"]) == ("deny", reason)
    assert answer.message is not None and "is locked by another process" in answer.message
    assert answer.message.endswith("the work was stopped, the tool call is denied")


def test_pre_tool_use_denies_the_call_when_the_state_file_is_broken(
    state_path: Path, tmp_path: Path
) -> None:
    state_path.write_text("control: [broken\n")
    answer = answer_hook(HookEvent.PRE_TOOL_USE, pre_tool_payload(tmp_path, "Bash"))
    reason = answer.output["hookSpecificOutput"]["permissionDecisionReason"]
    assert answer.output["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert reason.startswith("convergent: this tool call is not run: the state file is unusable")
    assert "allowing the stop" not in f"{reason} {answer.message}"
    assert state_path.read_text() == "control: [broken\n"


def test_pre_tool_use_lets_the_call_run_when_the_work_goes_on_whatever_the_input(
    convergent_exe: str, store: StateStore, tmp_path: Path
) -> None:
    store.create(make_state(2))
    code, output, stderr = run_hook(convergent_exe, "pre-tool-use", "", cwd=tmp_path)
    assert (code, output) == (0, {})
    assert stderr == (
        "convergent hook: the hook's input is unusable (empty input on stdin); the work goes "
        "on, letting the tool call run\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, output, stderr = run_hook(convergent_exe, "pre-tool-use", "", cwd=elsewhere)
    assert (code, output) == (0, {})
    assert "no state file at" in stderr and stderr.endswith("letting the tool call run\n")
