"""The one comparison of two results of the same call, the stop policy's own.

The report's proof of a real loop compares results as the policy does, so that a run
the policy stops at a repeat is never shown as "no real loop" because two results
differ only in a time stamp or a request id.
"""

from __future__ import annotations

from convergent.meaning import same_meaning

__all__ = ["same_result"]


def same_result(before: str, after: str) -> bool:
    """Whether two results of the same call say the same thing (by their differences)."""
    return same_meaning(before, after)
