"""Replay recorded agent trajectories through the loop under different tool-error policies.

A trajectory file is τ-bench's format (a JSON list of ``{"reward", "traj": [messages]}``
with OpenAI-style messages; e.g. ``historical_trajectories/gpt-4o-airline.json`` of the
sierra-research/tau-bench repository). Each agent turn (from a user message to the
agent's text reply) is replayed through `Agent.run`: a `ScriptedModel` plays the recorded
assistant messages, and every tool returns its recorded result, failing (``ToolError``)
where the recording says ``Error: ...``. A turn that stops ``tool_error`` or ``stalled``
where the recording went on is a run the policy would have cut short.

Run: ``python benchmarks/replay_trajectories.py --trajectories PATH``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import defaultdict, deque
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from convergent import Agent, Limits, ModelResponse, ScriptedModel, StopReason, ToolCall
from convergent.exceptions import ToolError
from convergent.stop import canonical_call_key
from convergent.tools import Tool


class _Free(BaseModel):
    """Arguments as recorded (the replay checks nothing)."""


class RecordedTool(Tool):
    """A tool that answers with the recorded results of its calls, in order."""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Pass the recorded arguments on."""
        return dict(arguments)


def recorded_tools(results: dict[str, deque[str]], names: set[str]) -> list[Tool]:
    def make(name: str) -> Tool:
        async def answer(**arguments: Any) -> str:
            text = results[canonical_call_key(name, arguments)].popleft()
            if text.startswith("Error"):
                raise ToolError(text)
            return text

        return RecordedTool(
            name=name,
            description=name,
            function=answer,
            arguments_model=_Free,
            parameters={"type": "object"},
            terminal=name == "transfer_to_human_agents",
        )

    return [make(name) for name in sorted(names)]


def turns(messages: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The agent's turns: the messages after each user message, up to the next one."""
    turn: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "user":
            if turn:
                yield turn
            turn = []
        elif message["role"] in ("assistant", "tool"):
            turn.append(message)
    if turn:
        yield turn


async def replay_turn(turn: list[dict[str, Any]], agent_options: dict[str, Any]) -> StopReason:
    responses: list[ModelResponse] = []
    results: dict[str, deque[str]] = defaultdict(deque)
    by_id: dict[str, str] = {}
    names: set[str] = set()
    for message in turn:
        if message["role"] == "assistant":
            calls = []
            for raw in message.get("tool_calls") or []:
                arguments = json.loads(raw["function"]["arguments"] or "{}")
                name = raw["function"]["name"]
                names.add(name)
                by_id[raw["id"]] = canonical_call_key(name, arguments)
                calls.append(ToolCall(id=raw["id"], name=name, arguments=arguments))
            responses.append(
                ModelResponse(content=message.get("content") or "", tool_calls=tuple(calls))
            )
        else:
            results[by_id[message["tool_call_id"]]].append(str(message.get("content", "")))
    if not responses or responses[-1].tool_calls:
        responses.append(ModelResponse(content="(the recording ends here)"))
    agent = Agent(
        ScriptedModel(responses),
        recorded_tools(results, names),
        limits=Limits(max_cycles=len(responses) + 1),
        record_events=False,
        **agent_options,
    )
    return (await agent.run("replay")).stop_reason


POLICIES: dict[str, dict[str, Any]] = {
    "stop at the first error": {"on_tool_error": "stop"},
    "3 errors in a row (default)": {},
}


async def main(trajectories: list[dict[str, Any]]) -> None:
    successful = [t for t in trajectories if t["reward"] == 1]
    handed_off = 0
    print(f"{len(trajectories)} trajectories, {len(successful)} successful")
    for label, options in POLICIES.items():
        cut: dict[bool, int] = {True: 0, False: 0}
        for trajectory in trajectories:
            stops = [await replay_turn(turn, options) for turn in turns(trajectory["traj"])]
            early = any(
                stop in (StopReason.TOOL_ERROR, StopReason.STALLED) for stop in stops[:-1]
            ) or stops[-1] in (StopReason.TOOL_ERROR, StopReason.STALLED)
            cut[trajectory["reward"] == 1] += early
            if label.endswith("(default)"):
                handed_off += stops[-1] is StopReason.HANDED_OFF
        failed = len(trajectories) - len(successful)
        print(
            f"{label:<30} cuts short {cut[True]:>3} of {len(successful)} successful runs, "
            f"{cut[False]:>3} of {failed} failed ones"
        )
    print(f"runs ending in a hand-off (terminal tool): {handed_off}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", required=True, help="τ-bench trajectory JSON file")
    with open(parser.parse_args().trajectories, encoding="utf-8") as file:
        asyncio.run(main(json.load(file)))
