"""The TLS settings every HTTP client of this process shares."""

from __future__ import annotations

import functools
import os
import ssl

__all__ = ["shared_tls"]


def shared_tls() -> ssl.SSLContext:
    """The TLS settings of httpx's defaults, built once for every client of this process.

    Building them loads the certificate authorities: about 20 ms of CPU, which each new
    SDK client paid, once per model and event loop (so once per ``Agent.run_sync``). The
    certificates are those of ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set, as for
    httpx itself, and the settings are built again when these change.
    """
    return _tls(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    import httpx

    return httpx.create_ssl_context()
