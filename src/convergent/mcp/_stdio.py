"""The stdio transport to an MCP server's process (machinery).

It speaks newline-delimited JSON-RPC with the server, as the SDK's transport does, and
differs where a server is faulty or hostile:

- Lines are read in time linear in their length, up to `MAX_MESSAGE` bytes; a longer
  answer is an error for the request it answers ("larger than 16 MiB"), not minutes
  of work and the memory to match.
- An answer that cannot be read (not JSON, nested too deeply, not JSON-RPC) becomes an
  error for its request at once, when its id can be found at its start, instead of
  leaving the request to time out; any other line that is not a message is skipped
  without a word on the terminal.
- When the connection ends, however it ends, everything left of the server is ended
  with it: its process group, its descendants and every process carrying its mark
  (`convergent.mcp._processes`).
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import IO

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from convergent.mcp._processes import MARK, TERM_GRACE, end_server_processes, new_mark

__all__ = ["MAX_MESSAGE", "UNUSABLE", "stdio_transport"]

MAX_MESSAGE = 16 * 1024 * 1024
"""Bytes one message from a server may have (a tool result the model could never read)."""

UNUSABLE = "convergent: unusable answer"
"""The ``data`` of the errors this transport makes up for answers it cannot read."""

CLOSE_GRACE = 2.0
"""Seconds a server has to exit by itself once its stdin is closed."""

_HEAD = 512
_ID = re.compile(  # "id" as the first or second key of the top-level object
    rb'^\s*\{(?:\s*"jsonrpc"\s*:\s*"2\.0"\s*,)?\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")'
)


async def _lines(stream: anyio.abc.ByteReceiveStream) -> AsyncIterator[bytes | _TooLarge]:
    """The lines of ``stream``; a line over `MAX_MESSAGE` comes as its first bytes only."""
    line = bytearray()
    oversized: _TooLarge | None = None
    while True:
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if oversized is None and len(line) + len(piece) > MAX_MESSAGE:
                oversized = _TooLarge(bytes((line + piece)[:_HEAD]))
                line.clear()
            elif oversized is None:
                line += piece
            if end < 0:
                break
            yield oversized if oversized is not None else bytes(line)
            line.clear()
            oversized = None
            start = end + 1


class _TooLarge:
    """A line over `MAX_MESSAGE` bytes, of which only the start is kept."""

    def __init__(self, head: bytes) -> None:
        self.head = head


def _request_id(head: bytes) -> int | str | None:
    """The id at the start of a response, if it is there (the SDK writes it second)."""
    found = _ID.match(head)
    if found is None:
        return None
    text = found.group(1).decode("utf-8", "replace")
    return text[1:-1] if text.startswith('"') else int(text)


def _refusal(head: bytes, reason: str) -> SessionMessage | None:
    """An error answering the request whose answer could not be read, if its id is known."""
    request = _request_id(head)
    if request is None:
        return None
    error = types.ErrorData(code=types.PARSE_ERROR, message=reason, data=UNUSABLE)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request, error=error))


def _message(line: bytes | _TooLarge) -> SessionMessage | None:
    """The message on one line, an error standing in for it, or None for noise."""
    if isinstance(line, _TooLarge):
        return _refusal(line.head, f"the answer is larger than {MAX_MESSAGE // 2**20} MiB")
    if not line.strip():
        return None
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as exc:
        deep = any("recursion limit" in str(error.get("msg", "")) for error in exc.errors())
        reason = "nested too deeply" if deep else "not a JSON-RPC message"
        return _refusal(line[:_HEAD], f"the answer is {reason}")


def _signal_group(group: int, number: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(group, number)


async def _exited(process: anyio.abc.Process, seconds: float) -> bool:
    """Wait up to ``seconds`` for the process to exit (its pipes may outlive it)."""
    with anyio.move_on_after(seconds):
        # polled: waiting for the process would also wait for its pipes, which a child
        # that inherited them keeps open
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return process.returncode is not None


async def _end(process: anyio.abc.Process, mark: str) -> None:
    """Stop the server (stdin closed, then SIGTERM, then SIGKILL) and all that is left of it."""
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if not await _exited(process, CLOSE_GRACE):
        _signal_group(process.pid, signal.SIGTERM)
        if not await _exited(process, TERM_GRACE):
            _signal_group(process.pid, signal.SIGKILL)
            await _exited(process, TERM_GRACE)
    await anyio.to_thread.run_sync(end_server_processes, process.pid, mark)


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    errlog: IO[str],
    started: Callable[[int, str], None] | None = None,
) -> AsyncIterator[TransportStreams]:
    """Start the server and yield the SDK's read and write streams to it.

    ``started`` is told the server's process id and mark (`convergent.mcp._processes`)
    as soon as it runs, so that its owner can tell whether it is still alive.

    Raises:
        OSError: If the command cannot be started.
    """
    mark = new_mark()
    process = await anyio.open_process(
        [command, *args],
        env={**env, MARK: mark},
        cwd=cwd,
        stderr=errlog,
        start_new_session=True,
    )
    if started is not None:
        started(process.pid, mark)
    # no awaits before the task group below, or a cancellation could leak the process
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    ending = False

    async def read() -> None:
        assert process.stdout is not None
        async with incoming_send:
            async for line in _lines(process.stdout):
                message = _message(line)
                if message is None:
                    continue
                try:
                    await incoming_send.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
        # the server closed its stdout: if it has exited, end what it left running
        with anyio.CancelScope(shield=True):
            if not ending and await _exited(process, CLOSE_GRACE):
                await anyio.to_thread.run_sync(end_server_processes, process.pid, mark)

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with outgoing_receive:
                async for message in outgoing_receive:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await incoming_send.aclose()  # the session sees the connection end

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield incoming, outgoing
        finally:
            ending = True
            with anyio.CancelScope(shield=True):
                await outgoing.aclose()
                await _end(process, mark)
                await incoming.aclose()
            tasks.cancel_scope.cancel()
    with anyio.CancelScope(shield=True), anyio.move_on_after(TERM_GRACE), suppress(OSError):
        await process.aclose()  # the process is gone: this closes the pipes
