"""An SDK client that follows the running event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["LoopClient"]


class LoopClient:
    """Holds a provider SDK client; one built here is rebuilt for each new event loop.

    An HTTP connection pool belongs to the loop that opened it, so a model reused across
    ``asyncio.run`` calls (for example two ``Agent.run_sync``) needs a fresh client. A
    client the caller supplied is used as it is.
    """

    def __init__(self, client: Any, factory: Callable[[], Any] | None) -> None:
        self._client = client
        self._factory = factory if client is None else None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> Any:
        """The client to use from the running loop."""
        if self._factory is None:
            return self._client
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._factory()
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the current client; a built one is rebuilt on next use."""
        if self._client is not None:
            await self._client.close()
            if self._factory is not None:
                self._client = None
