"""One running MCP server, owned by a task of its own (machinery).

The SDK's client lives in anyio task groups and cancel scopes that must be entered and
left by one task. Each server therefore gets an owner task that connects, lists the
tools, then waits to be told to stop; tool calls come from the loop's tasks through
the client's session. A transport that fails ends only its owner task, never the run,
and stopping is a message to the owner (never a cancellation, which could cut the
transport's shutdown of the server process short).

A connection made with ``restart=True`` (as on a Temporal worker, whose servers outlive
any one run) starts a server that has ended afresh at the next call that needs it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from contextlib import AsyncExitStack
from typing import IO, Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from convergent.exceptions import ConvergentError, ToolError, UserError
from convergent.mcp._diagnose import likely_cause
from convergent.mcp._processes import server_alive
from convergent.mcp._stdio import UNUSABLE, stdio_transport
from convergent.mcp.config import MCPServer, expand_env

__all__ = ["ServerConnection"]

_MAX_PAGES = 100
"""Pages of ``tools/list`` read at most (a server whose cursor never ends cannot hang)."""
_STDERR_TAIL = 4096

# The SDK logs what it cannot use (with tracebacks); with no logging set up, Python would
# print those on the terminal, over the run's own output. An application that sets up
# logging still receives them.
logging.getLogger("mcp").addHandler(logging.NullHandler())


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


class _ListingFailed(ConvergentError):
    """The server answered the handshake but not ``tools/list`` (its cause says why)."""


class ServerConnection:
    """A connection to one MCP server, from `start` to `stop`.

    Args:
        server: The server to run or reach.
        restart: Whether a call finding the server ended (its process exited, or the
            connection closed during an earlier call) first starts it afresh; without
            it, such calls fail, naming the server.
    """

    def __init__(self, server: MCPServer, *, restart: bool = False) -> None:
        self.server = server
        self.restart = restart
        self._process: tuple[int, str] | None = None
        self._restarting = asyncio.Lock()
        self._starts = 0
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[list[types.Tool]] | None = None
        self._errlog: IO[str] | None = None
        self._ended: str | None = None

    @property
    def name(self) -> str:
        """The server's name."""
        return self.server.name

    async def start(self) -> list[types.Tool]:
        """Start (or connect to) the server and list its tools.

        Raises:
            UserError: In one line naming the server, if it cannot be started, does not
                answer within its ``startup_timeout``, or fails the handshake.
        """
        self._starts += 1
        self._stop = asyncio.Event()
        self._ended = None
        self._process = None
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(), name=f"MCP server {self.name}")
        try:
            async with asyncio.timeout(self.server.startup_timeout):
                return await asyncio.shield(self._ready)
        except TimeoutError:
            self._task.cancel()  # once: the transport's own shutdown then runs shielded
            await asyncio.gather(self._task, return_exceptions=True)
            self._forget_ready()
            raise self._failed(f"no answer within {self.server.startup_timeout:g}s") from None
        except UserError:
            await asyncio.gather(self._task, return_exceptions=True)
            raise
        except BaseException:
            await self.stop()
            self._forget_ready()
            raise

    def _forget_ready(self) -> None:
        """Take the start's outcome when nobody waits for it any more (no asyncio warning)."""
        ready = self._ready
        if ready is not None and ready.done() and not ready.cancelled():
            ready.exception()

    async def stop(self) -> None:
        """Stop the server (its process and all its children) and wait until it is gone."""
        self._stop.set()
        task = self._task
        if task is None:
            return
        if self._ready is not None and not self._ready.done():
            task.cancel()  # still connecting: cut the handshake short, once
        await asyncio.gather(task, return_exceptions=True)

    @property
    def serving(self) -> bool:
        """Whether the server is up: connected, and its process (if it runs one) alive."""
        if self._client is None or self._ended is not None:
            return False
        return self._process is None or server_alive(*self._process)

    async def _start_again(self) -> None:
        """Start afresh a server that has ended, once for the caller that finds it so.

        What is left of the old server is stopped first. Callers that wait meanwhile
        find it serving again (or, if it could not start, try once more themselves).

        Raises:
            ToolError: In one line naming the server, if it cannot be started.
        """
        async with self._restarting:
            if self.serving:
                return
            await self.stop()
            try:
                await self.start()
            except UserError as exc:
                raise ToolError(str(exc)) from None

    async def list_tools(self) -> list[types.Tool] | None:
        """The server's tools now; None if it is not running or does not answer."""
        client = self._client
        if client is None or self._ended is not None:
            return None
        try:
            return await _list_tools(client)
        except Exception:  # a server that cannot list keeps the tools it listed before
            return None

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call a tool of the server.

        Raises:
            ToolError: If the server is not running (with ``restart``: cannot be
                started again), closes the connection during the call (it crashed or
                was stopped), or answers with a protocol error.
        """
        if self.restart and not self.serving:
            await self._start_again()
        client, start = self._client, self._starts
        if client is None or self._ended is not None:
            reason = f" ({self._ended})" if self._ended else ""
            raise ToolError(f"MCP server {self.name!r} is not running{reason}")
        try:
            return await client.call_tool(name, arguments)
        except MCPError as exc:
            if exc.data == UNUSABLE:
                unusable = f"MCP server {self.name!r} sent an unusable answer: {exc.message}"
                raise ToolError(unusable) from None
            if exc.code != types.CONNECTION_CLOSED:
                refused = f"MCP server {self.name!r} answered with an error: {exc.message}"
                raise ToolError(refused) from None
            raise ToolError(self._gone(start)) from None
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            raise ToolError(self._gone(start)) from None
        except Exception as exc:  # a malformed answer, whatever the SDK raised for it
            raise ToolError(
                f"MCP server {self.name!r} sent an unusable answer: {type(exc).__name__}: {exc}"
            ) from None

    def _gone(self, start: int) -> str:
        """The message for a call the server dropped; later calls fail at once.

        A call made before the server was started again (``start`` is the count of
        starts it was made under) leaves the new server be.
        """
        message = self._lost()
        if start == self._starts:
            self._ended = "it closed the connection during an earlier call"
        return message

    def _lost(self) -> str:
        tail = self._stderr_tail()
        said = f" (its last output: {tail})" if tail else ""
        return f"MCP server {self.name!r} closed the connection during the call{said}"

    def _failed(self, reason: str) -> UserError:
        tail = self._stderr_tail()
        said = f" (its last output: {tail})" if tail else ""
        cause = likely_cause(tail, reason)
        likely = f"; likely cause: {cause}" if cause else ""
        return UserError(f"MCP server {self.name!r} failed to start: {reason}{said}{likely}")

    def _stderr_tail(self) -> str:
        """The last line the server wrote to its standard error, if any."""
        errlog = self._errlog
        if errlog is None or errlog.closed:
            return ""
        fd = errlog.fileno()
        size = os.fstat(fd).st_size
        # pread leaves the offset the server writes at alone
        data = os.pread(fd, _STDERR_TAIL, max(0, size - _STDERR_TAIL))
        lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
        lines = [line for line in lines if line]
        return lines[-1][:300] if lines else ""

    def _reason(self, exc: BaseException) -> str:
        """Why the server could not start, in a few words."""
        leaves = [leaf for leaf in _leaves(exc) if not isinstance(leaf, asyncio.CancelledError)]
        if not leaves:
            return "it was cancelled"
        first = leaves[0]
        server = self.server
        if isinstance(first, _ListingFailed):
            cause = first.__cause__ or first
            if isinstance(cause, MCPError) and cause.code == types.CONNECTION_CLOSED:
                return "it exited or closed the connection while listing its tools"
            text = getattr(cause, "message", None) or str(cause) or type(cause).__name__
            return f"it answered, but listing its tools failed: {text}"
        match first:
            case FileNotFoundError() | PermissionError() if server.command is not None:
                return f"cannot run {server.command!r}: {first.strerror}"
            case MCPError() if first.code == types.CONNECTION_CLOSED:
                return "it exited or closed the connection before answering"
            case UserError():
                return str(first)
            case _:
                text = str(first) or type(first).__name__
                if server.url is not None:
                    return f"cannot connect to {server.url}: {text}"
                return text

    async def _connect(self, stack: AsyncExitStack) -> Client:
        server = self.server
        if server.command is not None:
            # closed by the owner task after the failure is described, not with the stack
            self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            transport: Any = stdio_transport(
                expand_env(server.command),
                [expand_env(arg) for arg in server.args],
                # like the SDK and Claude Desktop: a minimal environment, so that this
                # process's secrets (provider API keys) reach a server only when configured
                env={
                    **get_default_environment(),
                    **{k: expand_env(v) for k, v in server.env.items()},
                },
                cwd=server.cwd,
                errlog=self._errlog,
                started=self._started,
            )
        else:
            import httpx2

            assert server.url is not None
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers={k: expand_env(v) for k, v in server.headers.items()},
                    timeout=httpx2.Timeout(30.0, read=300.0),
                )
            )
            transport = streamable_http_client(expand_env(server.url), http_client=http)
        return await stack.enter_async_context(Client(transport, cache=None))

    def _started(self, pid: int, mark: str) -> None:
        self._process = (pid, mark)

    async def _serve(self) -> None:
        """The owner task: connect, list the tools, wait for `stop`, disconnect."""
        ready = self._ready
        assert ready is not None
        try:
            async with AsyncExitStack() as stack:
                client = await self._connect(stack)
                try:
                    tools = await _list_tools(client)
                except Exception as exc:
                    raise _ListingFailed(exc) from exc
                self._client = client
                if not ready.done():
                    ready.set_result(tools)
                await self._stop.wait()
                self._client = None
            self._ended = "it was stopped"
        except BaseException as exc:  # every way the server ends is recorded, then re-raised
            self._client = None
            reason = self._reason(exc)
            self._ended = reason
            if not ready.done():
                ready.set_exception(self._failed(reason))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None
            if self._errlog is not None and not self._errlog.closed:
                self._errlog.close()
