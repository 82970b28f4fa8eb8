"""Adapter tests run every host offline: the Agents SDK exports no traces."""

from __future__ import annotations

from agents import set_tracing_disabled

set_tracing_disabled(True)
