"""An adapter's policy, settled once when the adapter is built, and what it tells the model.

Every adapter takes ``policy=`` (a `StopPolicy`) and the earlier spellings of its rules
(``Limits(max_repeated_calls=, stall_nudges=)``, ``on_tool_error=``,
``max_consecutive_tool_errors=``, ``final_answer=``), which still work and warn.
`settled` turns them into
one validated policy (`convergent.loop.driver.resolved_policy`, so a bad value is refused in
one line where the adapter is built, never mid-run) and options without the old
spellings, which each run's driver then takes as they are.
"""

from __future__ import annotations

from convergent.limits import Limits, without_legacy
from convergent.loop.driver import PolicyOptions
from convergent.policy import resolved_policy
from convergent.stop import Decision, Interrupted, Nudge

__all__ = ["given_policy", "settled", "told"]

_LEGACY_OPTIONS = ("on_tool_error", "max_consecutive_tool_errors", "final_answer")


def given_policy(limits: Limits, options: PolicyOptions) -> bool:
    """Whether the caller set any rule: ``policy=``, or one of the earlier spellings."""
    return (
        options.get("policy") is not None
        or bool(limits.legacy_policy())
        or any(name in options for name in _LEGACY_OPTIONS)
    )


def settled(limits: Limits | None, options: PolicyOptions) -> tuple[Limits, PolicyOptions]:
    """The budgets and the options of an adapter's runs, with the policy resolved.

    Raises:
        UserError: For an invalid rule (``on_tool_error="bogus"``), or one given twice.
    """
    limits = limits if limits is not None else Limits()
    policy = resolved_policy(options.get("policy"), limits, options)
    clean = PolicyOptions(**options)  # a copy: the caller's keywords stay as they were
    for name in _LEGACY_OPTIONS:
        clean.pop(name, None)  # type: ignore[misc]
    clean["policy"] = policy
    return without_legacy(limits), clean


def told(decision: Decision) -> str | None:
    """What the model is told of a reply that was not accepted, if anything.

    The feedback (`Interrupted`: the output type's errors, the verifier's, or the
    request to continue a reply that was no answer), or the same with a note when the
    rejected answers reached their threshold (`Nudge`); None for a stop or `CONTINUE`.
    """
    if isinstance(decision, Interrupted):
        return decision.message
    if isinstance(decision, Nudge):
        return decision.note
    return None
