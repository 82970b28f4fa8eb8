"""Agents trace by themselves only when an SDK tracer provider is configured globally."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cli._probe import printed_by
from convergent import Agent, ScriptedModel, calculator
from convergent.loop.instrument import run_tracer
from convergent.telemetry import OpenTelemetryObserver
from convergent.testing import call, scripted

from .conftest import tree


def script() -> ScriptedModel:
    return scripted(call("calculator", expression="1+1"), "2")


async def test_a_configured_sdk_provider_traces_every_agent(
    global_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await Agent(script(), [calculator]).run("add")
    spans = tree(exporter)
    run = spans.root()
    names = [s.name for s in spans.children(run)]
    assert names == ["chat scripted", "execute_tool calculator", "chat scripted"]


async def test_instrument_false_traces_nothing(
    global_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    result = await Agent(script(), [calculator], instrument=False).run("add")
    assert result.cycles == 2 and exporter.get_finished_spans() == ()


async def test_an_explicit_observer_is_not_doubled_by_the_automatic_one(
    global_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    observer = OpenTelemetryObserver(record_content=True)
    await Agent(script(), [calculator], observers=[observer]).run("add")
    spans = tree(exporter)
    assert len(spans.named("invoke_agent")) == 1 and len(spans.named("chat")) == 2
    assert "gen_ai.input.messages" in (spans.root().attributes or {})


async def test_without_an_sdk_provider_no_observer_is_added(exporter: InMemorySpanExporter) -> None:
    assert run_tracer(None, []) is None
    assert run_tracer(False, []) is None
    # instrument=True traces through the API's proxy: nothing to record, the run is the same
    assert isinstance(run_tracer(True, []), OpenTelemetryObserver)
    result = await Agent(script(), [calculator], instrument=True).run("add")
    assert result.cycles == 2 and exporter.get_finished_spans() == ()


def test_an_untraced_process_never_imports_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from convergent import Agent, ScriptedModel\n"
        "result = Agent(ScriptedModel(['hi'])).run_sync('hello')\n"
        "assert result.output == 'hi'\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    assert printed_by(code).strip() == "[]"
