"""A run's conversation in the payload store, so that a model request carries only news.

Each model request appends the messages that are new since the previous request to the
conversation the store already holds, as one record ``{parent, messages}``, and the
workflow keeps only the record's claim. The next request sends that claim and its own
new messages: what one cycle puts into the workflow's history no longer depends on how
long the conversation is. A worker keeps recent conversations in memory, so a request
usually reads one record; a worker that has not seen the run reads the chain back.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from convergent.messages import Message
from convergent.temporal._payloads import load_messages

__all__ = ["Claim", "ConversationLog"]

Claim = dict[str, str]
"""A store's reference to one stored record (driver-defined, small)."""


def _key(claim: Mapping[str, str]) -> str:
    return json.dumps(dict(claim), sort_keys=True)


class ConversationLog:
    """Conversations as chains of records in a payload store, with a memory of recent ones.

    Args:
        driver: The payload store the workers share.
        remember: Conversations kept in memory (each shares its messages with the others).
    """

    def __init__(self, driver: StorageDriver, remember: int = 256) -> None:
        self.driver = driver
        self.remember = remember
        self._known: OrderedDict[str, tuple[Message, ...]] = OrderedDict()

    async def extend(
        self, parent: Claim | None, news: list[dict[str, Any]]
    ) -> tuple[Claim, list[Message]]:
        """Store ``news`` after the conversation ``parent``; its claim and the whole of it."""
        before = await self.load(parent) if parent is not None else ()
        record = json.dumps(
            {"parent": parent, "messages": news}, sort_keys=True, ensure_ascii=False
        ).encode()
        payload = Payload(metadata={"encoding": b"json/plain"}, data=record)
        [stored] = await self.driver.store(StorageDriverStoreContext(), [payload])
        claim = dict(stored.claim_data)
        messages = (*before, *load_messages(news))
        self._remember(_key(claim), messages)
        return claim, list(messages)

    async def load(self, claim: Claim) -> tuple[Message, ...]:
        """The conversation ``claim`` ends, oldest message first."""
        chain: list[list[dict[str, Any]]] = []
        cursor: Claim | None = claim
        while cursor is not None and _key(cursor) not in self._known:
            record = await self._read(cursor)
            chain.append(record["messages"])
            cursor = record["parent"]
        messages: list[Message] = list(self._known[_key(cursor)]) if cursor is not None else []
        if cursor is not None:
            self._known.move_to_end(_key(cursor))
        for news in reversed(chain):
            messages.extend(load_messages(news))
        found = tuple(messages)
        self._remember(_key(claim), found)
        return found

    async def _read(self, claim: Claim) -> dict[str, Any]:
        context = StorageDriverRetrieveContext()
        [payload] = await self.driver.retrieve(context, [StorageDriverClaim(claim_data=claim)])
        record: dict[str, Any] = json.loads(payload.data)
        return record

    def _remember(self, key: str, messages: Sequence[Message]) -> None:
        self._known[key] = tuple(messages)
        self._known.move_to_end(key)
        while len(self._known) > self.remember:
            self._known.popitem(last=False)
