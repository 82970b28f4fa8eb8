"""``--otlp`` / ``--otlp-file``: traces of the command's runs, to a collector or a file.

``--otlp`` sends them to an OTLP/HTTP collector; ``--otlp-file`` appends them to a file
of OTLP JSON lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from convergent.exceptions import UserError

__all__ = ["otlp_export"]


@contextmanager
def otlp_export(endpoint: str | None, file: Path | None = None) -> Iterator[None]:
    """Export the runs inside the block to ``endpoint`` or ``file``; flush at the end.

    Nothing is exported when both are None.

    Raises:
        UserError: If the ``otel`` extra is missing, the endpoint is malformed, the file
            cannot be opened, or both are given.
    """
    if endpoint is None and file is None:
        yield
        return
    from convergent.telemetry.otlp import configure_otlp, configure_otlp_file

    if endpoint is not None and file is not None:
        raise UserError("--otlp and --otlp-file: give one")
    if endpoint is not None:
        provider = configure_otlp(endpoint)
    else:
        assert file is not None
        provider = configure_otlp_file(file)
    try:
        yield
    finally:
        provider.shutdown()
