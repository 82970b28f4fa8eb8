"""The payload store of Temporal runs: what must not live in a workflow's history.

Temporal keeps every activity's input and result in the workflow's history, refuses a
payload over 2 MB, and a workflow task that carries one fails again at every retry.
A run's conversation grows with every cycle, so it is kept out of the history with the
SDK's external storage (the claim-check pattern): every payload over
`OFFLOAD_THRESHOLD` goes to a `StorageDriver` that all workers and clients of the
cluster share, and the history holds a reference to it. `PayloadStore` is that driver
for one machine: a table in the run database (SQLite), keyed by the SHA-256 of the
payload, so a reference always reads back the same bytes and a replay decides the same.
Payloads are kept compressed (zlib): a run's texts are stored several times (as a tool's
result, in the next model request, in the final state) and compress well.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import threading
import time
import uuid
import zlib
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.exceptions import ApplicationError

from convergent.durability.sqlite import DEFAULT_DB_PATH, RunStore
from convergent.durability.sqlite._schema import LOCKED
from convergent.exceptions import StorageError, UserError

__all__ = [
    "OFFLOAD_THRESHOLD",
    "ENDS_RUN",
    "PAYLOAD_DAMAGED",
    "PAYLOAD_MISSING",
    "PAYLOAD_UNWRITABLE",
    "UNREADABLE",
    "STORE_CLAIM",
    "PayloadStore",
    "data_converter",
    "driver_of",
    "read_probe",
    "same_store",
    "store_name",
    "store_probe",
]

OFFLOAD_THRESHOLD = 16 * 1024
"""Payloads of this many bytes or more go to the store; smaller ones stay in the history."""

PAYLOAD_MISSING = "PayloadMissing"
"""Error type of a reference whose payload the store does not hold (another store)."""

PAYLOAD_DAMAGED = "PayloadDamaged"
"""Error type of a reference whose payload the store holds damaged (its bytes changed)."""

PAYLOAD_UNWRITABLE = "PayloadStoreUnwritable"
"""Error type of a store that cannot keep a payload (a full disk, a read-only file)."""

UNREADABLE = frozenset({PAYLOAD_MISSING, PAYLOAD_DAMAGED})
"""Error types of a payload the store cannot give back: retrying cannot help."""

ENDS_RUN = UNREADABLE | {PAYLOAD_UNWRITABLE}
"""Error types of a store a run cannot go on with: a worker ends the run, naming it."""

_TABLE = """
CREATE TABLE IF NOT EXISTS temporal_payloads (
    digest TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    stored_at REAL NOT NULL
)
"""
_IDENTITY = "CREATE TABLE IF NOT EXISTS temporal_store (id TEXT NOT NULL)"
"""The store's own id, made when its table is: a store that lost payload rows keeps it."""

STORE_CLAIM = "store"
"""The key, in a probe's claim, of the id of the store the client stored it in."""


class PayloadStore(StorageDriver):
    """Payloads of Temporal runs in a SQLite file that workers and clients share.

    The table ``temporal_payloads`` lives in the run database (``.convergent/runs.db``
    by default), which is opened on first use. Every worker and every client of a
    cluster must use the same file: a payload one of them stored is read by another.

    Args:
        path: The database file.
    """

    def __init__(self, path: str | Path = DEFAULT_DB_PATH) -> None:
        self.path = Path(path)
        self._db: RunStore | None = None
        self._id = ""
        self._opening = threading.Lock()

    def name(self) -> str:
        """The driver's name, recorded in each reference."""
        return "convergent-sqlite"

    def type(self) -> str:
        """The driver's kind."""
        return "convergent.PayloadStore"

    def open(self) -> RunStore:
        """The database, opened (and its table created) on first use.

        Raises:
            StorageError: If it cannot be opened or written.
            UserError: If a newer convergent wrote it.
        """
        with self._opening:
            if self._db is None:
                db = RunStore(self.path)
                with db.transaction("create the payload table in") as conn:
                    conn.execute(_TABLE)
                    conn.execute(_IDENTITY)
                    row = conn.execute("SELECT id FROM temporal_store").fetchone()
                    if row is None:
                        row = (uuid.uuid4().hex,)
                        conn.execute("INSERT INTO temporal_store (id) VALUES (?)", row)
                self._id = str(row[0])
                self._db = db
            return self._db

    @property
    def store_id(self) -> str:
        """The store's own id: the same for every client and worker on this file.

        Payload rows deleted or damaged leave it as it was: a worker tells this store
        from another by it, not by the payloads it still holds.
        """
        self.open()
        return self._id

    def put(self, payloads: Sequence[Payload]) -> list[str]:
        """Store payloads (each once, however often it is stored); their digests.

        Storing a payload again marks it as stored now (``stored_at``, which retention
        reads), and replaces a damaged copy: the digest names the bytes, so the new
        copy is the right one.

        Raises:
            StorageError: If the database is locked past the wait (a retry may succeed).
            ApplicationError: Non-retryable, if the store cannot be written otherwise
                (a full disk, a read-only file): the run cannot go on.
        """
        rows = []
        for payload in payloads:
            data = payload.SerializeToString(deterministic=True)
            digest = hashlib.sha256(data).hexdigest()
            rows.append((digest, len(data), zlib.compress(data, 1), time.time()))
        try:
            with self.open().transaction("store payloads in") as conn:
                conn.executemany(
                    "INSERT INTO temporal_payloads (digest, size, data, stored_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (digest) DO UPDATE SET "
                    "size = excluded.size, data = excluded.data, stored_at = excluded.stored_at",
                    rows,
                )
        except StorageError as exc:
            if LOCKED in str(exc):
                raise
            raise ApplicationError(
                f"{exc}; the run cannot go on without its payloads",
                type=PAYLOAD_UNWRITABLE,
                non_retryable=True,
            ) from None
        return [row[0] for row in rows]

    def get(self, digest: str) -> Payload:
        """The payload stored under ``digest``.

        Raises:
            ApplicationError: Non-retryable, if this store does not hold it (the writer
                used another store, or its row was deleted) or holds it damaged:
                retrying cannot help, so the run ends at once, naming the store.
        """
        rows = self.open().query("SELECT data FROM temporal_payloads WHERE digest = ?", (digest,))
        if not rows:
            raise ApplicationError(
                f"the payload store {self.path.absolute()} does not hold payload "
                f"{digest[:12]}: every worker and client of a cluster must use the same "
                "store (--db)",
                type=PAYLOAD_MISSING,
                non_retryable=True,
            )
        try:
            data = zlib.decompress(rows[0][0])
        except zlib.error:
            data = None
        if data is None or hashlib.sha256(data).hexdigest() != digest:
            raise ApplicationError(
                f"the payload store {self.path.absolute()} holds payload {digest[:12]} "
                "damaged (its bytes no longer match their digest): it cannot be read back, "
                "and the runs that refer to it cannot go on",
                type=PAYLOAD_DAMAGED,
                non_retryable=True,
            )
        return Payload.FromString(data)

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """Store payloads; a claim (the digest) for each."""
        digests = await asyncio.to_thread(self.put, payloads)
        return [StorageDriverClaim(claim_data={"digest": digest}) for digest in digests]

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """The payloads of the claims, in order."""

        def read() -> list[Payload]:
            return [self.get(claim.claim_data.get("digest", "")) for claim in claims]

        return await asyncio.to_thread(read)

    def close(self) -> None:
        """Close the database (it is opened again on next use)."""
        db, self._db = self._db, None
        if db is not None:
            db.close()


def data_converter(driver: StorageDriver) -> DataConverter:
    """The default data converter, with payloads over the threshold kept in ``driver``."""
    return dataclasses.replace(
        DataConverter.default,
        external_storage=ExternalStorage(
            drivers=[driver], payload_size_threshold=OFFLOAD_THRESHOLD
        ),
    )


def store_name(driver: StorageDriver) -> str:
    """How messages name a store: a `PayloadStore`'s file, another driver's name."""
    return str(driver.path.absolute()) if isinstance(driver, PayloadStore) else driver.name()


def driver_of(client: Client) -> StorageDriver:
    """The payload store ``client`` keeps big payloads in.

    Raises:
        UserError: If it has none (it was not connected with `convergent.temporal.connect`).
    """
    storage = client.data_converter.external_storage
    if storage is None:
        raise UserError(
            "this Temporal client has no payload store: connect with "
            "convergent.temporal.connect() or TemporalRunner.connect()"
        )
    return storage.drivers[0]


async def store_probe(driver: StorageDriver, run_id: str) -> dict[str, str]:
    """Store a small payload for the workers to read back; the claim to give them.

    A `PayloadStore`'s claim also names the store (`STORE_CLAIM`), so that a worker on
    the same store knows it whatever became of the probe.
    """
    payload = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(run_id).encode())
    [claim] = await driver.store(StorageDriverStoreContext(), [payload])
    data = dict(claim.claim_data)
    if isinstance(driver, PayloadStore):
        data[STORE_CLAIM] = await asyncio.to_thread(lambda: driver.store_id)
    return data


def same_store(driver: StorageDriver, claim: dict[str, str]) -> bool:
    """Whether a probe's claim names ``driver`` as the store it was stored in."""
    return isinstance(driver, PayloadStore) and claim.get(STORE_CLAIM) == driver.store_id


async def read_probe(driver: StorageDriver, claim: dict[str, str]) -> None:
    """Read back a client's probe.

    Raises:
        ApplicationError: Non-retryable, if this store does not hold it (the worker and
            the client use different stores).
    """
    await driver.retrieve(StorageDriverRetrieveContext(), [StorageDriverClaim(claim_data=claim)])
