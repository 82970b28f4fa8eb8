"""Export traces to an OTLP/HTTP collector (the ``otel`` extra), as ``run --otlp`` does."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace

from convergent.exceptions import UserError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

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


def configure_otlp(endpoint: str, *, service_name: str = "convergent") -> TracerProvider:
    """Make a global SDK tracer provider that batches spans to an OTLP/HTTP endpoint.

    Every agent then traces its runs (see ``Agent(instrument=)``). Call the returned
    provider's ``shutdown()`` before the process ends, so the last spans are sent.

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
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    trace.set_tracer_provider(provider)
    return provider
