"""Durable runs: the seam the loop writes through, the SQLite backend, and resume.

- `convergent.durability.protocol`: `Durability` and `RunJournal`, what the loop awaits
  around its side effects so that a run survives its process;
- `convergent.durability.sqlite`: `RunStore`, the embedded SQLite backend (the default);
- `convergent.durability.resuming`: `resume`, the one way a stored run continues (from
  Python, ``convergent resume`` and the web console alike).

```python
store = RunStore(".convergent/runs.db")
result = await agent.run("task", run_id="r1", store=store)   # saved as it runs
result = await resume("r1", store=store)                      # after a crash or a stop
```

`resume` rebuilds agents from their specs, so it sits above the loop: import it from
`convergent` or `convergent.durability.resuming`; this package imports only what the
loop itself may depend on.
"""

from convergent.durability.protocol import Durability, RunJournal
from convergent.durability.sqlite import (
    DEFAULT_DB_PATH,
    DatabaseSteering,
    PendingQuestion,
    RewindResult,
    RunClaim,
    RunStore,
    RunSummary,
    SqliteJournal,
)

__all__ = [
    "DEFAULT_DB_PATH",
    "DatabaseSteering",
    "Durability",
    "PendingQuestion",
    "RewindResult",
    "RunClaim",
    "RunJournal",
    "RunStore",
    "RunSummary",
    "SqliteJournal",
]
