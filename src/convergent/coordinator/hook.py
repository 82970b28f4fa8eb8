"""The Claude Code hooks: decide from the state file, answer in JSON.

Claude Code runs the hook command when the main agent (``Stop``) or a subagent
(``SubagentStop``) is about to finish, and before and after a tool call
(``PreToolUse``, ``PostToolUse``), with a JSON object on stdin (``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name``, ``stop_hook_active``; for
SubagentStop also ``agent_id``, ``agent_type``, ``agent_transcript_path``,
``last_assistant_message``; for the tool events ``tool_name``, ``tool_input``, after the
call ``tool_response``, and ``agent_id`` when a subagent made the call). The hook always
exits 0 and prints one JSON object:

- ``{"decision": "block", "reason": ...}``: keep working; the reason lists what is
  unresolved and any strategy advice, and becomes the agent's next instruction.
- ``{"continue": false, "stopReason": ...}``: the controller ends the work (stop
  requested, stalled, or the iteration limit reached).
- an object without ``decision`` (``{}``, or only a ``systemMessage`` for the user):
  let the agent stop (base case satisfied, redirect in progress, or a safe fallback).

A stop decided at a subagent's stop ends only that subagent in Claude Code, so the tool
hooks carry it to the main agent: after the Agent call that ran the subagent
(PostToolUse, matcher ``Agent|Task``) the main agent is told why the work ended, once,
with a block; before any later call (PreToolUse) the call is denied, so no new subagent
and no subagent's own call runs after the stop, and the main agent's session ends.

It never keeps an agent looping without bound: with ``stop_hook_active`` true it lets
the agent stop (unless ``control.hook.block_when_active`` opts in), it caps consecutive
blocks at ``control.hook.max_consecutive_blocks`` and at Claude Code's own cap
(``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``), and malformed or empty stdin, a missing,
unreadable or locked state file, or any internal error all allow the stop with a
message on stderr. It never exits 2, which Claude Code would read as "block".

The ``PreToolUse`` gate fails closed instead: a call runs only when the hook can tell
that the work goes on (or there is no state file). With a locked state file it reads
the file without the lock (writes replace it whole, so a read is never torn); with a
state file it cannot read, stdin it cannot read (the state file is then looked for in
the hook's own working directory, where Claude Code runs it), or an internal error,
the call is denied, saying why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec

from convergent._claude_code import (
    BLOCK_CAP_VARIABLE,
    CLAUDE_CODE_BLOCK_CAP,
    claude_code_block_cap,
)
from convergent._json import UnusableJson, load_json
from convergent.coordinator._record import ValidationError, describe, from_data
from convergent.coordinator.actions import record_verification
from convergent.coordinator.advice import strategy_advice
from convergent.coordinator.checks import CheckResult, run_checks
from convergent.coordinator.decide import (
    Continue,
    Decision,
    Interrupt,
    Stop,
    advance,
    apply_decision,
    decide,
)
from convergent.coordinator.progress import ready_atoms, unresolved_atoms
from convergent.coordinator.state import (
    HookAction,
    HookAnswerRecord,
    StateFileError,
    WorkflowState,
    WorkflowStatus,
)
from convergent.coordinator.store import DEFAULT_STATE_FILE, StateStore, read_state_file
from convergent.exceptions import UserError
from convergent.stop import StopReason

__all__ = [
    "BLOCK_CAP_VARIABLE",
    "CLAUDE_CODE_BLOCK_CAP",
    "HOOK_LOCK_TIMEOUT",
    "HookAnswer",
    "HookEvent",
    "HookInput",
    "HookInputError",
    "answer_hook",
    "claude_code_block_cap",
    "decide_hook",
    "parse_hook_input",
]

HOOK_LOCK_TIMEOUT = 10.0
"""Seconds the hook waits for the state lock before allowing the stop instead."""

_MAX_LISTED_ATOMS = 10
_PREFIX = "convergent"
_MAX_LINE = 2_000
"""Characters of one line of a message (a goal, a title, a note) that the hook repeats."""
_MAX_TEXT = 16_000
"""Characters of a whole message the hook gives: the file's text is never echoed in bulk."""


def _clip(text: str, limit: int = _MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40)  # room for the note, so the result stays within the limit
    return f"{text[:keep]}... ({len(text) - keep} more characters)"


def _lines(lines: list[str]) -> str:
    return _clip("\n".join(_clip(line, _MAX_LINE) for line in lines))


_FINAL_ANSWER = (
    "Start no more work and call no more tools: give the user your final answer now "
    "(what is done, what is left), saying that the work was stopped and why."
)
_SUBAGENT_ENDS = "Call no more tools: end your work now and report what you did."


class HookEvent(StrEnum):
    """The Claude Code hook events this hook answers."""

    STOP = "Stop"
    SUBAGENT_STOP = "SubagentStop"
    PRE_TOOL_USE = "PreToolUse"
    POST_TOOL_USE = "PostToolUse"


class HookInputError(UserError):
    """Stdin is empty, not JSON, or not a JSON object."""


class HookInput(msgspec.Struct, kw_only=True):
    """The JSON Claude Code sends on stdin to the hooks.

    Unknown fields are ignored, so newer Claude Code versions still work.
    """

    session_id: str | None = None
    """Claude Code session id."""
    transcript_path: str | None = None
    """Path to the session's transcript (JSONL)."""
    cwd: str | None = None
    """Working directory of the session; the default state file lives here."""
    permission_mode: str | None = None
    """Claude Code's permission mode."""
    hook_event_name: str | None = None
    """``Stop`` or ``SubagentStop``."""
    stop_hook_active: bool = False
    """True when the agent is already continuing because a stop hook blocked."""
    agent_id: str | None = None
    """SubagentStop: the subagent's id; a tool event: the subagent that made the call."""
    agent_type: str | None = None
    """SubagentStop: the subagent's type."""
    agent_transcript_path: str | None = None
    """SubagentStop: the subagent's own transcript."""
    last_assistant_message: str | None = None
    """The agent's final message; recorded by Claude Code, never used to decide."""
    tool_name: str | None = None
    """PreToolUse and PostToolUse: the tool called (``Agent`` for a subagent)."""


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What the hook prints (stdout JSON, stderr text) and how it exits."""

    action: HookAction
    """Let the agent stop, keep it working, or end the work."""
    output: dict[str, Any] = field(default_factory=dict)
    """The JSON object for stdout."""
    message: str | None = None
    """A line for stderr (diagnostics; Claude Code shows it in debug output)."""
    exit_code: int = 0
    """Always 0: exit 2 would make Claude Code block the stop."""

    @property
    def stdout(self) -> str:
        """The stdout text: one JSON object and a newline."""
        return json.dumps(self.output, ensure_ascii=False) + "\n"


def _allow(message: str | None = None, *, notify: str | None = None) -> HookAnswer:
    output = {"systemMessage": _clip(f"{_PREFIX}: {notify}")} if notify else {}
    text = _clip(f"{_PREFIX} hook: {message}") if message else None
    return HookAnswer(HookAction.ALLOW, output, text)


def _block(reason: str, message: str | None = None) -> HookAnswer:
    return HookAnswer(HookAction.BLOCK, {"decision": "block", "reason": reason}, message)


def _halt(reason: str) -> HookAnswer:
    return HookAnswer(HookAction.HALT, {"continue": False, "stopReason": reason})


def _deny(reason: str, *, end: bool = False) -> HookAnswer:
    """PreToolUse: the call does not run; the model reads ``reason`` as its result.

    With ``end``, the session ends too (``continue: false``).
    """
    output: dict[str, Any] = {
        "hookSpecificOutput": {
            "hookEventName": HookEvent.PRE_TOOL_USE.value,
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
    if end:
        output.update({"continue": False, "stopReason": reason})
    return HookAnswer(HookAction.HALT if end else HookAction.BLOCK, output)


def parse_hook_input(raw: str) -> HookInput:
    """Parse the hook's stdin.

    Raises:
        HookInputError: Empty input, invalid or too deeply nested JSON, or JSON that is
            not an object of the documented shape.
    """
    if not raw.strip():
        raise HookInputError("empty input on stdin")
    try:
        data = load_json(raw)
    except UnusableJson as exc:
        raise HookInputError(f"stdin is {exc}") from None
    if not isinstance(data, dict):
        raise HookInputError(f"stdin JSON is a {type(data).__name__}, expected an object")
    try:
        return from_data(data, HookInput, strict=False)
    except ValidationError as exc:
        where = describe(exc).partition(":")[0]
        raise HookInputError(f"stdin JSON field {where!r} has the wrong type") from None


def state_path_for(payload: HookInput, state: str | None) -> Path:
    """The state file: ``--state`` (relative to the session's cwd) or the default there."""
    base = Path(payload.cwd) if payload.cwd else Path.cwd()
    path = Path(state).expanduser() if state else Path(DEFAULT_STATE_FILE)
    return path if path.is_absolute() else base / path


def _atom_lines(state: WorkflowState) -> list[str]:
    open_atoms = unresolved_atoms(state.atoms)
    ready = {atom.id for atom in ready_atoms(state.atoms)}
    lines = []
    for atom in open_atoms[:_MAX_LISTED_ATOMS]:
        where = "ready" if atom.id in ready else "waiting on " + ", ".join(atom.depends_on)
        title = f" {atom.title}" if atom.title else ""
        lines.append(f"- {atom.id} [{atom.status}]{title} ({where})")
    if len(open_atoms) > _MAX_LISTED_ATOMS:
        lines.append(f"- ... and {len(open_atoms) - _MAX_LISTED_ATOMS} more")
    return lines


def _check_lines(state: WorkflowState) -> list[str]:
    results = state.base_case.last_results
    if not state.base_case.checks:
        return ["Base case: no checks declared; add checks under base_case.checks."]
    if not results:
        names = ", ".join(check.name for check in state.base_case.checks)
        return [f"Base case not verified yet (checks: {names})."]
    failing = [r for r in results if not r.passed]
    return ["Base case failing:", *(f"- {r.name}: {r.summary}" for r in failing)]


def block_reason(state: WorkflowState, pending: int) -> str:
    """The instruction given to the agent when it is kept working."""
    control = state.control
    last = control.last_progress.value if control.last_progress else "first observation"
    lines = [
        f"{_PREFIX}: the work is not done (iteration {control.iteration} of "
        f"{control.max_iterations}; {pending} unresolved; last iteration: {last}; "
        f"stall {control.stall_count} of {control.max_stall_count}).",
    ]
    if state.goal:
        lines.append(f"Goal: {state.goal}")
    atom_lines = _atom_lines(state)
    if atom_lines:
        lines += ["Unresolved atoms:", *atom_lines]
    lines += _check_lines(state)
    advice = strategy_advice(state)
    if advice:
        lines += ["Strategy:", *(f"- {item.switch}: {item.message}" for item in advice)]
    lines.append(
        "Record progress with `convergent coordinator record resolve ID` (or `record fail`), "
        "and run `convergent coordinator verify` when you believe the base case holds."
    )
    return _lines(lines)


def _halt_reason(state: WorkflowState, stop: Stop) -> str:
    text = f"{_PREFIX} stopped the work ({stop.reason}): {stop.detail}."
    open_ids = [atom.id for atom in unresolved_atoms(state.atoms)]
    if open_ids:
        text += " Unresolved: " + ", ".join(open_ids[:_MAX_LISTED_ATOMS]) + "."
    advice = strategy_advice(state)
    if advice and stop.reason is StopReason.STALLED:
        text += " Advice: " + "; ".join(item.message for item in advice[:3]) + "."
    return _clip(text)


def _answer_decision(state: WorkflowState, decision: Decision) -> HookAnswer:
    hook = state.control.hook
    match decision:
        case Continue(pending=pending):
            hook.consecutive_blocks += 1
            hook.halt_reported = False
            return _block(block_reason(state, pending))
        case Interrupt(note=note):
            hook.consecutive_blocks = 0
            return _allow(notify=f"redirect in progress ({note}); letting the agent stop")
        case Stop(reason=StopReason.COMPLETED, detail=detail):
            hook.consecutive_blocks = 0
            return _allow(notify=detail)
        case Stop():
            hook.consecutive_blocks = 0
            return _halt(_halt_reason(state, decision))
    raise AssertionError(f"unhandled decision {decision!r}")  # pragma: no cover


def _block_cap(state: WorkflowState, claude_cap: int | None) -> tuple[int, str]:
    """The blocks in a row the hook may give, and where that number comes from."""
    own = state.control.hook.max_consecutive_blocks
    if claude_cap is not None and claude_cap < own:
        return claude_cap, (
            f"Claude Code's {BLOCK_CAP_VARIABLE} is {claude_cap}, below "
            f"control.hook.max_consecutive_blocks {own}"
        )
    return own, "control.hook.max_consecutive_blocks"


def decide_hook(
    state: WorkflowState, payload: HookInput, *, claude_cap: int | None = CLAUDE_CODE_BLOCK_CAP
) -> HookAnswer:
    """Decide one Stop or SubagentStop call and update the state's counters in place.

    A new stop (``stop_hook_active`` false) restarts the consecutive-block count. Once
    the count reaches its cap, ``control.hook.max_consecutive_blocks`` or Claude Code's
    ``claude_cap`` if lower, the agent is allowed to stop without counting an
    iteration: Claude Code would not deliver a block past its own cap, so every block
    the hook counts is one the agent received. Otherwise the iteration is ended with
    `advance` and its decision mapped to the protocol.
    """
    hook = state.control.hook
    if not payload.stop_hook_active:
        hook.consecutive_blocks = 0
    cap, source = _block_cap(state, claude_cap)
    if hook.consecutive_blocks >= cap:
        hook.consecutive_blocks = 0
        return _allow(
            f"blocked {cap} times in a row; allowing the stop",
            notify=f"allowed the stop after {cap} consecutive blocks ({source})",
        )
    answer = _answer_decision(state, advance(state))
    below = cap < hook.max_consecutive_blocks
    if answer.action is HookAction.BLOCK and hook.block_when_active and below:
        warning = f"{_PREFIX} hook: warning: {source}; at most {cap} blocks in a row are given"
        return HookAnswer(answer.action, answer.output, warning)
    return answer


def _work_ended(state: WorkflowState) -> Stop | None:
    """The stop that ended the work (or would end it now), unless the work completed."""
    decision = decide(state)
    if isinstance(decision, Stop) and decision.reason is not StopReason.COMPLETED:
        return decision
    return None


def _answer_tool_use(state: WorkflowState, payload: HookInput, event: HookEvent) -> HookAnswer:
    """Before or after a tool call: nothing while the work goes on; once it ended, stop it.

    After a call (PostToolUse) the first answer blocks with the reason, so the main
    agent learns it and can give the user a final answer; before a call (PreToolUse)
    the call is denied with it instead, so nothing runs after the stop. Once told, the
    main agent's next call ends its session. A subagent's own call is denied (or, after
    it ran, answered) with the reason, and the subagent ends its work.
    """
    stop = _work_ended(state)
    if stop is None:
        return HookAnswer(HookAction.ALLOW)
    apply_decision(state, stop)
    reason = _halt_reason(state, stop)
    before = event is HookEvent.PRE_TOOL_USE
    if payload.agent_id:  # a subagent's call: the main agent is told when it returns
        told = _clip(f"{reason} {_SUBAGENT_ENDS}")
        return _deny(told) if before else _block(told)
    if state.control.hook.halt_reported:
        return _deny(reason, end=True) if before else _halt(reason)
    state.control.hook.halt_reported = True
    told = f"{_clip(reason, _MAX_TEXT - len(_FINAL_ANSWER) - 1)} {_FINAL_ANSWER}"
    return _deny(told) if before else _block(told)


def _allow_while_active(state: WorkflowState) -> HookAnswer:
    """``stop_hook_active`` with ``--verify``: the checks were recorded; let the agent stop."""
    if state.control.status is WorkflowStatus.COMPLETED:
        return _allow(
            "stop_hook_active is true; the base case holds", notify=state.control.stop_detail
        )
    return _allow("stop_hook_active is true; checks recorded, allowing the stop")


def _remember(state: WorkflowState, event: HookEvent, answer: HookAnswer) -> None:
    """Keep the answer in the state, so that a caller without hook output can read it."""
    output = answer.output
    denied = output.get("hookSpecificOutput", {}).get("permissionDecisionReason")
    text = denied or output.get("reason") or output.get("stopReason") or output.get("systemMessage")
    if text is None and answer.message:
        text = answer.message.removeprefix(f"{_PREFIX} hook: ")
    state.control.hook.last_answer = HookAnswerRecord(
        event=event.value, action=answer.action, message=text or "", at=datetime.now(UTC)
    )


def _letting(event: HookEvent) -> str:
    """What the hook lets happen when it has nothing to decide, in words for its event."""
    if event is HookEvent.PRE_TOOL_USE:
        return "letting the tool call run"
    if event is HookEvent.POST_TOOL_USE:
        return "saying nothing after the tool call"
    return "allowing the stop"


def _deny_unsure(why: str) -> HookAnswer:
    """PreToolUse when the hook cannot tell whether the work was stopped: the call waits."""
    reason = _clip(
        f"{_PREFIX}: this tool call is not run: {why}, so whether the work was stopped "
        "cannot be told. Report the problem to the user instead of calling tools."
    )
    answer = _deny(reason)
    return HookAnswer(
        answer.action, answer.output, _clip(f"{_PREFIX} hook: {why}; the tool call is denied")
    )


def _gate_unsure(payload: HookInput, state: str | None, why: str) -> HookAnswer:
    """PreToolUse without its usual way to the state (stdin, the lock): read it as it is.

    The call runs when there is no state file, or the file says the work goes on; it is
    denied when the file says the work ended, or cannot be read.
    """
    path = state_path_for(payload, state)
    if not path.is_file():
        return _allow(f"{why}; no state file at {path}; letting the tool call run")
    try:
        current = read_state_file(path)
    except StateFileError as exc:
        return _deny_unsure(f"{why}, and {exc}")
    stop = _work_ended(current)
    if stop is None:
        return _allow(f"{why}; the work goes on, letting the tool call run")
    answer = _deny(_halt_reason(current, stop))
    message = _clip(f"{_PREFIX} hook: {why}; the work was stopped, the tool call is denied")
    return HookAnswer(answer.action, answer.output, message)


def _verify(store: StateStore) -> list[CheckResult] | None:
    """Run the base case checks outside the lock (they may take a while)."""
    state = store.load()
    if state.control.status is WorkflowStatus.COMPLETED or not state.base_case.checks:
        return None
    return run_checks(state.base_case.checks, store.base_dir)


def answer_hook(
    event: HookEvent,
    raw_input: str,
    *,
    state: str | None = None,
    verify: bool = False,
    verifier: Callable[[StateStore], list[CheckResult] | None] = _verify,
    environ: Mapping[str, str] | None = None,
) -> HookAnswer:
    """Answer one hook invocation from its raw stdin; never raises.

    Args:
        event: Which hook this command was installed as.
        raw_input: Everything read from stdin.
        state: ``--state`` value; default ``workflow-state.yaml`` in the session's cwd.
        verify: Run the base case checks first and record their results (Stop and
            SubagentStop only).
        verifier: How checks are run (replaceable in tests).
        environ: The environment Claude Code gave the hook (default ``os.environ``),
            read for `BLOCK_CAP_VARIABLE`.
    """
    gate = event is HookEvent.PRE_TOOL_USE
    try:
        payload = parse_hook_input(raw_input)
    except HookInputError as exc:
        if gate:
            return _gate_unsure(HookInput(), state, f"the hook's input is unusable ({exc})")
        return _allow(f"{exc}; {_letting(event)}", notify=f"hook input unusable ({exc})")
    claude_cap = claude_code_block_cap(os.environ if environ is None else environ)
    try:
        answer = _answer_from_file(event, payload, state, verify, verifier, claude_cap)
    except StateFileError as exc:
        if gate:
            return _gate_unsure(payload, state, f"the state file is unusable ({exc})")
        return _allow(f"{exc}; {_letting(event)}", notify=f"state file unusable: {exc}")
    except Exception as exc:  # a hook must never trap the agent, whatever went wrong
        error = f"internal error ({type(exc).__name__}: {exc})"
        if gate:
            return _deny_unsure(error)
        return _allow(f"{error}; {_letting(event)}")
    if payload.hook_event_name and payload.hook_event_name != event.value:
        note = f"hook_event_name is {payload.hook_event_name!r} but installed as {event}"
        message = f"{answer.message}; {note}" if answer.message else f"{_PREFIX} hook: {note}"
        return HookAnswer(answer.action, answer.output, _clip(message))
    return answer


def _answer_from_file(
    event: HookEvent,
    payload: HookInput,
    state: str | None,
    verify: bool,
    verifier: Callable[[StateStore], list[CheckResult] | None],
    claude_cap: int | None,
) -> HookAnswer:
    store = StateStore(state_path_for(payload, state), lock_timeout=HOOK_LOCK_TIMEOUT)
    if not store.exists():
        return _allow(f"no state file at {store.path}; {_letting(event)}")
    if event in (HookEvent.PRE_TOOL_USE, HookEvent.POST_TOOL_USE):
        if _work_ended(store.load()) is None:
            return HookAnswer(HookAction.ALLOW)  # the common case: read only, nothing written
        with store.update() as current:
            answer = _answer_tool_use(current, payload, event)
            _remember(current, event, answer)
            return answer
    active = payload.stop_hook_active and not store.load().control.hook.block_when_active
    if active and not verify:
        return _allow("stop_hook_active is true; allowing the stop")
    results = verifier(store) if verify else None
    with store.update() as current:
        if results is not None:
            record_verification(current, results)
        if active:
            answer = _allow_while_active(current)
        else:
            answer = decide_hook(current, payload, claude_cap=claude_cap)
        _remember(current, event, answer)
        return answer
