"""SWE-bench agents' trajectories: mini-swe-agent and SWE-agent.

- ``mini-swe-agent``: ``*.traj.json``, ``{"info", "messages", "instance_id"}``. Version 1
  runs one bash command per reply, in a ```` ```bash ```` block, and the next message is
  its output; a reply with no block or several is the text protocol's format error,
  left out with the reminder that answers it (a tool-calling model would not produce
  them). Version 2 (``trajectory_format: mini-swe-agent-1.1``) uses tool calls and tool
  messages. A non-zero exit code is a result, not a failure.
- ``swe-agent``: ``*.traj``, ``{"trajectory": [{"action", "observation", ...}], "history",
  "info"}``: one command per step, named by its first word (``open``, ``edit``,
  ``python``...), its observation the result; function-calling runs name the tool in
  the history's ``tool_calls``.

Labels come from the SWE-bench evaluation beside the runs (see `_swebench_labels`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from convergent.replay._readers._common import (
    READ_ERRORS,
    TurnBuilder,
    as_arguments,
    as_text,
    usage_of,
)
from convergent.replay._readers._format import Format, Sample
from convergent.replay._readers._swebench_labels import swebench_label
from convergent.replay._recording import Malformed, Trajectory
from convergent.replay._tool_kinds import SWE_AGENT_READ_ONLY

__all__ = ["MINI_SWE_AGENT", "SWE_AGENT"]

_BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)


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
        turn = _mini_turn(data["messages"])
        yield Trajectory(
            id=path.name,
            name=instance,
            source=str(path),
            model=model,
            success=swebench_label(path, instance),
            turns=(turn,) if turn else (),
        )
    except READ_ERRORS as exc:
        yield Malformed(str(path), f"not a mini-swe-agent trajectory ({type(exc).__name__}: {exc})")


def _mini_usage(message: Mapping[str, Any]) -> Any:
    extra = message.get("extra") or {}
    usage = (extra.get("response") or {}).get("usage") or {}
    cost = extra.get("cost", usage.get("cost"))
    return usage_of(usage.get("prompt_tokens"), usage.get("completion_tokens"), cost)


def _mini_turn(messages: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    builder = TurnBuilder()
    tool_calling = any(message.get("tool_calls") for message in messages)
    pending_output = False
    for message in messages:
        role = message.get("role")
        content = as_text(message.get("content"))
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
            pending_output = len(commands) == 1
            if pending_output:  # else a format error, answered by a reminder: both left out
                builder.assistant(
                    content, [(None, "bash", {"command": commands[0]})], _mini_usage(message)
                )
        elif role == "tool":
            builder.result(message.get("tool_call_id"), content)
        elif role == "user" and pending_output:
            builder.result_of_last_call(content)
            pending_output = False
    (turn,) = builder.turns() or ((),)
    return turn


def _claims_swe_agent(path: Path, sample: Sample) -> bool:
    value = sample.value
    return (
        not sample.lines
        and isinstance(value, dict)
        and isinstance(value.get("trajectory"), list)
        and ("history" in value or "info" in value)
    )


def _read_swe_agent(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    data = sample.value
    try:
        instance = path.name.removesuffix(".traj")
        info = data.get("info") or {}
        stats = info.get("model_stats") or {}
        builder = TurnBuilder()
        steps = data["trajectory"]
        tools = _history_tools(data.get("history") or [])
        if len(tools) != len(steps):  # not one call per step: name commands by their word
            tools = []
        for index, step in enumerate(steps):
            action = str(step.get("action") or "").strip()
            if not action:
                builder.assistant(as_text(step.get("response")))
                continue
            name, arguments = tools[index] if tools else (_command(action), {})
            builder.assistant(
                as_text(step.get("response")), [(None, name, arguments or {"command": action})]
            )
            builder.result_of_last_call(as_text(step.get("observation")))
        turn = builder.turns()
        yield Trajectory(
            id=path.name,
            name=instance,
            source=str(path),
            model=str(stats.get("model_name") or info.get("model_name") or ""),
            success=swebench_label(path, instance),
            turns=turn[:1],
            read_only=SWE_AGENT_READ_ONLY,
        )
    except READ_ERRORS as exc:
        yield Malformed(str(path), f"not a SWE-agent trajectory ({type(exc).__name__}: {exc})")


def _command(action: str) -> str:
    return action.split(maxsplit=1)[0]


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
