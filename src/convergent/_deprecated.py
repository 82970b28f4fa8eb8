"""The old spellings convergent still reads, and the version in which they go.

Each one still works and warns through `warn_old`, whose `DeprecationWarning` says that
it goes in convergent `REMOVED_IN`; `OLD_SPELLINGS` lists them all with what replaces
them (and ``CHANGELOG.md`` says the same under *Deprecated*). No other module warns of
a deprecation, so that removing them is one search for `warn_old`.
"""

from __future__ import annotations

import warnings

__all__ = ["OLD_SPELLINGS", "REMOVED_IN", "warn_old"]

REMOVED_IN = "0.3.0"
"""The version of convergent that no longer reads the old spellings."""

OLD_SPELLINGS = {
    "Limits(max_repeated_calls=)": "StopPolicy(max_repeated_calls=)",
    "Limits(stall_nudges=)": "StopPolicy(notes=)",
    "on_tool_error= (Agent, AgentSpec, CycleDriver, the adapters)": "StopPolicy(on_tool_error=)",
    "max_consecutive_tool_errors= (Agent, AgentSpec, CycleDriver, the adapters)": (
        "StopPolicy(max_repeated_failures=)"
    ),
    "final_answer= (Agent, AgentSpec, CycleDriver, the adapters)": "StopPolicy(final_answer=)",
    "convergent.durability.resume": "convergent.resume",
    "convergent.durability.resuming": "convergent.resuming",
    "RunSummary.recipe": "RunSummary.spec",
    "RunStore.journal(run_id, **options)": "RunStore.journal(JournaledRun(...))",
}
"""Every old spelling that still works, with what replaces it."""


def warn_old(message: str, *, stacklevel: int = 2) -> None:
    """Warn that an old spelling was used: ``message`` says which and what replaces it.

    Args:
        message: The old spelling and its replacement, in words.
        stacklevel: As `warnings.warn`'s, counted from the caller of this function.
    """
    warnings.warn(
        f"{message} (deprecated: it goes in convergent {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
