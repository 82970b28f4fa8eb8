"""Gate decisions, the user's answers and context compaction as span events."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from convergent import (
    Agent,
    Limits,
    ModelResponse,
    ScriptedModel,
    StopReason,
    Usage,
    tool,
)
from convergent.compaction import ContextCompressor
from convergent.gate import AskUser, ExecutiveGate, QueueChannel
from convergent.messages import Message, ToolSpec
from convergent.telemetry import OpenTelemetryObserver
from convergent.testing import answer, call, scripted, step

from .conftest import tree


@tool
def click(label: str) -> str:
    """Click a button.

    Args:
        label: The button's label.
    """
    return f"clicked {label}"


def scorer(*verdicts: dict[str, Any]) -> ScriptedModel:
    usage = Usage(input_tokens=30, output_tokens=8, requests=1)
    return scripted(*(answer(json.dumps(v), usage=usage) for v in verdicts), name="scorer")


def proposal(call_id: str, label: str) -> ModelResponse:
    return step(call("click", call_id=call_id, label=label), content="I think so")


UNSURE = {"clarity": 0.3, "certainty": 0.9, "question": "Cancel or submit?", "reason": "a guess"}
SURE = {"clarity": 1.0, "certainty": 0.95, "question": "", "reason": "clear"}


def gated_run(observer: OpenTelemetryObserver) -> Agent:
    model = ScriptedModel([proposal("c1", "Cancel"), proposal("c2", "Submit"), "Done."])
    asker = AskUser(QueueChannel(answers=["Submit, please"]), timeout=5.0)
    gate = ExecutiveGate(scorer(UNSURE, SURE), asker)
    return Agent(model, [click], gate=gate, observers=[observer], limits=Limits(max_cycles=6))


def events(exporter: InMemorySpanExporter) -> list[tuple[str, dict[str, Any]]]:
    run = tree(exporter).root()
    return [(e.name, dict(e.attributes or {})) for e in run.events]


async def test_gate_decisions_and_answers_are_span_events(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    result = await gated_run(observer).run("handle the form")
    assert result.stop_reason is StopReason.COMPLETED
    (asked, ask_attributes), (answered, answer), (executed, run_attributes) = events(exporter)
    assert asked == executed == "convergent.gate.decision" and answered == "convergent.user.answer"
    assert ask_attributes["convergent.gate.decision"] == "asked"
    assert ask_attributes["convergent.gate.trigger"] == "score"
    assert ask_attributes["convergent.gate.score"] == 0.3
    assert ask_attributes["convergent.gate.threshold"] == 0.85
    assert ask_attributes["convergent.gate.proposed"] == ("click",)
    assert ask_attributes["gen_ai.usage.input_tokens"] == 30
    assert "convergent.gate.question" not in ask_attributes
    assert answer["convergent.ask.status"] == "answered"
    assert answer["convergent.ask.channel"] == "queue"
    assert "convergent.ask.answer" not in answer
    assert run_attributes["convergent.gate.decision"] == "executed"
    spans = tree(exporter)
    # the question went to the user as an ask_user call in place of the discarded click
    names = [s.name for s in spans.named("execute_tool")]
    assert names == ["execute_tool ask_user", "execute_tool click"]


async def test_gate_questions_and_answers_are_content(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    observer = OpenTelemetryObserver(tracer_provider=provider, record_content=True)
    await gated_run(observer).run("handle the form")
    (_, asked), (_, answer), _ = events(exporter)
    assert asked["convergent.gate.question"] == "Cancel or submit?"
    assert asked["convergent.gate.reason"] == "a guess"
    assert answer["convergent.ask.question"] == "Cancel or submit?"
    assert answer["convergent.ask.answer"] == "Submit, please"


class Pages:
    """Reads pages of a long document, reporting usage as a provider would."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.page = 0

    def __call__(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        size = sum(len(getattr(m, "content", "")) for m in messages) // 4
        if not tools:
            return answer("Summary of the pages so far.")
        self.page += 1
        usage = Usage(input_tokens=size, output_tokens=5, requests=1)
        if self.page > self.pages:
            return answer("read them all", usage=usage)
        return step(call("page", n=self.page), usage=usage)


@tool
def page(n: int) -> str:
    """Return a long page.

    Args:
        n: Page number.
    """
    return f"page {n} " + "lorem ipsum " * 200


async def test_compaction_is_a_span_event(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(
        ScriptedModel(Pages(12)),
        [page],
        system_prompt="sys",
        observers=[observer],
        context_policy=ContextCompressor(context_window=3000),
        limits=Limits(max_cycles=20),
    )
    result = await agent.run("read every page")
    assert result.stop_reason is StopReason.COMPLETED
    recorded = events(exporter)
    compactions = [values for name, values in recorded if name == "convergent.context.compacted"]
    assert compactions, "the run should have compacted its context"
    first = compactions[0]
    assert first["convergent.compaction.method"] == "summary"
    assert first["convergent.compaction.window"] == 3000
    before = first["convergent.compaction.tokens_before"]
    assert first["convergent.compaction.tokens_after"] < before
    assert len(compactions) == len(recorded)
