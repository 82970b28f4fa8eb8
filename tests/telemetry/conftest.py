"""Span recording for the telemetry tests: an SDK provider with an in-memory exporter.

No fixture leaves a global tracer provider behind: `global_provider` installs one for a
test and restores the API's unset state afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from convergent.telemetry import CAPTURE_CONTENT_ENV, OpenTelemetryObserver


@pytest.fixture(autouse=True)
def _content_env_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def observer(provider: TracerProvider) -> OpenTelemetryObserver:
    return OpenTelemetryObserver(tracer_provider=provider)


@pytest.fixture
def global_provider(provider: TracerProvider) -> Iterator[TracerProvider]:
    """``provider`` as the process's global tracer provider, for one test."""
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = None, Once()
    trace.set_tracer_provider(provider)
    try:
        yield provider
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


class Tree:
    """Finished spans, looked up by name and parent."""

    def __init__(self, spans: Sequence[ReadableSpan]) -> None:
        self.spans = list(spans)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return sorted(
            (s for s in self.spans if s.name.startswith(prefix)), key=lambda s: s.start_time or 0
        )

    def root(self) -> ReadableSpan:
        (root,) = self.named("invoke_agent")
        return root

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        found = [
            s
            for s in self.spans
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]
        return sorted(found, key=lambda s: s.start_time or 0)


def tree(exporter: InMemorySpanExporter) -> Tree:
    return Tree(exporter.get_finished_spans())
