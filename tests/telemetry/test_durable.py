"""Resumed durable runs: each `Agent.run` call is its own run span, in one conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import convergent
from convergent import (
    Agent,
    AgentSpec,
    Limits,
    NeedsUserInput,
    StopReason,
    Usage,
    build_agent,
    tool,
)
from convergent.durability.sqlite import RunStore
from convergent.telemetry import OpenTelemetryObserver
from convergent.testing import answer, call, scripted, step, write_script

from .conftest import tree


@tool
def favourite_colour() -> str:
    """Ask the user for their favourite colour."""
    raise NeedsUserInput("What is your favourite colour?")


def attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_resumed_run_is_a_second_run_span_of_the_same_conversation(
    tmp_path: Path, observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    usage = Usage(input_tokens=10, output_tokens=3, requests=1)
    ask = call("favourite_colour", call_id="q1")
    with RunStore(tmp_path / "runs.db") as store:
        first = Agent(
            scripted(step(ask, usage=usage)),
            [favourite_colour],
            observers=[observer],
            store=store,
        )
        stopped = await first.run("pick a colour", run_id="durable")
        assert stopped.stop_reason is StopReason.NEEDS_USER
        second = Agent(
            scripted(answer("blue it is", usage=usage)),
            [favourite_colour],
            observers=[observer],
            store=store,
        )
        resumed = await convergent.resume(
            "durable", store=store, agent=second, answers={"q1": "blue"}
        )
        assert resumed.stop_reason is StopReason.COMPLETED and resumed.cycles == 2

    spans = tree(exporter)
    before, after = spans.named("invoke_agent")
    assert before.context.trace_id != after.context.trace_id
    for span in (before, after):
        assert attributes(span)["gen_ai.conversation.id"] == "durable"
    assert attributes(before)["convergent.resumed"] is False
    assert attributes(before)["convergent.stop_reason"] == "needs_user"
    assert "convergent.stop_detail" not in attributes(before)  # the question is content
    assert before.status.status_code is StatusCode.UNSET
    assert attributes(after)["convergent.resumed"] is True
    assert attributes(after)["convergent.stop_reason"] == "completed"
    # cycles count the whole run; usage only this invocation's requests
    assert attributes(after)["convergent.cycles"] == 2
    assert attributes(after)["gen_ai.usage.input_tokens"] == 10
    assert [s.name for s in spans.children(before)] == [
        "chat scripted",
        "execute_tool favourite_colour",
    ]
    asked = spans.children(before)[1]
    assert attributes(asked)["convergent.tool.outcome"] == "needs_user"
    assert asked.status.status_code is StatusCode.UNSET
    answered, chat = spans.children(after)
    # the answer settles the call on resume: a span of no duration, in the new trace
    assert answered.name == "execute_tool favourite_colour"
    assert attributes(answered)["gen_ai.tool.call.id"] == "q1"
    assert attributes(answered)["convergent.tool.outcome"] == "ok"
    assert answered.start_time == answered.end_time
    assert chat.name == "chat scripted" and attributes(chat)["convergent.cycle"] == 2


async def test_convergent_resume_is_traced_through_the_global_provider(
    tmp_path: Path, global_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = write_script(
        tmp_path / "script.json",
        call("calculator", expression="6*7"),
        "42, unchecked",  # the answer after the max_cycles stop
        "42",
    )
    spec = AgentSpec(model=model, tools=("calculator",), limits=Limits(max_cycles=1))
    with RunStore(tmp_path / "runs.db") as store:
        cut = await build_agent(spec).run("6 times 7", run_id="long", store=store)
        assert cut.stop_reason is StopReason.MAX_CYCLES
        done = await convergent.resume("long", store=store, limits=Limits(max_cycles=5))
        assert done.stop_reason is StopReason.COMPLETED and done.output == "42"

    spans = tree(exporter)
    before, after = spans.named("invoke_agent")
    assert attributes(before)["convergent.stop_reason"] == "max_cycles"
    assert attributes(after)["convergent.resumed"] is True
    assert attributes(after)["gen_ai.request.model"] == "script.json"
    assert [s.name for s in spans.children(before)] == [
        "chat script.json",
        "execute_tool calculator",
    ]
    assert [s.name for s in spans.children(after)] == ["chat script.json"]
