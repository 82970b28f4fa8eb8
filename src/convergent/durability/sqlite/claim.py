"""`RunClaim`: the right to continue one stored run, held by one process or task at a time.

```python
claim = store.claim("r1")              # refused while another process or task holds r1
try:
    state = claim.load("r1")
    result = await agent.run(state=state, store=claim)   # journaled under the claim
finally:
    claim.release()
```

`RunStore.claim` takes it in one write transaction, before anything of the resumption
happens (an answer recorded, a message queued, a server started). A run continued
under it takes it over when it starts; a claim whose run never started gives the run
back as it was.
"""

from __future__ import annotations

from typing import Protocol

from convergent.durability.protocol import Durability, JournaledRun, RunJournal
from convergent.durability.sqlite import _claims
from convergent.durability.sqlite._access import StoreAccess
from convergent.durability.sqlite.journal import SqliteJournal
from convergent.exceptions import StorageError, UserError
from convergent.state import RunState

__all__ = ["RunClaim"]


class ClaimedStore(Durability, StoreAccess, Protocol):
    """What a claim needs of its run database (`RunStore` has it)."""


class RunClaim:
    """A claim on a stored run (see the module); the `Durability` to continue it with.

    Args:
        store: The run database.
        run_id: The claimed run.
        token: The claim's token (a process that takes over a claim passes the same).
        previous: The holder the claim replaced, put back by `release`.
    """

    def __init__(
        self, store: ClaimedStore, run_id: str, token: str, previous: _claims.Holder
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.token = token
        self._previous = previous
        self._journal: SqliteJournal | None = None
        self._released = False

    def load(self, run_id: str) -> RunState:
        """The latest state of the run (see `RunStore.load`)."""
        return self.store.load(run_id)

    def send_steering(self, run_id: str, kind: str, text: str = "") -> None:
        """Queue a steering command (see `RunStore.send_steering`)."""
        self.store.send_steering(run_id, kind, text)

    def journal(self, run: JournaledRun) -> RunJournal:
        """The journal that continues the claimed run, taking the claim over as it starts.

        A child run of the claimed run (its ``parent`` names it) is journaled in the
        store under its own claim.

        Raises:
            UserError: For another run than the claimed one or its child.
        """
        if run.parent is not None and run.parent[0] == self.run_id:
            return self.store.journal(run)
        if run.run_id != self.run_id:
            raise UserError(f"the claim is on run {self.run_id!r}, not {run.run_id!r}")
        self._journal = SqliteJournal(self.store, run, claim=self.token)
        return self._journal

    def release(self) -> None:
        """Let go of the claim; if no run started under it, the run is as it was before.

        Safe to call more than once, and after the run ended. A database that cannot
        be written any more is left as it is: once this process ends, its claim is
        seen to be gone.
        """
        if self._released:
            return
        self._released = True
        try:
            if self._journal is None or not self._journal.claimed:
                with self.store.transaction("release run") as conn:
                    _claims.give_back(conn, self.run_id, self.token, self._previous)
        except StorageError:
            pass
        finally:
            _claims.drop(self.token)
