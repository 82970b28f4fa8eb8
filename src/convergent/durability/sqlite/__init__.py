"""Durable runs in SQLite: the embedded default of the durability seam.

```python
store = RunStore(".convergent/runs.db")
result = await agent.run("task", run_id="r1", store=store)   # saved as it runs
result = await resume("r1", store=store, agent=agent)         # after a crash or a stop
store.rewind("r1", 3)                                         # files and conversation back
```
"""

from convergent.durability.sqlite._schema import DB_SCHEMA_VERSION
from convergent.durability.sqlite.claim import RunClaim
from convergent.durability.sqlite.journal import SqliteJournal
from convergent.durability.sqlite.rollback import RewindResult
from convergent.durability.sqlite.runs import DEFAULT_DB_PATH, PendingQuestion, RunStore, RunSummary
from convergent.durability.sqlite.steering import DatabaseSteering

__all__ = [
    "DB_SCHEMA_VERSION",
    "DEFAULT_DB_PATH",
    "DatabaseSteering",
    "PendingQuestion",
    "RewindResult",
    "RunClaim",
    "RunStore",
    "RunSummary",
    "SqliteJournal",
]
