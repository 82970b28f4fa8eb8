"""τ-bench and τ²-bench result files.

- ``tau-bench``: a JSON list of runs ``{"task_id", "reward", "traj": [messages]}`` with
  OpenAI-style messages (``historical_trajectories/*.json`` of sierra-research/tau-bench,
  and what its ``run.py`` writes). τ-bench's environment words every failure ``Error:
  ...``; a run is successful when its reward is 1.
- ``tau2-bench``: a τ²-bench results file ``{"info", "tasks", "simulations": [...]}`` (or
  the list of simulations alone), each simulation with ``reward_info.reward`` and its
  ``messages``; tool messages carry ``error`` and ``requestor``: the simulated user's own
  tool calls belong to the user's side and separate the agent's turns. A simulation
  without a reward has no label.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from convergent.replay._readers._common import (
    READ_ERRORS,
    TurnBuilder,
    as_arguments,
    as_text,
    reward_label,
    usage_of,
)
from convergent.replay._readers._format import Format, Sample
from convergent.replay._recording import Malformed, Trajectory
from convergent.replay._tool_kinds import TAU_READ_ONLY, TAU_TERMINAL

__all__ = ["TAU2_BENCH", "TAU_BENCH"]


def _claims_tau(path: Path, sample: Sample) -> bool:
    value = sample.value
    return (
        not sample.lines
        and isinstance(value, list)
        and bool(value)
        and isinstance(value[0], dict)
        and "traj" in value[0]
        and "reward" in value[0]
    )


def _read_tau(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    model = path.stem.removesuffix("-airline").removesuffix("-retail")
    for index, run in enumerate(sample.value):
        where = f"{path}#{index}"
        try:
            name = f"task {run.get('task_id')} trial {run.get('trial', 0)}"
            builder = TurnBuilder()
            _tau_turns(builder, run["traj"])
            yield Trajectory(
                id=f"{path.name}#{index} {name}",
                name=name,
                source=str(path),
                model=model,
                success=reward_label(run["reward"]),
                turns=builder.turns(),
                read_only=TAU_READ_ONLY,
                terminal=TAU_TERMINAL,
                gaps=dict(builder.gaps),
            )
        except READ_ERRORS as exc:
            yield Malformed(where, f"not a tau-bench run ({type(exc).__name__}: {exc})")


def _tau_turns(builder: TurnBuilder, messages: list[Mapping[str, Any]]) -> None:
    for message in messages:
        role = message["role"]
        if role == "user":
            builder.user()
        elif role == "assistant":
            calls = [
                (
                    raw.get("id"),
                    raw["function"]["name"],
                    as_arguments(raw["function"].get("arguments")),
                )
                for raw in message.get("tool_calls") or []
            ]
            builder.assistant(as_text(message.get("content")), calls)
        elif role == "tool":
            text = as_text(message.get("content"))
            call_id = message.get("tool_call_id")
            builder.result(
                None if call_id is None else str(call_id),
                text,
                text.startswith("Error"),
                name=None if message.get("name") is None else str(message["name"]),
            )


def _simulations(sample: Sample) -> list[Any] | None:
    value = sample.value
    if sample.lines:
        return None
    if isinstance(value, dict) and isinstance(value.get("simulations"), list):
        simulations: list[Any] = value["simulations"]
        return simulations
    if (
        isinstance(value, list)
        and value
        and isinstance(value[0], dict)
        and "reward_info" in value[0]
        and "messages" in value[0]
    ):
        return value
    return None


def _claims_tau2(path: Path, sample: Sample) -> bool:
    return _simulations(sample) is not None


def _read_tau2(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    simulations = _simulations(sample) or []
    value = sample.value
    info = (value.get("info") if isinstance(value, dict) else None) or {}
    for index, simulation in enumerate(simulations):
        where = f"{path}#{index}"
        try:
            own_info = info or simulation.get("info") or {}
            model = str((own_info.get("agent_info") or {}).get("llm") or path.stem)
            reward = (simulation.get("reward_info") or {}).get("reward")
            name = f"task {simulation.get('task_id')} trial {simulation.get('trial', 0)}"
            builder = TurnBuilder()
            _tau2_turns(builder, simulation["messages"])
            yield Trajectory(
                id=f"{path.name}#{simulation.get('id', index)} {name}",
                name=name,
                source=str(path),
                model=model,
                success=None if reward is None else reward_label(reward),
                turns=builder.turns(),
                read_only=TAU_READ_ONLY,
                terminal=TAU_TERMINAL,
                gaps=dict(builder.gaps),
            )
        except READ_ERRORS as exc:
            yield Malformed(where, f"not a tau2-bench simulation ({type(exc).__name__}: {exc})")


def _tau2_turns(builder: TurnBuilder, messages: list[Mapping[str, Any]]) -> None:
    for message in messages:
        role = message["role"]
        if role == "tool" and message.get("requestor") == "user":
            continue  # the simulated user's own tool result: the user's side
        if role == "user":
            builder.user()
        elif role == "assistant":
            calls = [
                (raw.get("id"), raw["name"], as_arguments(raw.get("arguments")))
                for raw in message.get("tool_calls") or []
            ]
            usage = message.get("usage") or {}
            builder.assistant(
                as_text(message.get("content")),
                calls,
                usage_of(
                    usage.get("prompt_tokens"), usage.get("completion_tokens"), message.get("cost")
                ),
            )
        elif role == "tool":
            call_id = message.get("id")
            builder.result(
                None if call_id is None else str(call_id),
                as_text(message.get("content")),
                bool(message.get("error")),
            )


TAU_BENCH = Format(
    name="tau-bench",
    expects="a tau-bench results file (a JSON list of runs with 'traj' and 'reward')",
    claims=_claims_tau,
    read=_read_tau,
)
TAU2_BENCH = Format(
    name="tau2-bench",
    expects="a tau2-bench results file (an object with 'simulations')",
    claims=_claims_tau2,
    read=_read_tau2,
)
