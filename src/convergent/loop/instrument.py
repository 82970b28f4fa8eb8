"""Whether a run is traced with OpenTelemetry, decided without importing it (machinery).

A tracer provider can only have been configured by code that imported
``opentelemetry.trace``; while that module is not loaded, the check is one dictionary
lookup and ``convergent.telemetry`` is never imported.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from convergent.extensions import RunObserver

__all__ = ["run_tracer"]

_API = "opentelemetry.trace"


def run_tracer(instrument: bool | None, observers: Sequence[RunObserver]) -> RunObserver | None:
    """The telemetry observer to add to a run, or None.

    Args:
        instrument: ``Agent(instrument=)``: None traces when an SDK tracer provider is
            configured globally, True always (through the global provider), False never.
        observers: The agent's observers (one that already traces wins).
    """
    if instrument is False or (instrument is None and _API not in sys.modules):
        return None
    from convergent.telemetry._auto import global_observer

    return global_observer(observers, always=instrument is True)
