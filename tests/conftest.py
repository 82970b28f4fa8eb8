"""Shared fixtures: no test may reach a real model provider."""

from __future__ import annotations

import pytest

_PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def _no_provider_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests never talk to a hosted model: provider keys are removed from the env."""
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
