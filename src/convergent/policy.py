"""`StopPolicy`: every rule that judges progress, declared and validated in one place.

`convergent.Limits` holds the budgets (cycles, tokens, seconds, cost, tool calls); a
`StopPolicy` holds the rules that decide when a run makes no progress: how often a call
may repeat with the same result, how long a cycle of calls is watched for, the streaks
of failures, mistakes and rejected answers, the notes the model gets before a stop, and
what happens to a reply that is not an answer. The loop (`convergent.Agent`), an
`convergent.AgentSpec`, the `convergent.loop.driver.CycleDriver`, the Temporal workflow and
every adapter take the same object, so a rule means the same wherever it runs.

Each rule and its evidence are described in ``docs/loop.md`` and ``docs/evidence.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from convergent._deprecated import warn_old
from convergent._validation import raises_user_errors
from convergent.exceptions import UserError

if TYPE_CHECKING:
    from convergent.limits import Limits

__all__ = [
    "DEFAULT_POLICY",
    "LEGACY_MEANINGS",
    "LEGACY_POLICY_FIELDS",
    "POLICY_RULES",
    "UNSET",
    "StopPolicy",
    "ToolErrorPolicy",
    "Unset",
    "policy_of",
    "resolved_policy",
]

ToolErrorPolicy = Literal["continue", "stop"]
"""``continue``: a tool's failure goes back to the model; ``stop``: it ends the run."""


@raises_user_errors
@pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="forbid"))
class StopPolicy:
    """The rules that stop a run that makes no progress; budgets are `convergent.Limits`.

    A rule set to None never applies. Building a policy with a bad value raises
    `convergent.UserError` in one line (inside an `AgentSpec`, the spec's error).
    """

    max_repeated_calls: int = Field(default=3, ge=1)
    """A call made this often with results of the same meaning while nothing changed
    (or a cycle of calls repeated this often) gets a note instead of running; repeating
    it after the note stops the run ``stalled``."""
    max_cycle_length: int = Field(default=5, ge=1, le=8)
    """The longest cycle of different calls that is watched for (2 to this); 1 watches
    only for one call repeated."""
    notes: int = Field(default=1, ge=0)
    """Notes the model gets when a stall or a streak reaches its threshold, before the
    run stops on it (per stretch without progress); 0 stops at once."""
    final_answer: bool = True
    """After a stop for ``max_cycles``, ``stalled``, ``budget_exhausted`` or
    ``tool_error``, ask the model once more, without tools, for its best answer
    (`RunResult.output`, with ``output_after_stop``); room for it is kept in the token,
    cost and time budgets."""
    on_tool_error: ToolErrorPolicy = "continue"
    """``continue``: a tool's failure goes back to the model as its result and only the
    streaks below stop the run; ``stop``: the first failure ends it ``tool_error``."""
    max_repeated_failures: int | None = Field(default=3, ge=1)
    """How often the same call (same tool, same arguments) may fail within one streak
    of failing steps (steps in a row where calls failed and none succeeded): the step
    where a call fails for this time gets a note, and the next such step stops the run
    ``tool_error``. A loop, not a search: calls that fail with new arguments each
    step never reach it."""
    max_failing_steps: int | None = Field(default=12, ge=1)
    """Failing steps in a row, whatever their calls and errors (a search that tries
    something new each step, or a tool that is down), that stop the run ``tool_error``
    after a note."""
    max_repeated_mistakes: int | None = Field(default=3, ge=1)
    """How often the same mistaken call (a tool the run does not have, arguments that
    do not parse or validate) may be made within one streak of mistakes: the step
    where it is made for this time gets a note, and the next mistake stops the run
    ``stalled``."""
    max_mistakes: int | None = Field(default=12, ge=1)
    """Steps in a row whose every call was the model's mistake, whatever the calls,
    that stop the run ``stalled`` after a note."""
    max_rejected_answers: int | None = Field(default=3, ge=1)
    """Answers in a row rejected by the verifier or the output type, with nothing new
    found in between, that stop the run ``stalled`` after a note."""
    max_continuations: int = Field(default=2, ge=0)
    """Replies that are not an answer (empty, cut at the token limit, refused) after
    which the model is asked to continue; one more ends the run ``model_error`` with the
    best text the run has."""
    poll_gap: float | None = Field(default=10.0, gt=0, allow_inf_nan=False)
    """Seconds outside model requests (a poll that waits itself, a slow job, a pause)
    from the start of a call to the start of the same call again, after which the
    second is a fresh look, not a repeat; None: this measure never counts."""
    wait_gap: float | None = Field(default=2.0, gt=0, allow_inf_nan=False)
    """Seconds outside model requests that passed between the end of a call and the
    start of the same call again (a wait, a sleep, other calls), after which the second
    is a fresh look; None: this measure never counts. Either measure makes every count
    start again: the world had time to change."""


DEFAULT_POLICY = StopPolicy()
"""The default rules (shared: a `StopPolicy` is immutable)."""

LEGACY_POLICY_FIELDS = {
    "max_repeated_calls": "max_repeated_calls",
    "stall_nudges": "notes",
    "max_consecutive_tool_errors": "max_repeated_failures",
    "on_tool_error": "on_tool_error",
    "final_answer": "final_answer",
}
"""Options of earlier versions that are now fields of `StopPolicy`, with their new names."""

LEGACY_MEANINGS = {
    "max_consecutive_tool_errors": (
        "max_consecutive_tool_errors counted failed calls in a row; max_repeated_failures "
        "counts how often the same call (same tool, same arguments) fails within one "
        "streak of failing steps, and StopPolicy.max_failing_steps the failing steps in a "
        "row whatever their calls"
    ),
}
"""What a legacy option that maps to a rule of another meaning now means, for its warning."""


class Unset(Enum):
    """The type of `UNSET`."""

    UNSET = "unset"


UNSET: Final = Unset.UNSET
"""A legacy option that was not given (None may be a value of its own)."""


def policy_of(policy: StopPolicy | None = None, /, **legacy: Any) -> StopPolicy:
    """The policy a run follows: ``policy``, with the legacy options given applied.

    The legacy options (`LEGACY_POLICY_FIELDS`: ``max_repeated_calls`` and
    ``stall_nudges`` of `convergent.Limits`, ``on_tool_error``,
    ``max_consecutive_tool_errors`` and ``final_answer`` of `convergent.Agent` and the
    adapters) still work
    and warn (`DeprecationWarning`); one that is `UNSET` was not given.

    Raises:
        UserError: If a legacy value is invalid (as `StopPolicy` says), or one is given
            beside a ``policy`` that sets the same rule to another value.
    """
    given = {key: value for key, value in legacy.items() if value is not UNSET}
    unknown = set(given) - set(LEGACY_POLICY_FIELDS)
    if unknown:
        raise TypeError(f"not a legacy policy option: {', '.join(sorted(unknown))}")
    if not given:
        return policy if policy is not None else DEFAULT_POLICY
    renamed = {LEGACY_POLICY_FIELDS[key]: value for key, value in given.items()}
    changed = "".join(f" ({LEGACY_MEANINGS[k]})" for k in sorted(given) if k in LEGACY_MEANINGS)
    warn_old(
        f"{', '.join(sorted(given))} moved to StopPolicy("
        + ", ".join(f"{name}=..." for name in sorted(renamed))
        + f"): pass policy=StopPolicy(...) instead{changed}",
        stacklevel=3,
    )
    base = policy if policy is not None else DEFAULT_POLICY
    if policy is not None:
        for name, value in renamed.items():
            if getattr(policy, name) not in (getattr(DEFAULT_POLICY, name), value):
                raise UserError(f"{name} is set twice: in policy= and as a legacy option")
    fields = {name: getattr(base, name) for name in _FIELDS} | renamed
    return StopPolicy(**fields)


def resolved_policy(
    policy: StopPolicy | None, limits: Limits, options: Mapping[str, Any]
) -> StopPolicy:
    """The policy of a run from its arguments: ``policy``, and the legacy options given.

    The legacy options are ``Limits(max_repeated_calls=, stall_nudges=)`` and the
    ``on_tool_error``, ``max_consecutive_tool_errors`` and ``final_answer`` keywords
    (`StopPolicy` holds them now); each warns once where it is given.
    """
    given = limits.legacy_policy()
    if given:  # `Limits` warned when it was built
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            policy = policy_of(policy, **given)
    legacy: dict[str, Any] = {
        name: options.get(name, UNSET)
        for name in ("on_tool_error", "max_consecutive_tool_errors", "final_answer")
    }
    if all(value is UNSET for value in legacy.values()):
        return policy if policy is not None else StopPolicy()
    return policy_of(policy, **legacy)


_FIELDS = tuple(StopPolicy.__dataclass_fields__)
POLICY_RULES = _FIELDS
"""The names of the rules of a `StopPolicy`, in declaration order."""
