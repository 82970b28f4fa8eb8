"""Readers: one per corpus format, each turning a file into `Trajectory` records.

Formats:
- ``tau-bench``: a JSON list of ``{"task_id", "reward", "traj": [messages]}`` with
  OpenAI-style messages (``historical_trajectories/*.json`` of sierra-research/tau-bench).
  A result starting ``Error`` is a failure, as τ-bench's environment words them.
- ``tau2-bench``: a results file of τ²-bench, ``{"info", "tasks", "simulations": [...]}``,
  each simulation with ``reward_info.reward`` and its ``messages``; tool messages carry
  ``error`` and ``requestor`` (the simulated user's own tool calls are the user's side).

- ``mini-swe-agent``: a folder of mini-swe-agent ``*.traj.json`` runs (one bash command
  per reply) with the evaluation's ``results_summary.json``.

A path may be one file or a folder, read file by file in name order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.replay.tool_kinds import TAU_READ_ONLY, TAU_TERMINAL
from benchmarks.replay.trajectory import RecordedCall, RecordedReply, Trajectory, Turn


class CorpusError(ValueError):
    """A corpus file that does not fit its format; the message names the file and why."""


Reader = Callable[[Path, Any], list[Trajectory]]


def read_corpus(fmt: str, path: Path) -> list[Trajectory]:
    """Read every trajectory of a file or folder in the given format.

    Raises:
        CorpusError: If the format is unknown, the path is missing, or a file does not fit.
    """
    if fmt not in READERS:
        raise CorpusError(f"unknown corpus format {fmt!r} (known: {', '.join(READERS)})")
    if not path.exists():
        raise CorpusError(f"{path}: no such file or folder")
    if fmt in FOLDER_READERS:
        if not path.is_dir():
            raise CorpusError(f"{path}: a {fmt} corpus is a folder")
        return FOLDER_READERS[fmt](path)
    reader = FILE_READERS[fmt]
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise CorpusError(f"{path}: no .json files in this folder")
    trajectories: list[Trajectory] = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorpusError(f"{file}: not a readable JSON file ({exc})") from None
        try:
            trajectories.extend(reader(file, data))
        except CorpusError:
            raise
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise CorpusError(f"{file}: not a {fmt} file ({type(exc).__name__}: {exc})") from None
    return trajectories


def read_tau_bench(file: Path, data: Any) -> list[Trajectory]:
    """τ-bench's format: a list of runs, each with ``reward`` and ``traj``."""
    if not isinstance(data, list):
        raise CorpusError(f"{file}: a tau-bench file is a JSON list of runs")
    model = file.stem.removesuffix("-airline").removesuffix("-retail")
    runs: list[Trajectory] = []
    for index, run in enumerate(data):
        calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
        results: dict[str, str] = {}
        for message in run["traj"]:
            if message["role"] == "tool":
                results[message["tool_call_id"]] = str(message.get("content") or "")
            for raw in message.get("tool_calls") or []:
                function = raw["function"]
                arguments = function.get("arguments") or "{}"
                if isinstance(arguments, str):
                    arguments = json.loads(arguments)
                calls[raw["id"]] = (function["name"], arguments)
        # τ-bench's environment words every failure "Error: ..."
        outcomes = {call_id: (text, text.startswith("Error")) for call_id, text in results.items()}
        turns = _turns(run["traj"], calls, outcomes)
        runs.append(
            Trajectory(
                id=f"{file.name}#{index} task {run.get('task_id')} trial {run.get('trial', 0)}",
                corpus=file.name,
                model=model,
                success=_success(run["reward"]),
                turns=turns,
                read_only=TAU_READ_ONLY,
                terminal=TAU_TERMINAL,
            )
        )
    return runs


def read_tau2_bench(file: Path, data: Any) -> list[Trajectory]:
    """τ²-bench's results format: ``simulations`` with ``reward_info`` and ``messages``."""
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise CorpusError(f"{file}: a tau2-bench file is an object with a 'simulations' list")
    info = data.get("info") or {}
    model = str((info.get("agent_info") or {}).get("llm") or file.stem)
    runs: list[Trajectory] = []
    for simulation in data["simulations"]:
        reward = (simulation.get("reward_info") or {}).get("reward")
        if reward is None:
            continue  # not evaluated: no label to measure against
        calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
        results: dict[str, tuple[str, bool]] = {}
        for message in simulation["messages"]:
            if message["role"] == "tool":
                results[message["id"]] = (
                    str(message.get("content") or ""),
                    bool(message.get("error")),
                )
            for raw in message.get("tool_calls") or []:
                calls[raw["id"]] = (raw["name"], raw.get("arguments") or {})
        agent_side = [
            message
            for message in simulation["messages"]
            if not (message["role"] == "tool" and message.get("requestor") == "user")
        ]
        turns = _turns(agent_side, calls, results)
        runs.append(
            Trajectory(
                id=(
                    f"{file.name}#{simulation.get('id')} task "
                    f"{simulation.get('task_id')} trial {simulation.get('trial', 0)}"
                ),
                corpus=file.name,
                model=model,
                success=_success(reward),
                turns=turns,
                read_only=TAU_READ_ONLY,
                terminal=TAU_TERMINAL,
            )
        )
    return runs


def read_mini_swe_agent(folder: Path) -> list[Trajectory]:
    """mini-swe-agent's runs: ``*.traj.json`` files under a folder with ``results_summary.json``.

    Each assistant message holds one ```` ```bash ```` block: that is the call (a ``bash``
    tool, arguments ``{"command": ...}``), and the next message is its result. A message
    with no block or several is the text protocol's format error, answered by the harness
    with a reminder: the message and the reminder are left out, as a tool-calling model
    would not produce them. A command's non-zero exit code is a result, not a tool failure.
    The labels are ``instances[].resolved`` of ``results_summary.json``.
    """
    summary = folder / "results_summary.json"
    try:
        instances = json.loads(summary.read_text(encoding="utf-8"))["instances"]
        resolved = {item["instance_id"]: bool(item["resolved"]) for item in instances}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError(f"{summary}: no readable instances[].resolved ({exc})") from None
    runs: list[Trajectory] = []
    for file in sorted(folder.rglob("*.traj.json")):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            instance = data["instance_id"]
            messages = data["messages"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorpusError(f"{file}: not a mini-swe-agent trajectory ({exc})") from None
        if instance not in resolved:
            continue  # not evaluated: no label
        replies: list[RecordedReply] = []
        for message, answer in zip(messages, [*messages[1:], None], strict=True):
            if message["role"] != "assistant":
                continue
            commands = _BASH_BLOCK.findall(str(message.get("content") or ""))
            if len(commands) != 1:
                continue
            result = None if answer is None else str(answer.get("content") or "")
            call = RecordedCall("bash", {"command": commands[0]}, result, False)
            replies.append(RecordedReply(str(message["content"]), (call,)))
        model = str(
            ((data.get("info") or {}).get("config") or {}).get("model", {}).get("model_name", "")
        )
        runs.append(
            Trajectory(
                id=f"{file.name}",
                corpus=folder.name,
                model=model or folder.name,
                success=resolved[instance],
                turns=(tuple(replies),) if replies else (),
                read_only=frozenset(),
                terminal=frozenset(),
            )
        )
    if not runs:
        raise CorpusError(f"{folder}: no labelled *.traj.json files")
    return runs


_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)

FILE_READERS: dict[str, Reader] = {"tau-bench": read_tau_bench, "tau2-bench": read_tau2_bench}
"""Formats read file by file, by the name the command line uses."""

FOLDER_READERS: dict[str, Callable[[Path], list[Trajectory]]] = {
    "mini-swe-agent": read_mini_swe_agent
}
"""Formats read as a whole folder (runs and their labels in separate files)."""

READERS = sorted([*FILE_READERS, *FOLDER_READERS])
"""Every known format."""


def _success(reward: Any) -> bool:
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise ValueError(f"a reward must be a number, got {reward!r}")
    return reward >= 1 - 1e-6


def _turns(
    messages: Sequence[Mapping[str, Any]],
    calls: Mapping[str, tuple[str, Mapping[str, Any]]],
    results: Mapping[str, tuple[str, bool]],
) -> tuple[Turn, ...]:
    """Split the agent's messages into turns at each user message (empty turns dropped).

    Args:
        messages: The conversation, agent side.
        calls: Each call id's tool name and arguments.
        results: Each call id's result and whether it failed (missing: no result recorded).
    """

    def call(call_id: str) -> RecordedCall:
        name, arguments = calls[call_id]
        result, failed = results.get(call_id, (None, False))
        return RecordedCall(name, arguments, result, failed)

    turns: list[Turn] = []
    turn: list[RecordedReply] = []
    for message in [*messages, {"role": "user"}]:
        if message["role"] == "user":
            if turn:
                turns.append(tuple(turn))
            turn = []
        elif message["role"] == "assistant":
            made = tuple(call(raw["id"]) for raw in message.get("tool_calls") or [])
            turn.append(RecordedReply(str(message.get("content") or ""), made))
    return tuple(turns)
