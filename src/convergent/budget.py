"""`Budget`: one run's budgets: what is used, what is left, what must be kept.

Its home is `convergent.loop.budget`, that of its counters (`BudgetState`)
`convergent.state` and that of the arithmetic on `Limits` a call's share needs
(`least`, `narrowed`, `shared`) `convergent.limits`: users import them from here, the
loop's own modules from their homes.
"""

from convergent.limits import least, narrowed, shared
from convergent.loop.budget import (
    BUDGET_NOTE_AT,
    CHARS_PER_MESSAGE,
    CHARS_PER_TOKEN,
    FINAL_ANSWER_TOKENS,
    NOTHING_REFUSED,
    Admission,
    Budget,
    RunTally,
    SpentRun,
    Tally,
    added,
    budgets_used,
    check_room,
    message_chars,
    renewed,
)
from convergent.state import BudgetState

__all__ = [
    "BUDGET_NOTE_AT",
    "CHARS_PER_MESSAGE",
    "CHARS_PER_TOKEN",
    "FINAL_ANSWER_TOKENS",
    "NOTHING_REFUSED",
    "Admission",
    "Budget",
    "BudgetState",
    "RunTally",
    "SpentRun",
    "Tally",
    "added",
    "budgets_used",
    "check_room",
    "least",
    "message_chars",
    "narrowed",
    "renewed",
    "shared",
]
