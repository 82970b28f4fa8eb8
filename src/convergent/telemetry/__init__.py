"""OpenTelemetry traces of convergent runs, following the GenAI semantic conventions.

An agent traces its runs by itself when an OpenTelemetry SDK tracer provider is
configured globally (``opentelemetry.trace.set_tracer_provider``); without one nothing
is added to the loop. `OpenTelemetryObserver` does the work and can be passed to
``Agent(observers=[...])`` explicitly, with its own tracer provider or with message
content recorded. `configure_otlp` sets up export to an OTLP/HTTP collector (the
``otel`` extra), as ``convergent run --otlp`` does. See docs/telemetry.md.
"""

from __future__ import annotations

from convergent.telemetry._content import CAPTURE_CONTENT_ENV
from convergent.telemetry._observer import OpenTelemetryObserver
from convergent.telemetry.otlp import configure_otlp

__all__ = ["CAPTURE_CONTENT_ENV", "OpenTelemetryObserver", "configure_otlp"]
