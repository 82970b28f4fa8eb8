"""``--otlp``: traces of the command's runs sent to an OTLP/HTTP collector."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["otlp_export"]


@contextmanager
def otlp_export(endpoint: str | None) -> Iterator[None]:
    """Export the runs inside the block to ``endpoint`` (nothing when None); flush at the end.

    Raises:
        UserError: If the ``otel`` extra is missing or the endpoint is malformed.
    """
    if endpoint is None:
        yield
        return
    from convergent.telemetry.otlp import configure_otlp

    provider = configure_otlp(endpoint)
    try:
        yield
    finally:
        provider.shutdown()
