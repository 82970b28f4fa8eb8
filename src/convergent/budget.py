"""`Budget`: one run's budgets: what is used, what is left, what must be kept.

Its home is `convergent.loop.budget`: users import it from here, the
loop's own modules from its home.
"""

from convergent.loop.budget import (
    BUDGET_NOTE_AT as BUDGET_NOTE_AT,
)
from convergent.loop.budget import (
    CHARS_PER_MESSAGE as CHARS_PER_MESSAGE,
)
from convergent.loop.budget import (
    CHARS_PER_TOKEN as CHARS_PER_TOKEN,
)
from convergent.loop.budget import (
    FINAL_ANSWER_TOKENS as FINAL_ANSWER_TOKENS,
)
from convergent.loop.budget import (
    NOTHING_REFUSED as NOTHING_REFUSED,
)
from convergent.loop.budget import (
    Admission as Admission,
)
from convergent.loop.budget import (
    Budget as Budget,
)
from convergent.loop.budget import (
    BudgetState as BudgetState,
)
from convergent.loop.budget import (
    RunTally as RunTally,
)
from convergent.loop.budget import (
    SpentRun as SpentRun,
)
from convergent.loop.budget import (
    Tally as Tally,
)
from convergent.loop.budget import (
    added as added,
)
from convergent.loop.budget import (
    budgets_used as budgets_used,
)
from convergent.loop.budget import (
    check_room as check_room,
)
from convergent.loop.budget import (
    least as least,
)
from convergent.loop.budget import (
    narrowed as narrowed,
)
from convergent.loop.budget import (
    renewed as renewed,
)
from convergent.loop.budget import (
    shared as shared,
)

__all__ = [
    "BUDGET_NOTE_AT",
    "NOTHING_REFUSED",
    "Admission",
    "CHARS_PER_MESSAGE",
    "CHARS_PER_TOKEN",
    "FINAL_ANSWER_TOKENS",
    "Budget",
    "BudgetState",
    "RunTally",
    "SpentRun",
    "Tally",
    "added",
    "budgets_used",
    "check_room",
    "least",
    "narrowed",
    "renewed",
    "shared",
]
