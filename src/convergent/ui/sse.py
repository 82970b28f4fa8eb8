"""Server-sent events that keep a page live: changed fragments of HTML, as they change.

A stream polls a cheap version of what it shows (the database's ``data_version``,
the state file's modification time) and, when it moved, renders the page's live
fragments again in a worker thread and sends only those that differ from what the
page already has, as one JSON object ``{element id: [digest, html]}``. Every so often
the fragments are rendered anyway (ages change with time), and a comment line keeps
proxies from closing an idle stream.

Between two renders a stream keeps only the digests of what it sent, never the HTML,
and `EventStreamResponse` ends it the moment its client goes away: it stops polling,
leaves the console's set of open streams and drops what it held.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable, MutableSet
from typing import Any

import anyio
import anyio.to_thread
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["EventStreamResponse", "FragmentStream", "digest", "sse_message"]

POLL_SECONDS = 0.25
"""How often the version is looked at."""
REFRESH_SECONDS = 10.0
"""Fragments are rendered again at least this often."""


def digest(html: str) -> str:
    """A short digest of a fragment (the page compares it before replacing one)."""
    return hashlib.blake2s(html.encode(), digest_size=8).hexdigest()


def sse_message(data: str, *, event: str = "update") -> bytes:
    """One server-sent event (multi-line data becomes several ``data:`` lines)."""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"event: {event}\n{lines}\n".encode()


async def _in_thread(work: Callable[..., Any], *args: Any) -> Any:
    return await anyio.to_thread.run_sync(work, *args)


class FragmentStream:
    """The live stream of one open page (see the module).

    Args:
        version: Changes whenever what the page shows may have changed (called often:
            keep it cheap).
        render: The page's live fragments by element id (runs in a worker thread).
        stopping: True once the server shuts down.
        poll: Seconds between looks at ``version``.
        refresh: Seconds after which the fragments are rendered anyway (default:
            `REFRESH_SECONDS`).
        worker: Runs ``version`` and ``render`` off the event loop (default: a thread
            of anyio's pool).
    """

    def __init__(
        self,
        version: Callable[[], Hashable],
        render: Callable[[], dict[str, str]],
        *,
        stopping: Callable[[], bool] = lambda: False,
        poll: float = POLL_SECONDS,
        refresh: float | None = None,
        worker: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        self.version: Callable[[], Hashable] | None = version
        self.render: Callable[[], dict[str, str]] | None = render
        self.stopping = stopping
        self.poll = poll
        self.refresh = REFRESH_SECONDS if refresh is None else refresh
        self.worker = worker or _in_thread
        self.sent: dict[str, str] = {}
        """Digest of each fragment the page has now, by element id."""
        self.closed = False

    async def events(self) -> AsyncGenerator[bytes, None]:
        """Yield an update whenever a fragment changed, until closed or the server stops."""
        seen: Hashable = object()
        idle = 0.0
        yield b"retry: 1000\n\n"
        try:
            while not self.closed and not self.stopping():
                assert self.version is not None and self.render is not None
                current = await self.worker(self.version)
                if current != seen or idle >= self.refresh:
                    seen, idle = current, 0.0
                    message = await self.worker(self._changes, self.render)
                    yield message or b": idle\n\n"
                    del message
                await asyncio.sleep(self.poll)
                idle += self.poll
        finally:
            self.close()

    def _changes(self, render: Callable[[], dict[str, str]]) -> bytes | None:
        """The event for the fragments that changed since the last one sent (None: none)."""
        payload: dict[str, list[str]] = {}
        for key, html in render().items():
            hashed = digest(html)
            if self.sent.get(key) != hashed:
                payload[key] = [hashed, html]
        if not payload:
            return None
        self.sent.update({key: hashed for key, (hashed, _) in payload.items()})
        return sse_message(json.dumps(payload))

    def close(self) -> None:
        """End the stream and drop everything it holds (its renderer and digests)."""
        self.closed = True
        self.sent.clear()
        self.version = self.render = None


class EventStreamResponse(StreamingResponse):
    """A response that sends a `FragmentStream` and ends it when the client leaves.

    The stream is in ``registry`` while it is open. A disconnect is noticed at once
    (not at the next write), and the stream is closed whatever ends it.

    Args:
        stream: The stream to send.
        registry: The set of open streams it joins while open.
    """

    def __init__(self, stream: FragmentStream, registry: MutableSet[FragmentStream]) -> None:
        self.events = stream.events()
        super().__init__(
            self.events, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )
        self.stream = stream
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the stream until it ends or the client disconnects."""
        self.registry.add(self.stream)
        events = self.events
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async with anyio.create_task_group() as group:

                async def until_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(until_disconnect)
                async for message in events:
                    await send({"type": "http.response.body", "body": message, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()
        except OSError:
            pass  # the client went away while a message was being sent
        finally:
            with anyio.CancelScope(shield=True):
                await events.aclose()
            self.stream.close()
            self.registry.discard(self.stream)
