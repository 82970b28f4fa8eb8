"""Durable runs: SQLite checkpoints, resume, rewind and cross-process steering.

```python
store = RunStore(".convergent/runs.db")
agent = Agent(model, tools, observers=[CheckpointObserver(store, tools=tools)])
await agent.run("task", run_id="r1")            # saved as it runs
state = store.load("r1")                         # after a crash or a resumable stop
await agent.run(state=state, steering=DatabaseSteering(store, "r1"))
store.rewind("r1", 3)                            # files and conversation back to cycle 3
```
"""

from convergent.store.rollback import RewindResult
from convergent.store.sqlite import (
    DB_SCHEMA_VERSION,
    DEFAULT_DB_PATH,
    CheckpointObserver,
    PendingQuestion,
    RunStore,
    RunSummary,
)
from convergent.store.steering import DatabaseSteering

__all__ = [
    "DB_SCHEMA_VERSION",
    "DEFAULT_DB_PATH",
    "CheckpointObserver",
    "DatabaseSteering",
    "PendingQuestion",
    "RewindResult",
    "RunStore",
    "RunSummary",
]
