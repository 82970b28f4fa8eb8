"""Durable runs: the seam the loop writes through, and the SQLite backend.

- `convergent.durability.protocol`: `Durability`, `RunJournal` and `JournaledRun`, what
  the loop awaits around its side effects so that a run survives its process;
- `convergent.durability.sqlite`: `RunStore`, the embedded SQLite backend (the default).

```python
store = RunStore(".convergent/runs.db")
result = await agent.run("task", run_id="r1", store=store)   # saved as it runs
result = await resume("r1", store=store)                      # after a crash or a stop
```

`resume` rebuilds agents from their specs, so it sits above the loop, beside the
builder: import it from `convergent` or `convergent.resuming`. The loop imports only
the protocol; the SQLite backend is imported when one of its names is first used
(PEP 562), so that a run without a store never loads SQLite.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from convergent._deprecated import warn_old as _warn_old
from convergent._exports import listed_names as _listed_names
from convergent._exports import load_export as _load_export

if TYPE_CHECKING:
    from convergent.durability.protocol import Durability, JournaledRun, RunJournal
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
    "JournaledRun",
    "PendingQuestion",
    "RewindResult",
    "RunClaim",
    "RunJournal",
    "RunStore",
    "RunSummary",
    "SqliteJournal",
]

_PROTOCOL = ("Durability", "JournaledRun", "RunJournal")

_MODULE_OF = {
    name: "convergent.durability.protocol" if name in _PROTOCOL else "convergent.durability.sqlite"
    for name in __all__
}
"""The module that defines each exported name, imported when the name is first used."""


def __getattr__(name: str) -> object:
    """Import an exported name's module when the name is first used (PEP 562).

    ``resume``, which moved to `convergent.resuming`, still resolves here, with a
    `DeprecationWarning` (as does the module ``convergent.durability.resuming``).
    """
    if name == "resume":
        _warn_old(
            "convergent.durability.resume moved: use convergent.resume "
            "(or convergent.resuming.resume)"
        )
        return importlib.import_module("convergent.resuming").resume
    return _load_export(globals(), _MODULE_OF, name)


def __dir__() -> list[str]:
    """The names already imported and the exported ones not yet used."""
    return _listed_names(globals(), __all__)
