"""SWE-bench agents' trajectories: mini-swe-agent and SWE-agent.

- ``mini-swe-agent``: ``*.traj.json``, ``{"info", "messages", "instance_id"}``. Version 1
  runs one bash command per reply, in a ```` ```bash ```` block, and the next message is
  its output; a reply with no block or several is the text protocol's format error: it
  is replayed as a call to no tool (``(no command)``, with the reply's text as its
  arguments: the same mistake only where the reply is the same), the model's mistake as
  the loop counts it, answered by the reminder that followed it. Version 2
  (``trajectory_format: mini-swe-agent-1.1``) uses tool calls and tool messages; a reply
  without tool calls is not in the messages, only the harness's answer to it (a user
  message marked ``FormatError``: every reply must call a tool). In convergent's loop
  such a reply is an answer, never a call the run cannot make: it is replayed as an
  answer whose text the recording does not hold (`RecordedReply.unrecorded`, counted as
  the gap ``replies_unrecorded``), which ends its turn, and the harness's answer starts
  the next turn, as a user message does. A non-zero exit code is a result, not a
  failure.
- ``swe-agent``: ``*.traj``, ``{"trajectory": [{"action", "observation", ...}], "history",
  "info"}``: one command per step, named by its first word (``open``, ``edit``,
  ``python``...), its observation the result; function-calling runs name the tool in
  the history's ``tool_calls``. A file with only a ``history`` is read from it. An edit
  the editor refused (``Your proposed edit has introduced new syntax error(s)``: not
  applied) is a failed call; a step without an action (the reply had no command the
  harness could parse, and it asked again) is the model's mistake (its reply's text its
  arguments); the harness's own
  exit when a limit is hit (``exit_cost``, ``exit_context``, ``exit_format``,
  ``exit_api``) ends the run, no call of the model's. A command is named by the first
  word of its first line that is not a comment. The model is the one ``args.yaml``
  beside the runs, or ``metadata.yaml`` above them, names.

Labels come from the SWE-bench evaluation beside the runs (see `_swebench_labels`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import re2

from convergent._yaml import UnusableYaml, load_yaml
from convergent.replay._readers._common import (
    READ_ERRORS,
    TurnBuilder,
    as_arguments,
    as_text,
    usage_of,
)
from convergent.replay._readers._format import Format, Sample
from convergent.replay._readers._swebench_labels import swebench_label
from convergent.replay._recording import Malformed, Trajectory, Turn
from convergent.replay._tool_kinds import SWE_AGENT_READ_ONLY

__all__ = ["MINI_SWE_AGENT", "SWE_AGENT"]

_BASH_BLOCK = re2.compile(r"(?s)```(?:bash|mswea_bash_command)\s*\n(.*?)\n```")
"""A command block of mini-swe-agent's text protocol (RE2: linear in the reply's length)."""
_REFUSED_EDIT = "Your proposed edit has introduced new syntax error"
"""How SWE-agent's editor words an edit its linter refused (the file is left unchanged)."""
_FORMAT_ERROR = "FormatError"
_HARNESS_EXITS = frozenset({"exit_cost", "exit_context", "exit_format", "exit_api"})
"""Actions SWE-agent takes itself when a limit is hit: not the model's calls."""
_NO_COMMAND = "(no command)"
"""The name of a reply whose command the harness could not parse: no tool has it."""


def _claims_mini(path: Path, sample: Sample) -> bool:
    value = sample.value
    if sample.lines or not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    info: dict[str, Any] = value["info"] if isinstance(value.get("info"), dict) else {}
    return (
        "instance_id" in value
        or "mini_version" in info
        or str(value.get("trajectory_format", "")).startswith("mini-swe-agent")
    )


def _read_mini(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    data = sample.value
    try:
        instance = str(data.get("instance_id") or path.name.removesuffix(".traj.json"))
        config = (data.get("info") or {}).get("config") or {}
        model = str((config.get("model") or {}).get("model_name") or "")
        builder = TurnBuilder()
        yield Trajectory(
            id=path.name,
            name=instance,
            source=str(path),
            model=model,
            success=swebench_label(path, instance),
            turns=_mini_turns(builder, data["messages"]),
            gaps=dict(builder.gaps),
        )
    except READ_ERRORS as exc:
        yield Malformed(str(path), f"not a mini-swe-agent trajectory ({type(exc).__name__}: {exc})")


def _mini_usage(message: Mapping[str, Any]) -> Any:
    extra = message.get("extra") or {}
    usage = (extra.get("response") or {}).get("usage") or {}
    cost = extra.get("cost", usage.get("cost"))
    return usage_of(usage.get("prompt_tokens"), usage.get("completion_tokens"), cost)


def _mini_turns(builder: TurnBuilder, messages: Sequence[Mapping[str, Any]]) -> tuple[Turn, ...]:
    """The run's turns: one, and one more after each reply its harness did not record."""
    tool_calling = any(message.get("tool_calls") for message in messages)
    pending_output = False
    for message in messages:
        role = message.get("role")
        content = as_text(message.get("content"))
        extra: Mapping[str, Any] = message.get("extra") or {}
        if role == "assistant" and tool_calling:
            calls = [
                (
                    raw.get("id"),
                    raw["function"]["name"],
                    as_arguments(raw["function"].get("arguments")),
                )
                for raw in message.get("tool_calls") or []
            ]
            builder.assistant(content, calls, _mini_usage(message))
        elif role == "assistant":
            commands = _BASH_BLOCK.findall(content)
            pending_output = True
            if len(commands) == 1:
                builder.assistant(
                    content, [(None, "bash", {"command": commands[0]})], _mini_usage(message)
                )
            else:  # the text protocol's format error: a reply its harness refused
                blocks = {"command_blocks": len(commands), "reply": content}
                builder.assistant(content, [(None, _NO_COMMAND, blocks)], _mini_usage(message))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            builder.result(None if call_id is None else str(call_id), content)
        elif role == "exit" and builder.pending_call() is not None:
            builder.result_of_last_call(content)  # the submission ends the run
        elif role == "user" and tool_calling and _interrupt(extra) == _FORMAT_ERROR:
            builder.unrecorded_reply()  # a reply without tool calls: only this answer is kept
        elif role == "user" and pending_output:
            refused = "command_blocks" in (builder.pending_call() or {})
            builder.result_of_last_call(content, mistake=refused)
            pending_output = False
    return builder.turns()


def _interrupt(extra: Any) -> Any:
    return extra.get("interrupt_type") if isinstance(extra, dict) else None


def _claims_swe_agent(path: Path, sample: Sample) -> bool:
    value = sample.value
    if sample.lines or not isinstance(value, dict):
        return False
    if isinstance(value.get("trajectory"), list):
        return "history" in value or "info" in value
    history = value.get("history")
    return (
        path.suffix == ".traj"
        and isinstance(history, list)
        and bool(history)
        and isinstance(history[0], dict)
        and "role" in history[0]
    )


def _read_swe_agent(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    data = sample.value
    try:
        instance = path.name.removesuffix(".traj")
        info = data.get("info") or {}
        stats = info.get("model_stats") or {}
        builder = TurnBuilder()
        steps = data.get("trajectory") or []
        if steps:
            _steps(builder, steps, _history_tools(data.get("history") or []))
        else:
            _history(builder, data.get("history") or [])
        turn = builder.turns()
        yield Trajectory(
            id=path.name,
            name=instance,
            source=str(path),
            model=str(stats.get("model_name") or info.get("model_name") or _model_beside(path)),
            success=swebench_label(path, instance),
            turns=turn[:1],
            read_only=SWE_AGENT_READ_ONLY,
            gaps=dict(builder.gaps),
        )
    except READ_ERRORS as exc:
        yield Malformed(str(path), f"not a SWE-agent trajectory ({type(exc).__name__}: {exc})")


def _steps(
    builder: TurnBuilder,
    steps: Sequence[Mapping[str, Any]],
    tools: Sequence[tuple[str, Mapping[str, Any]]],
) -> None:
    if len(tools) != len(steps):  # not one call per step: name commands by their word
        tools = []
    for index, step in enumerate(steps):
        action = str(step.get("action") or "").strip()
        if action in _HARNESS_EXITS:
            break  # the harness ends the run: the model made no call
        if not action:  # no command the harness could parse: it asked again
            response = as_text(step.get("response"))
            builder.assistant(response, [(None, _NO_COMMAND, {"reply": response})])
            builder.result_of_last_call(as_text(step.get("observation")), mistake=True)
            continue
        name, arguments = tools[index] if tools else (_command(action), {})
        builder.assistant(
            as_text(step.get("response")), [(None, name, arguments or {"command": action})]
        )
        observation = as_text(step.get("observation"))
        builder.result_of_last_call(observation, _REFUSED_EDIT in observation)


def _history(builder: TurnBuilder, history: Sequence[Mapping[str, Any]]) -> None:
    """A run recorded only as its history: the assistant's calls and their answers."""
    for message in history:
        role = message.get("role")
        content = as_text(message.get("content"))
        if role == "assistant":
            calls = [
                (
                    raw.get("id"),
                    str(raw["function"]["name"]),
                    as_arguments(raw["function"].get("arguments")),
                )
                for raw in message.get("tool_calls") or []
            ]
            action = str(message.get("action") or "").strip()
            if not calls and action:
                calls = [(None, _command(action), {"command": action})]
            builder.assistant(content, calls)
        elif role == "tool" or (role == "user" and builder.pending_call() is not None):
            ids = message.get("tool_call_ids") or [message.get("tool_call_id")]
            call_id = ids[0] if ids else None
            refused = _REFUSED_EDIT in content
            if call_id is not None:
                builder.result(str(call_id), content, refused)
            else:
                builder.result_of_last_call(content, refused)


def _command(action: str) -> str:
    """The command's name: the first word of its first line that is not a comment."""
    lines = [line.strip() for line in action.splitlines()]
    first = next((line for line in lines if line and not line.startswith("#")), action.strip())
    return first.split(maxsplit=1)[0] if first else action


@functools.lru_cache(maxsize=256)
def _model_in(folder: Path) -> str:
    """The model ``args.yaml`` (SWE-agent's run arguments) or ``metadata.yaml`` names."""
    args = _yaml(folder / "args.yaml")
    model = ((args.get("agent") or {}).get("model") or {}) if isinstance(args, dict) else {}
    if isinstance(model, dict) and model.get("model_name"):
        return str(model["model_name"])
    metadata = _yaml(folder / "metadata.yaml")
    if isinstance(metadata, dict) and metadata.get("name"):
        return str(metadata["name"]).rsplit("+", 1)[-1].strip()
    return ""


def _model_beside(path: Path) -> str:
    folder = path.parent
    for _ in range(3):
        found = _model_in(folder)
        if found:
            return found
        folder = folder.parent
    return ""


def _yaml(path: Path) -> Any:
    try:
        if not path.is_file() or path.stat().st_size > 1024 * 1024:
            return None
        return load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, UnusableYaml):
        return None


def _history_tools(history: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """The tool and arguments of each step, where the history has function calls."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    for message in history:
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        raw = message["tool_calls"][0]["function"]
        found.append((str(raw["name"]), as_arguments(raw.get("arguments"))))
    return found


MINI_SWE_AGENT = Format(
    name="mini-swe-agent",
    expects="a mini-swe-agent trajectory (*.traj.json with 'messages' and 'instance_id')",
    claims=_claims_mini,
    read=_read_mini,
)
SWE_AGENT = Format(
    name="swe-agent",
    expects="a SWE-agent trajectory (*.traj with 'trajectory' and 'history')",
    claims=_claims_swe_agent,
    read=_read_swe_agent,
)
