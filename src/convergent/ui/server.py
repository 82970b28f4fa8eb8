"""Starting the console: the extra's check, the listening socket, the token, uvicorn.

The address is resolved before anything else: the console listens on loopback unless
told with ``allow_remote`` (any spelling of loopback counts as loopback: ``localhost``,
``LOCALHOST``, ``127.1``, ``::1``). The socket is bound before uvicorn starts, so a
taken port is a one-line error, and port 0 picks any free port (the printed address
names it). On loopback the printed address carries the token; beyond it the token goes
into a file only the user can read, never onto the screen or into an address.
`serve_in_thread` runs the same server in a background thread, for tests, benchmarks
and applications.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import sys
import tempfile
import threading
import webbrowser
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent.durability.sqlite import RunStore
from convergent.exceptions import UserError

__all__ = [
    "Listening",
    "Resolved",
    "bind",
    "check_extra",
    "reachable",
    "resolve",
    "serve",
    "serve_in_thread",
]

EXTRA_HINT = "pip install 'starlette>=1.10.0,<2' 'uvicorn>=0.54.0,<1' 'Jinja2>=3.1.6,<4'"


def check_extra() -> None:
    """Fail with one line naming the extra when Starlette, uvicorn or Jinja2 is missing.

    Raises:
        UserError: If one of them cannot be imported.
    """
    for module in ("starlette", "uvicorn", "jinja2"):
        try:
            __import__(module)
        except ImportError:
            raise UserError(f"the console needs {module}: {EXTRA_HINT}") from None


@dataclass(frozen=True, slots=True)
class Resolved:
    """The address a host name or literal resolves to, ready to bind."""

    host: str
    """The host as given."""
    family: int
    """Socket family (``AF_INET``, ``AF_INET6``)."""
    proto: int
    """Protocol number (TCP; asyncio turns Nagle's delay off only for a TCP socket)."""
    address: tuple[Any, ...]
    """The socket address to bind."""

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        """The IP address (an IPv4-mapped IPv6 address as its IPv4 address)."""
        ip = ipaddress.ip_address(str(self.address[0]).split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        return ip

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach it."""
        return self.ip.is_loopback

    @property
    def wildcard(self) -> bool:
        """Whether it means every interface (``0.0.0.0``, ``::``)."""
        return self.ip.is_unspecified


def resolve(host: str, port: int) -> Resolved:
    """Resolve ``host`` to the address the console would listen on.

    Raises:
        UserError: If the name is unknown.
    """
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else "not a host name"
        raise UserError(f"cannot listen on {host!r}: {reason}") from None
    family, _, proto, _, address = found[0]
    return Resolved(host, family, proto, address)


def reachable(host: str, port: int, *, allow_remote: bool) -> Resolved:
    """Resolve ``host`` and refuse an address beyond loopback unless ``allow_remote``.

    Raises:
        UserError: If the name is unknown, or other machines could reach it and
            ``allow_remote`` is not set.
    """
    where = resolve(host, port)
    if not where.loopback and not allow_remote:
        raise UserError(
            f"--host {host} can be reached from other machines, over plain HTTP; "
            "pass --allow-remote to listen there anyway"
        )
    return where


def bind(host: str | Resolved, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port).

    Raises:
        UserError: If the address is unknown or the port is taken.
    """
    target = host if isinstance(host, Resolved) else resolve(host, port)
    sock = socket.socket(target.family, socket.SOCK_STREAM, target.proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(target.address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if port and exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
            raise UserError(
                f"port {port} on {target.host} is taken; pass --port N, or --port 0 for a free one"
            ) from None
        raise UserError(f"cannot listen on {target.host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _url(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _server(app: Any, *, quiet: bool) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app,
        log_level="warning" if quiet else "info",
        access_log=False,
        timeout_graceful_shutdown=2,
        lifespan="on",
    )
    return uvicorn.Server(config)


def _guarded(
    store: RunStore, sock: socket.socket, where: Resolved, token: str, state_file: Path | None
) -> Any:
    from convergent.ui.app import create_app
    from convergent.ui.auth import Address

    address = Address(where.host, sock.getsockname()[1], wildcard=where.wildcard)
    return create_app(store, token=token, state_file=state_file, address=address)


@contextlib.contextmanager
def _terminated_cleanly() -> Iterator[None]:
    """Let SIGTERM end the console as Ctrl-C does, with every cleanup run.

    uvicorn catches the signal, shuts down, then raises it again: without a handler
    of ours the process would die there, before the token file is removed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _token_file(token: str) -> Iterator[Path]:
    """A file only this user can read, holding the token; removed afterwards."""
    handle, name = tempfile.mkstemp(prefix="convergent-ui-token-")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(token + "\n")
        yield Path(name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def serve(
    store: RunStore,
    where: Resolved,
    *,
    port: int = 8765,
    state_file: Path | None = None,
    open_browser: bool = True,
) -> None:
    """Run the console on ``where`` (see `reachable`) until interrupted, printing its address.

    Raises:
        UserError: If the extra is missing or the port is taken.
    """
    check_extra()
    from convergent.ui.auth import new_token

    host = where.host
    sock = bind(where, port)
    token = new_token()
    app = _guarded(store, sock, where, token, state_file)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(sock.close)
        cleanup.enter_context(_terminated_cleanly())
        base = _url(sock, host)
        if where.loopback:
            url = f"{base}/?token={token}"
            print(f"convergent console on {url}", flush=True)
            print("(anyone with this address can steer your runs: keep it private)", flush=True)
        else:
            kept = cleanup.enter_context(_token_file(token))
            print(f"convergent console on {base}/", flush=True)
            print(
                f"warning: listening on {host}: other machines can reach the console, "
                "over plain HTTP (anyone on the network path can read what it sends)",
                file=sys.stderr,
                flush=True,
            )
            print(
                f"log in with the token in {kept} (readable only by you; removed when the "
                "console stops)",
                flush=True,
            )
            url = f"{base}/"
        if store.readonly:
            print(f"{store.path} is open read-only: actions are disabled", flush=True)
        if open_browser and where.loopback:
            webbrowser.open(url)
        _server(app, quiet=True).run(sockets=[sock])


@dataclass(frozen=True, slots=True)
class Listening:
    """A console served in a background thread."""

    url: str
    """Its base address, without the token."""
    token: str
    """The token requests must carry."""
    app: Any
    """The application (see `convergent.ui.app.console_of`)."""

    @property
    def entry(self) -> str:
        """The address that logs a browser in (with ``?token=``)."""
        return f"{self.url}/?token={self.token}"

    @property
    def base(self) -> str:
        """The random path the pages live under."""
        base: str = self.app.base
        return base


@contextlib.contextmanager
def serve_in_thread(
    store: RunStore,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    state_file: Path | None = None,
    token: str | None = None,
) -> Iterator[Listening]:
    """Serve the console in a thread while the block runs; stop it afterwards."""
    check_extra()
    from convergent.ui.auth import new_token

    token = token or new_token()
    where = resolve(host, port)
    sock = bind(where, port)
    app = _guarded(store, sock, where, token, state_file)
    server = _server(app, quiet=True)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="convergent-console", daemon=True
    )
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise UserError("the console server did not start")
            threading.Event().wait(0.01)
        yield Listening(_url(sock, host), token, app)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
