"""`MCPToolset`: the tools of a set of MCP servers, for as long as they run.

`Agent` uses one when it is given ``mcp_servers``: the servers start when a run starts
(or when the agent is entered with ``async with``) and stop when it ends, however it
ends. The toolset counts its users, so runs that overlap share one set of servers.
Each start lists the servers' tools afresh. A toolset whose servers serve for longer
than a run (a Temporal worker's) can be told to `restart` a server that has ended at
the next call of one of its tools.
"""

from __future__ import annotations

import asyncio
import importlib
import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from convergent.exceptions import UserError
from convergent.mcp.config import MCPServer
from convergent.tools import Tool

if TYPE_CHECKING:
    import mcp_types

    from convergent.mcp._connection import ServerConnection

__all__ = ["MCPToolset"]


_NEEDED = {  # module: the package of the mcp extra that provides it
    "mcp": "mcp>=2.3.0,<3",
    "re2": "google-re2>=1.1.20251105,<2",
}


def _require_sdk() -> None:
    missing = []
    for module, requirement in _NEEDED.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(requirement)
    if missing:
        names = ", ".join(re.split(r"[<>=]", requirement)[0] for requirement in missing)
        wanted = " ".join(f"'{requirement}'" for requirement in missing)
        noun = "package" if len(missing) == 1 else "packages"
        raise UserError(f"MCP servers need the {names} {noun}: pip install {wanted}")


class MCPToolset:
    """Starts MCP servers, turns their tools into `Tool` objects, and stops them.

    Tool names are the servers' own (with the server's ``prefix`` if it has one). A name
    the agent's own tools already use (``calculator``, ``read_file``...) is prefixed with
    the server's name instead (``fs_read_file`` for server ``fs``), so a server never
    hides a built-in tool nor is refused for it; two servers offering the same name is an
    error that says to give one a prefix.

    Args:
        servers: The servers.
        reserved: Names of the tools offered next to the servers' (the agent's own).

    Raises:
        UserError: If two servers have the same name.
    """

    def __init__(self, servers: Sequence[MCPServer], reserved: Collection[str] = ()) -> None:
        names = [server.name for server in servers]
        for name in names:
            if names.count(name) > 1:
                raise UserError(f"two MCP servers are named {name!r}")
        self.servers = tuple(servers)
        self.reserved = frozenset(reserved)
        self.restart = False
        """Whether a call of a tool whose server has ended (its process exited, or the
        connection closed) first starts that server afresh; set it before the start."""
        self._users = 0
        self._ready: asyncio.Task[list[Tool]] | None = None
        self._connections: list[ServerConnection] = []
        self._listings: list[list[mcp_types.Tool]] = []

    @property
    def running(self) -> bool:
        """Whether the servers are started (or starting)."""
        return self._ready is not None

    async def acquire(self) -> list[Tool]:
        """Start the servers unless they run already; return their tools.

        Every `acquire` must be followed by one `release`, also when it raises.

        Raises:
            UserError: In one line naming the server, if one cannot be started (the
                others are stopped), or if two servers offer a tool of the same name.
        """
        self._users += 1
        if self._ready is None:
            self._ready = asyncio.ensure_future(self._start())
            return await asyncio.shield(self._ready)
        await asyncio.shield(self._ready)
        return await self._relist()

    async def release(self) -> None:
        """Let go of the servers; the last user stops them and waits until they are gone."""
        self._users -= 1
        if self._users > 0:
            return
        self._users = 0
        ready, self._ready = self._ready, None
        if ready is not None and not ready.done():
            ready.cancel()
        if ready is not None:
            await asyncio.gather(ready, return_exceptions=True)
        await self._stop_all()

    async def _stop_all(self) -> None:
        connections, self._connections, self._listings = self._connections, [], []
        await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)

    async def _start(self) -> list[Tool]:
        _require_sdk()
        from convergent.mcp._connection import ServerConnection

        connections = [ServerConnection(s, restart=self.restart) for s in self.servers]
        self._connections = list(connections)
        try:
            listings = await asyncio.gather(
                *(connection.start() for connection in connections), return_exceptions=True
            )
            for listing in listings:
                if isinstance(listing, BaseException):
                    raise listing
            self._listings = [listing for listing in listings if isinstance(listing, list)]
            return self._tools()
        except BaseException:
            await self._stop_all()
            raise

    async def _relist(self) -> list[Tool]:
        """The tools as the servers list them now (a silent server keeps its last list)."""
        fresh = await asyncio.gather(*(c.list_tools() for c in self._connections))
        self._listings = [
            new if new is not None else old for new, old in zip(fresh, self._listings, strict=True)
        ]
        return self._tools()

    def _tools(self) -> list[Tool]:
        from convergent.mcp._tools import mcp_tool

        tools: dict[str, Tool] = {}
        for connection, listing in zip(self._connections, self._listings, strict=True):
            _check_effects(connection.server, [listed.name for listed in listing])
            for listed in listing:
                made = mcp_tool(connection, listed, taken=self.reserved)
                other = tools.get(made.name)
                if other is not None:
                    raise UserError(
                        f"{other.source} and {made.source} both offer a tool named "
                        f"{made.name!r}; give one of the servers a prefix"
                    )
                tools[made.name] = made
        return list(tools.values())


def _check_effects(server: MCPServer, offered: list[str]) -> None:
    """Refuse a server whose ``effects`` name a tool it does not offer.

    A misspelt name would leave the tool it meant undeclared.
    """
    unknown = [name for name in server.effects if name not in offered]
    if unknown:
        raise UserError(
            f"MCP server {server.name!r}: effects name tools it does not offer: "
            f"{', '.join(unknown)} (it offers {', '.join(offered) or 'no tools'})"
        )
