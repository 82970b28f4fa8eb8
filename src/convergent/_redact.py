"""Keeping secrets out of error text: API keys a provider echoes back are masked.

A provider's error body can repeat the key it was sent ("Incorrect API key provided:
sk-..."); the error text becomes a stop detail, a trace line and a database row. Every
error string a model backend raises passes through `redact` first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["MASK", "known_secrets", "redact", "secrets_of_url"]

MASK = "[redacted]"
"""What a secret is replaced with."""

_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
_SHORTEST = 8
"""Shorter values are not treated as secrets (they would mask ordinary words)."""


def secrets_of_url(url: str | None) -> list[str]:
    """The password in a URL's credentials (``https://user:secret@host``), if any."""
    if not url:
        return []
    password = urlsplit(url).password
    return [password] if password else []


def known_secrets(*configured: str | None) -> list[str]:
    """The configured secrets plus the provider keys set in the environment."""
    values = [*configured, *(os.environ.get(name) for name in _KEY_VARIABLES)]
    return sorted({v for v in values if v and len(v) >= _SHORTEST}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (at least 8 characters long) replaced by `MASK`."""
    for secret in secrets:
        if len(secret) >= _SHORTEST and secret in text:
            text = text.replace(secret, MASK)
    return text
