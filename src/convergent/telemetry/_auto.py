"""The observer an agent adds by itself when an SDK tracer provider is configured."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace

from convergent.extensions import RunObserver
from convergent.telemetry._content import content_from_env
from convergent.telemetry._observer import OpenTelemetryObserver

__all__ = ["global_observer"]

_cached: tuple[object, bool, OpenTelemetryObserver] | None = None
_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


def global_observer(
    observers: Sequence[RunObserver], *, always: bool
) -> OpenTelemetryObserver | None:
    """The shared observer for the global tracer provider, or None.

    None when ``observers`` already hold an `OpenTelemetryObserver`, or, unless
    ``always``, when no SDK provider is configured (the API's default proxy or no-op).
    """
    global _cached
    if any(isinstance(observer, OpenTelemetryObserver) for observer in observers):
        return None
    provider = trace.get_tracer_provider()
    if not always and isinstance(provider, _NO_SDK):
        return None
    content = content_from_env()
    if _cached is None or _cached[0] is not provider or _cached[1] != content:
        _cached = (provider, content, OpenTelemetryObserver(record_content=content))
    return _cached[2]
