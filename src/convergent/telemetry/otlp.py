"""Export traces to an OTLP/HTTP collector or to a file (the ``otel`` extra).

``run --otlp`` sends them to a collector; ``run --otlp-file`` appends them to a file of
OTLP JSON, one request per line: what the OpenTelemetry Collector's file exporter
writes, and ``convergent replay`` reads.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import urllib.request
from collections.abc import Sequence
from pathlib import Path
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

__all__ = ["EXTRA_HINT", "configure_otlp", "configure_otlp_file", "traces_url"]

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


def _sdk() -> None:
    try:
        import opentelemetry.exporter.otlp.proto.common  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise UserError(
            f"OTLP export needs the otel extra ({exc.name or 'opentelemetry-sdk'} is missing): "
            f"{EXTRA_HINT}"
        ) from None


def _provider(service_name: str) -> TracerProvider:
    """A new SDK tracer provider for ``service_name`` (unless the environment names one).

    Raises:
        UserError: If a tracer provider is already configured in this process.
    """
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        raise UserError("an OpenTelemetry tracer provider is already configured in this process")
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    return TracerProvider(resource=resource)


def _hex_ids(value: object) -> object:
    """OTLP JSON's ids are hexadecimal, where protobuf's JSON writes bytes in base64."""
    if isinstance(value, dict):
        return {
            key: base64.b64decode(item).hex()
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str)
            else _hex_ids(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value


def _file_exporter(path: Path) -> SpanExporter:
    """Writes each batch of spans as one OTLP JSON request, a line of ``path``."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class FileExporter(SpanExporter):
        def __init__(self) -> None:
            self.file = path.open("a", encoding="utf-8")

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            request = _hex_ids(MessageToDict(encode_spans(spans)))
            self.file.write(json.dumps(request, ensure_ascii=False) + "\n")
            self.file.flush()
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            self.file.close()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            self.file.flush()
            return True

    return FileExporter()


def configure_otlp_file(path: str | Path, *, service_name: str = "convergent") -> TracerProvider:
    """Make a global SDK tracer provider that appends spans to a file of OTLP JSON lines.

    Each batch of spans is one ``ExportTraceServiceRequest`` in OTLP JSON on a line of its
    own, as the OpenTelemetry Collector's file exporter writes them: ``convergent replay``
    reads the file as it is. Call the returned provider's ``shutdown()`` before the
    process ends, so the last spans are written.

    Raises:
        UserError: If the ``otel`` extra is missing, the file cannot be opened, or a
            tracer provider is already configured.
    """
    _sdk()
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    file = Path(path)
    provider = _provider(service_name)
    try:
        exporter = _file_exporter(file)
    except OSError as exc:
        raise UserError(f"--otlp-file {file}: cannot be opened ({exc.strerror})") from None
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


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
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise UserError(
            f"OTLP export needs the otel extra ({exc.name or 'opentelemetry-sdk'} is missing): "
            f"{EXTRA_HINT}"
        ) from None
    provider = _provider(service_name)
    provider.add_span_processor(BatchSpanProcessor(_checked(OTLPSpanExporter(endpoint=url), url)))
    trace.set_tracer_provider(provider)
    return provider
