from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from convergent import ModelResponse, ScriptedModel, ToolCall
from convergent.messages import Message, SystemMessage, ToolSpec, UserMessage

# The seed's example: A = optimist + pragmatist (growth), B critic, C analyst, D innovator.
SEED_RECORDS: list[dict[str, Any]] = [
    {
        "archetype": "optimist",
        "key_insight": "Expanding into the Asian market is a major growth opportunity "
        "for the company.",
        "confidence": 4,
        "evidence": ["Regional demand doubled since 2020"],
        "research_backed": True,
    },
    {
        "archetype": "critic",
        "key_insight": "Strict data privacy regulation creates serious legal risk.",
        "confidence": 5,
        "evidence": ["New privacy law takes effect next year"],
        "research_backed": True,
    },
    {
        "archetype": "analyst",
        "key_insight": "Survey data shows customer demand rising twelve percent yearly.",
        "confidence": 4,
        "evidence": ["Industry survey 2024"],
        "research_backed": True,
    },
    {
        "archetype": "innovator",
        "key_insight": "A partner platform ecosystem could replace direct sales.",
        "confidence": 3,
        "evidence": ["Platform businesses scale faster"],
        "research_backed": False,
    },
    {
        "archetype": "pragmatist",
        "key_insight": "Asian market expansion is the company's clearest growth opportunity now.",
        "confidence": 4,
        "evidence": ["Existing distributor contacts in the region"],
        "research_backed": True,
    },
]

SEED_THEMES: list[tuple[str, list[str]]] = [
    ("Growth opportunity", ["optimist_insight", "pragmatist_insight"]),
    ("Regulatory risk", ["critic_insight"]),
    ("Market data supports", ["analyst_insight"]),
    ("Platform approach", ["innovator_insight"]),
]


def themes_json(themes: Sequence[tuple[str, Sequence[str]]]) -> str:
    """A grouping reply in the seed's schema."""
    return json.dumps(
        {
            "themes": [
                {"theme_id": f"t{n}", "theme_description": desc, "insight_ids": list(ids)}
                for n, (desc, ids) in enumerate(themes, start=1)
            ]
        }
    )


def is_grouping_request(messages: Sequence[Message]) -> bool:
    return (
        len(messages) == 1
        and isinstance(messages[0], UserMessage)
        and messages[0].content.startswith("Analyze these")
    )


def archetype_of(messages: Sequence[Message]) -> str:
    system = messages[0]
    assert isinstance(system, SystemMessage)
    match = re.match(r"You are the (\w+)\.", system.content)
    assert match, f"no archetype in system prompt {system.content[:60]!r}"
    return match.group(1).lower()


GroupingStep = str | BaseException | Callable[[], Any]


@dataclass
class SynthesisScript:
    """A scripted model for whole syntheses: perspectives, extractions and grouping.

    ``insights``: the extraction reply per archetype (a dict is sent as JSON, a list
    of strings is replayed reply by reply). ``searches``: research queries each
    archetype makes (one call per cycle) before answering. ``grouping``: replies to
    the grouping requests in order (a string, an exception to raise, or an async
    callable to await). ``failures``/``delays`` act on an archetype's agent requests.
    """

    insights: dict[str, Any]
    grouping: list[GroupingStep] = field(default_factory=list)
    searches: dict[str, list[str]] = field(default_factory=dict)
    failures: dict[str, BaseException] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)
    grouping_prompts: list[str] = field(default_factory=list)
    extraction_counts: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0

    def model(self) -> ScriptedModel:
        return ScriptedModel(self)

    async def __call__(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        if is_grouping_request(messages):
            self.grouping_prompts.append(messages[0].content)
            if not self.grouping:
                raise AssertionError("unexpected grouping request")
            step = self.grouping.pop(0)
            if isinstance(step, BaseException):
                raise step
            if callable(step):
                step = await step()
            assert isinstance(step, str)
            return ModelResponse(content=step)
        archetype = archetype_of(messages)
        if archetype in self.failures:
            raise self.failures[archetype]
        if archetype in self.delays:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self.delays[archetype])
            finally:
                self.in_flight -= 1
        last = messages[-1]
        if isinstance(last, UserMessage) and "JSON" in last.content and len(messages) > 2:
            return self._extraction(archetype)
        done = sum(1 for m in messages if m.role == "assistant")
        queries = self.searches.get(archetype, [])
        if done < len(queries):
            assert tools, "a research call was scripted but no tool was offered"
            call = ToolCall(
                id=f"{archetype}_{done}", name=tools[0].name, arguments={"query": queries[done]}
            )
            return ModelResponse(tool_calls=(call,))
        return ModelResponse(content=f"{archetype} answer: I have considered the question.")

    def _extraction(self, archetype: str) -> ModelResponse:
        count = self.extraction_counts.get(archetype, 0)
        self.extraction_counts[archetype] = count + 1
        reply = self.insights[archetype]
        if isinstance(reply, list):
            reply = reply[count]
        return ModelResponse(content=reply if isinstance(reply, str) else json.dumps(reply))


def extraction(record: dict[str, Any]) -> dict[str, Any]:
    """The structured-output reply for a seed record (what a model would send)."""
    return {k: record[k] for k in ("key_insight", "confidence", "evidence")}


@pytest.fixture
def seed_records() -> list[dict[str, Any]]:
    return [dict(r) for r in SEED_RECORDS]


@pytest.fixture(scope="session")
def convergent_exe() -> str:
    exe = Path(sys.executable).with_name("convergent")
    if not exe.exists():
        pytest.fail(f"console script not installed at {exe}: pip install --no-deps -e .")
    return str(exe)
