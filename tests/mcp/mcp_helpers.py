"""Helpers of the MCP tests: the servers they run, and a look at this process's children."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from convergent.mcp import MCPServer

SERVER = Path(__file__).with_name("server.py")
RAW = Path(__file__).with_name("raw_server.py")


def stdio_testing(name: str = "testing", **options: Any) -> MCPServer:
    return MCPServer.stdio(name, sys.executable, [str(SERVER)], **options)


def raw_args(folder: Path, plan: dict[str, Any]) -> list[str]:
    """The arguments that start ``raw_server.py`` following ``plan`` (written to ``folder``)."""
    path = folder / f"plan-{len(list(folder.glob('plan-*')))}.json"
    path.write_text(json.dumps(plan))
    return [str(RAW), str(path)]


def raw_server(folder: Path, plan: dict[str, Any], **options: Any) -> MCPServer:
    """The hand-written server of ``raw_server.py``, following ``plan``."""
    args = tuple(raw_args(folder, plan))
    return MCPServer(name="raw", command=sys.executable, args=args, **options)


def listed(name: str, properties: dict[str, Any], **schema: Any) -> dict[str, Any]:
    """A ``tools/list`` entry with an input schema of these properties (and keywords)."""
    return {
        "name": name,
        "description": f"the {name} tool",
        "inputSchema": {"type": "object", "properties": properties, **schema},
    }


def time_server(**options: Any) -> MCPServer:
    return MCPServer.stdio("time", sys.executable, ["-m", "mcp_server_time"], **options)


def descendants(pid: int | None = None) -> set[int]:
    """Every live process below ``pid`` (this process by default)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    return {child.pid for child in children if alive(child.pid)}


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has exited)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def http_server() -> Iterator[str]:
    """The testing server over streamable HTTP on 127.0.0.1; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the HTTP MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
