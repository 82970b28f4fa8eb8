"""Server-sent events that keep a page live: changed fragments of HTML, as they change.

A stream polls a cheap version of what it shows (the database's ``data_version``,
the state file's modification time) and, when it moved, renders the page's live
fragments again in a worker thread and sends only those that differ from what the
page already has, as one JSON object ``{element id: html}``. Every so often the
fragments are rendered anyway (ages change with time), and a comment line keeps
proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Callable, Hashable

import anyio.to_thread

__all__ = ["digest", "fragment_stream", "sse_message"]

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


async def fragment_stream(
    version: Callable[[], Hashable],
    render: Callable[[], dict[str, str]],
    *,
    stopping: Callable[[], bool] = lambda: False,
    poll: float = POLL_SECONDS,
    refresh: float = REFRESH_SECONDS,
) -> AsyncIterator[bytes]:
    """Yield an update whenever a fragment changed; ``stopping`` ends the stream.

    Args:
        version: Changes whenever what the page shows may have changed (called often:
            keep it cheap).
        render: The page's live fragments by element id (runs in a worker thread).
        stopping: True once the server shuts down.
        poll: Seconds between looks at ``version``.
        refresh: Seconds after which the fragments are rendered anyway.
    """
    sent: dict[str, str] = {}
    seen: Hashable = object()
    idle = 0.0
    yield b"retry: 1000\n\n"
    while not stopping():
        current = await anyio.to_thread.run_sync(version)
        if current != seen or idle >= refresh:
            seen, idle = current, 0.0
            fragments = await anyio.to_thread.run_sync(render)
            changed = {key: html for key, html in fragments.items() if sent.get(key) != html}
            if changed:
                sent.update(changed)
                payload = {key: [digest(html), html] for key, html in changed.items()}
                yield sse_message(json.dumps(payload))
            else:
                yield b": idle\n\n"
        await asyncio.sleep(poll)
        idle += poll
