"""A model request bounded in time as a whole, its reply (streamed or not) included.

An SDK's own timeout bounds each wait for the next bytes, so a server that sends one
byte a second keeps a request open for as long as it likes. A backend here bounds
the whole request instead: by its own ``timeout``, and by `ModelSettings.timeout`
when the caller has less time left (the loop passes what is left of ``max_seconds``).
Past the bound the request ends with `RequestTimedOut`, and its connection is closed.
Cancelling the task that awaits a request closes its connection at once as well.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from convergent.exceptions import ModelError
from convergent.models.base import ModelSettings

__all__ = ["Deadline", "RequestTimedOut"]

T = TypeVar("T")


class RequestTimedOut(ModelError):
    """The backend gave no complete reply within the request's time (never retried)."""


class Deadline:
    """When one request must have its whole reply.

    Args:
        model_name: The model, for the message.
        own: The backend's own timeout in seconds (None: none).
        settings: The request's settings, whose ``timeout`` may be shorter.
    """

    def __init__(self, model_name: str, own: float | None, settings: ModelSettings | None) -> None:
        given = settings.timeout if settings is not None else None
        seconds = [value for value in (own, given) if value is not None]
        self.seconds = min(seconds) if seconds else None
        self.model_name = model_name
        now = asyncio.get_running_loop().time()
        self._at = None if self.seconds is None else now + self.seconds

    async def wait(self, work: Awaitable[T]) -> T:
        """Await ``work`` until the deadline.

        Raises:
            RequestTimedOut: If the deadline passes first.
        """
        timer = asyncio.timeout_at(self._at)
        try:
            async with timer:
                return await work
        except TimeoutError:
            if timer.expired():
                raise self._expired() from None
            raise

    async def each(self, items: AsyncIterator[T]) -> AsyncIterator[T]:
        """The items of a stream, each awaited until the deadline.

        Only the waits are timed (never the consumer's work between items), so a
        deadline never cancels the code that reads the stream.

        Raises:
            RequestTimedOut: If the deadline passes while an item is awaited.
        """
        while True:
            try:
                item = await self.wait(anext(items))
            except StopAsyncIteration:
                return
            yield item

    def _expired(self) -> RequestTimedOut:
        return RequestTimedOut(
            f"{self.model_name}: no complete reply within {self.seconds:g}s; the request was ended"
        )
