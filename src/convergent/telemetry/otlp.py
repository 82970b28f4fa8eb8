"""Export traces to an OTLP/HTTP collector (the ``otel`` extra), as ``run --otlp`` does."""

from __future__ import annotations

import logging
import socket
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace

from convergent.exceptions import UserError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_LOG = logging.getLogger("convergent.telemetry")

CONNECT_TIMEOUT = 2.0
"""Seconds to wait for the collector to accept a connection before its spans are dropped."""

__all__ = ["EXTRA_HINT", "configure_otlp", "traces_url"]

EXTRA_HINT = (
    "pip install 'opentelemetry-sdk>=1.45.2,<2' 'opentelemetry-exporter-otlp-proto-http>=1.45.2,<2'"
)


def traces_url(endpoint: str) -> str:
    """The URL spans are posted to: ``endpoint``, or ``endpoint/v1/traces`` for a bare host.

    Raises:
        UserError: If ``endpoint`` is not an http(s) URL with a host.
    """
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(
            f"the OTLP endpoint must be an http(s) URL such as http://localhost:4318, "
            f"got {endpoint!r}"
        )
    try:
        parts.port  # noqa: B018  (reading it validates the port)
    except ValueError:
        raise UserError(f"the OTLP endpoint has a bad port: {endpoint!r}") from None
    path = parts.path if parts.path.strip("/") else "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _unreachable(url: str) -> str | None:
    """Why nothing listens at ``url`` (``connection refused``...), or None if it connects.

    Behind a proxy the collector is not dialled directly, so it is not checked.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if urllib.request.getproxies().get(parts.scheme) and not urllib.request.proxy_bypass(host):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
    except ConnectionRefusedError:
        return "connection refused"
    except TimeoutError:
        return f"no answer within {CONNECT_TIMEOUT:g}s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def _checked(exporter: SpanExporter, url: str) -> SpanExporter:
    """``exporter``, but one that gives up on a collector nothing listens at.

    The SDK retries a refused connection with growing pauses for about ten seconds and
    logs every retry; a run against a collector that is not there would end with those
    lines and that wait. This one checks the connection first and, when it fails, warns
    once and drops that batch and every later one at once.
    """
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class ReachableExporter(SpanExporter):
        def __init__(self) -> None:
            self.gone = False

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            if not self.gone:
                problem = _unreachable(url)
                if problem is None:
                    return exporter.export(spans)
                self.gone = True
                _LOG.warning("cannot send traces to %s (%s); they are dropped", url, problem)
            return SpanExportResult.FAILURE

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return exporter.force_flush(timeout_millis)

    return ReachableExporter()


def configure_otlp(endpoint: str, *, service_name: str = "convergent") -> TracerProvider:
    """Make a global SDK tracer provider that batches spans to an OTLP/HTTP endpoint.

    Every agent then traces its runs (see ``Agent(instrument=)``). Call the returned
    provider's ``shutdown()`` before the process ends, so the last spans are sent. A
    collector that refuses the connection costs one warning on the
    ``convergent.telemetry`` logger, and its spans are dropped without retries.

    Args:
        endpoint: The collector, e.g. ``http://localhost:4318`` (spans go to its
            ``/v1/traces``), or the full URL of its traces path.
        service_name: ``service.name`` of the resource, unless ``OTEL_SERVICE_NAME`` or
            ``OTEL_RESOURCE_ATTRIBUTES`` name the service.

    Raises:
        UserError: If the ``otel`` extra is not installed, the endpoint is malformed, or
            a tracer provider is already configured.
    """
    url = traces_url(endpoint)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise UserError(
            f"OTLP export needs the otel extra ({exc.name or 'opentelemetry-sdk'} is missing): "
            f"{EXTRA_HINT}"
        ) from None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        raise UserError("an OpenTelemetry tracer provider is already configured in this process")
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(_checked(OTLPSpanExporter(endpoint=url), url)))
    trace.set_tracer_provider(provider)
    return provider
