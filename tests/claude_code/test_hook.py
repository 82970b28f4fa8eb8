"""convergent's hooks installed in the real Claude Code CLI, the model played by the fake."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from convergent.coordinator import (
    ArtifactCheck,
    Atom,
    BaseCase,
    Control,
    StateStore,
    WorkflowState,
    WorkflowStatus,
    observe_iteration,
)
from convergent.stop import StopReason

from .claude_cli import ClaudeCode
from .conftest import CONVERGENT, convergent_hooks, documented_settings
from .fake_anthropic import FakeAnthropic, MessagesRequest, OutboundTrap, Reply, text, tool_use

pytestmark = [pytest.mark.slow, pytest.mark.claude_code]

STOP_FEEDBACK = "Stop hook feedback:\nconvergent: the work is not done"
HALTED = "convergent stopped the work"


def _store(claude_code: ClaudeCode, state: WorkflowState) -> StateStore:
    store = StateStore(claude_code.project / "workflow-state.yaml")
    store.create(state)
    return store


def _status(claude_code: ClaudeCode) -> dict[str, Any]:
    done = subprocess.run(
        [str(CONVERGENT), "coordinator", "status", "--json"],
        cwd=claude_code.project,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def test_a_blocked_stop_continues_until_the_checks_pass(claude_code: ClaudeCode) -> None:
    state = WorkflowState(
        goal="build the bundle",
        atoms=[Atom(id="bundle", title="build dist/app.js")],
        base_case=BaseCase(checks=[ArtifactCheck(name="bundle", path="dist/app.js")]),
    )
    store = _store(claude_code, state)
    claude_code.write_settings(convergent_hooks(options=" --verify"))
    build = (
        "mkdir -p dist && echo 'console.log(1)' > dist/app.js"
        " && convergent coordinator record resolve bundle --note built"
    )

    def model(request: MessagesRequest) -> Reply:
        if any(piece.startswith(STOP_FEEDBACK) for piece in request.last_user_texts):
            return tool_use("Bash", {"command": build, "description": "build it"})
        if "resolved atom bundle" in request.last_user_texts:  # the Bash tool's output
            return text("Built dist/app.js.")
        return text("I'm confident everything is done.")  # premature, as models are

    with FakeAnthropic(model) as fake, OutboundTrap() as trap:
        session = claude_code.run("build the bundle", fake, trap, args=("--allowedTools", "Bash"))

    assert fake.problems == []
    assert len(fake.requests) == 3
    feedback = fake.requests[1].last_user_texts[-1]
    assert feedback.startswith(STOP_FEEDBACK + " (iteration 1 of 20; 1 unresolved")
    assert "- bundle [pending] build dist/app.js (ready)" in feedback
    assert "Base case failing:\n- bundle: 0 path(s) match dist/app.js, need 1" in feedback
    answers = session.hook_answers("Stop")
    assert [a.get("decision") for a in answers] == ["block", None]
    assert answers[1] == {"systemMessage": "convergent: base case satisfied (1 check(s) passed)"}
    assert session.result["terminal_reason"] == "completed"
    assert session.result["result"] == "Built dist/app.js."
    saved = store.load().control
    assert (saved.status, saved.stop_reason) == (WorkflowStatus.COMPLETED, StopReason.COMPLETED)
    assert saved.iteration == 1


def test_a_stall_ends_the_work(claude_code: ClaudeCode) -> None:
    state = WorkflowState(
        goal="fix the tests",
        atoms=[Atom(id="parser"), Atom(id="lexer")],
        control=Control(max_stall_count=2),
    )
    state.control.hook.block_when_active = True
    store = _store(claude_code, state)
    claude_code.write_settings(convergent_hooks())

    with FakeAnthropic(lambda request: text("Done, I think.")) as fake, OutboundTrap() as trap:
        session = claude_code.run("fix the tests", fake, trap)

    assert fake.problems == []
    assert len(fake.requests) == 3  # the first answer, then one per block
    assert [r.last_user_texts[-1].startswith(STOP_FEEDBACK) for r in fake.requests[1:]] == [
        True,
        True,
    ]
    assert "last iteration: stall; stall 1 of 2" in fake.requests[2].last_user_texts[-1]
    answers = session.hook_answers("Stop")
    assert [a.get("decision", a.get("continue")) for a in answers] == ["block", "block", False]
    reason = answers[2]["stopReason"]
    assert reason.startswith(
        f"{HALTED} (stalled): max_stall_count exceeded: stall_count 2 >= max_stall_count 2."
    )
    assert "Unresolved: parser, lexer." in reason
    assert session.result["terminal_reason"] == "stop_hook_prevented"
    saved = store.load().control
    assert (saved.status, saved.stop_reason) == (WorkflowStatus.STOPPED, StopReason.STALLED)
    status = _status(claude_code)
    assert status["stop_reason"] == "stalled"
    assert status["stop_detail"] == "max_stall_count exceeded: stall_count 2 >= max_stall_count 2"
    assert status["hook"]["last_answer"]["event"] == "Stop"
    assert status["hook"]["last_answer"]["action"] == "halt"
    assert status["hook"]["last_answer"]["message"] == reason


def _subagent_task(request: MessagesRequest) -> bool:
    return any(piece.startswith("SUBTASK") for piece in request.texts()[:3])


@pytest.mark.parametrize("limit", ["stall", "iterations"])
def test_a_subagent_halt_ends_the_work(claude_code: ClaudeCode, limit: str) -> None:
    state = WorkflowState(goal="port the modules", atoms=[Atom(id="core"), Atom(id="cli")])
    if limit == "stall":
        state.control.max_stall_count = 1
        observe_iteration(state)  # the next subagent that resolves nothing stalls
        expected = "(stalled): max_stall_count exceeded: stall_count 1 >= max_stall_count 1."
    else:
        state.control.max_iterations = 1
        expected = "(max_cycles): max_iterations reached: iteration 1 >= max_iterations 1."
    store = _store(claude_code, state)
    claude_code.write_settings(documented_settings())  # `convergent` found on PATH
    spawned: list[str] = []

    def model(request: MessagesRequest) -> Reply:
        if _subagent_task(request):
            return text("I looked at the module but changed nothing.")
        if request.mentions(HALTED):
            return text("The work was stopped by the coordinator; nothing more to do.")
        if len(spawned) == 3:  # a main agent never told would go on; the script ends here
            return text("Still not ported.")
        spawned.append(f"SUBTASK port part {len(spawned) + 1}")
        return tool_use(
            "Agent",
            {
                "description": "port a module",
                "prompt": spawned[-1],
                "subagent_type": "general-purpose",
                "run_in_background": False,
            },
        )

    with FakeAnthropic(model) as fake, OutboundTrap() as trap:
        session = claude_code.run("port the modules", fake, trap)

    assert fake.problems == []
    assert spawned == ["SUBTASK port part 1"]  # no second subagent after the halt
    subagent_stops = session.hook_answers("SubagentStop")
    assert [a.get("continue") for a in subagent_stops] == [False]
    assert subagent_stops[0]["stopReason"].startswith(f"{HALTED} {expected}")
    told = [r for r in fake.requests if not _subagent_task(r) and r.mentions(HALTED)]
    assert len(told) == 1  # the main agent learned why, once, and answered
    assert any(f"{HALTED} {expected}" in piece for piece in told[0].texts(None))
    assert [a.get("continue") for a in session.hook_answers("Stop")] == [False]
    assert session.result["terminal_reason"] == "stop_hook_prevented"
    assert session.result["result"].startswith("The work was stopped by the coordinator")
    saved = store.load().control
    assert saved.status is WorkflowStatus.STOPPED
    assert saved.stop_reason is (StopReason.STALLED if limit == "stall" else StopReason.MAX_CYCLES)


def test_claude_codes_block_cap_is_respected_and_named(claude_code: ClaudeCode) -> None:
    state = WorkflowState(
        atoms=[Atom(id="a"), Atom(id="b")],
        control=Control(max_stall_count=50, max_iterations=50),
    )
    state.control.hook.block_when_active = True
    state.control.hook.max_consecutive_blocks = 10
    store = _store(claude_code, state)
    claude_code.write_settings(convergent_hooks())

    with FakeAnthropic(lambda request: text("Done.")) as fake, OutboundTrap() as trap:
        session = claude_code.run("do it", fake, trap, env={"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "3"})

    assert fake.problems == []
    delivered = [r for r in fake.requests if r.last_user_texts[-1].startswith(STOP_FEEDBACK)]
    assert len(delivered) == 3
    answers = session.hook_answers("Stop")
    assert [a.get("decision") for a in answers] == ["block", "block", "block", None]
    assert answers[3]["systemMessage"] == (
        "convergent: allowed the stop after 3 consecutive blocks (Claude Code's "
        "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP is 3, below control.hook.max_consecutive_blocks 10)"
    )
    warning = "warning: Claude Code's CLAUDE_CODE_STOP_HOOK_BLOCK_CAP is 3"
    assert all(warning in text for text in session.hook_stderr("Stop")[:3])
    assert not [n for n in session.notices() if "overriding" in n]  # Claude Code's own cap
    assert store.load().control.iteration == len(delivered)


def test_noise_before_the_answer_would_lose_it(claude_code: ClaudeCode, tmp_path: Path) -> None:
    """Why stdout must carry only the JSON: Claude Code ignores an answer after other text."""
    hook = tmp_path / "noisy_hook.sh"
    hook.write_text(
        "#!/bin/sh\ncat > /dev/null\necho 'a library said hello'\n"
        'echo \'{"decision": "block", "reason": "keep going"}\'\n'
    )
    hook.chmod(0o755)
    settings = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": str(hook)}]}]}}
    claude_code.write_settings(settings)
    with FakeAnthropic([text("done")]) as fake, OutboundTrap() as trap:
        session = claude_code.run("go", fake, trap)
    assert fake.problems == [] and len(fake.requests) == 1  # the block never arrived
    assert session.result["terminal_reason"] == "completed"


def test_a_subagent_started_after_a_halt_never_runs(claude_code: ClaudeCode) -> None:
    """A main agent that ignores the halt and starts another subagent: PreToolUse denies
    the Agent call, so that subagent never makes a request, and the session ends."""
    state = WorkflowState(atoms=[Atom(id="core")], control=Control(max_iterations=1))
    _store(claude_code, state)
    claude_code.write_settings(documented_settings())
    spawned: list[str] = []

    def model(request: MessagesRequest) -> Reply:
        if _subagent_task(request):
            return text("Nothing changed.")
        if len(spawned) == 3:
            return text("Giving up.")
        spawned.append(f"SUBTASK part {len(spawned) + 1}")  # told or not, it goes on
        return tool_use(
            "Agent",
            {"description": "a part", "prompt": spawned[-1], "run_in_background": False},
        )

    with FakeAnthropic(model) as fake, OutboundTrap() as trap:
        session = claude_code.run("port it", fake, trap)

    assert fake.problems == []
    started = {p for r in fake.requests for p in r.texts()[:3] if p.startswith("SUBTASK")}
    assert started == {"SUBTASK part 1"}  # part 2 never made a request
    assert [a.get("decision", a.get("continue")) for a in session.hook_answers("PostToolUse")] == [
        "block"
    ]
    denied = session.hook_answers("PreToolUse")[-1]
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert denied["continue"] is False
    assert denied["stopReason"].startswith(f"{HALTED} (max_cycles)")
    assert session.result["terminal_reason"] == "hook_stopped"


@pytest.mark.parametrize("background", ["default", "disabled"])
def test_a_background_subagent_halted_at_its_stop(claude_code: ClaudeCode, background: str) -> None:
    """Claude Code runs a subagent in the background unless told otherwise; after the
    work is stopped, it starts one more turn for the subagent's notification, unless
    background tasks are disabled."""
    state = WorkflowState(atoms=[Atom(id="core")], control=Control(max_iterations=1))
    _store(claude_code, state)
    claude_code.write_settings(documented_settings())
    launched: list[int] = []

    waiting = claude_code.project / "main-agent-waits"

    def model(request: MessagesRequest) -> Reply:
        if _subagent_task(request):
            if background == "default" and not request.mentions("waited"):
                # the subagent ends only once the main agent has answered and waits
                loop = f"while [ ! -e {waiting} ]; do sleep 0.1; done; echo waited"
                return tool_use("Bash", {"command": loop, "description": "wait"})
            return text("Nothing changed.")
        if request.mentions(HALTED):
            return text("The coordinator stopped the work.")
        if launched:
            waiting.touch()
            return text("Waiting for the subagent.")
        launched.append(1)
        return tool_use("Agent", {"description": "a part", "prompt": "SUBTASK part 1"})

    env = {"CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1"} if background == "disabled" else {}
    with FakeAnthropic(model) as fake, OutboundTrap() as trap:
        session = claude_code.run("port it", fake, trap, args=("--allowedTools", "Bash"), env=env)

    assert fake.problems == []
    main = [r for r in fake.requests if not _subagent_task(r)]
    halts = [a.get("continue") for a in session.hook_answers("SubagentStop")]
    assert halts == [False]
    if background == "default":  # the notification's turn comes after the session ended
        assert len(main) == 3 and main[2].mentions("NOTIFICATION")
        assert [r["result"] for r in session.results] == [
            "Waiting for the subagent.",
            "The coordinator stopped the work.",
        ]
    else:  # the main agent learns of the stop when the Agent call returns, and answers
        assert len(main) == 2 and main[1].mentions(HALTED)
        assert [r["result"] for r in session.results] == ["The coordinator stopped the work."]
