"""A streamed request's chat span records the time to its first chunk."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from convergent import Agent, calculator
from convergent.clock import Clock, use_clock
from convergent.telemetry import OpenTelemetryObserver
from convergent.testing import call, scripted

from .conftest import tree

SCRIPT = [call("calculator", expression="17*23"), "391"]


class Ticks(Clock):
    """Each reading of the monotonic clock is one second after the one before."""

    def __init__(self) -> None:
        self.readings = 0

    def monotonic(self) -> float:
        self.readings += 1
        return float(self.readings)


async def test_a_streamed_request_records_its_time_to_first_chunk(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    agent = Agent(scripted(*SCRIPT), [calculator], observers=[observer])
    with use_clock(Ticks()):
        await agent.run("17*23?", on_event=lambda event: None)
    chats = tree(exporter).named("chat")
    assert len(chats) == 2
    for span in chats:
        attributes = span.attributes or {}
        assert attributes["gen_ai.request.stream"] is True
        # the request starts at one reading and its first chunk comes at the next
        assert attributes["gen_ai.response.time_to_first_chunk"] == 1.0


async def test_a_request_nobody_streamed_has_neither_attribute(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    await Agent(scripted(*SCRIPT), [calculator], observers=[observer]).run("17*23?")
    for span in tree(exporter).named("chat"):
        attributes = span.attributes or {}
        assert "gen_ai.request.stream" not in attributes  # unset means not streamed
        assert "gen_ai.response.time_to_first_chunk" not in attributes
