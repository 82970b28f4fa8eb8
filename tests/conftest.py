"""Shared fixtures: no test may reach a real model provider; heavy tests are slow.

Provider keys are removed from the environment and sockets may only connect to the
loopback interface, so a test that would reach a hosted model fails instead of spending
money or depending on the network (local stub servers and the embedded model still work).

A test that needs the Temporal dev server, the embedded model, a browser, Xvfb or
Claude Code is also marked ``slow``, so ``pytest -m "not slow"`` leaves them out.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

_HEAVY_MARKERS = ("temporal", "local_model", "browser", "xvfb", "claude_code")
_PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: Any) -> None:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        try:
            allowed = ipaddress.ip_address(host).is_loopback
        except ValueError:
            allowed = host == "localhost"
        if not allowed:
            raise ConnectionRefusedError(f"tests may not connect to {host}: only loopback")
    _real_connect(self, address)


@pytest.fixture(autouse=True)
def _no_real_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs a heavy component ``slow`` (before ``-m`` selects)."""
    for item in items:
        if any(item.get_closest_marker(name) for name in _HEAVY_MARKERS):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say which groups of tests were skipped and why, one line per reason."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    groups: dict[str, dict[str, int]] = {}
    for report in skipped:
        longrepr = getattr(report, "longrepr", None)
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        parts = report.nodeid.split("::")[0].split("/")
        group = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
        per = groups.setdefault(reason, {})
        per[group] = per.get(group, 0) + 1
    terminalreporter.section("skipped, by reason")
    for reason, per in sorted(groups.items(), key=lambda item: -sum(item[1].values())):
        where = ", ".join(f"{group} ({count})" for group, count in sorted(per.items()))
        terminalreporter.write_line(f"{sum(per.values())} skipped: {reason} -- in {where}")
