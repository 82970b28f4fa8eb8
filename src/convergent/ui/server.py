"""Starting the console: the extra's check, the listening socket, the token, uvicorn.

The socket is bound before uvicorn starts, so a taken port is a one-line error, and
port 0 picks any free port (the printed address names it). `serve_in_thread` runs the
same server in a background thread, for tests, benchmarks and applications.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import sys
import threading
import webbrowser
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent.exceptions import UserError
from convergent.store import RunStore

__all__ = ["Listening", "bind", "check_extra", "serve", "serve_in_thread"]

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


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port).

    Raises:
        UserError: If the address is unknown or the port is taken.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise UserError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if port and exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
            raise UserError(
                f"port {port} on {host} is taken; pass --port N, or --port 0 for a free one"
            ) from None
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


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


def serve(
    db: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    state_file: Path | None = None,
    open_browser: bool = True,
) -> None:
    """Run the console until interrupted, printing its address with the token.

    Raises:
        UserError: If the extra is missing, the port is taken or the database unusable.
    """
    check_extra()
    from convergent.ui.app import create_app
    from convergent.ui.auth import new_token

    sock = bind(host, port)
    token = new_token()
    with RunStore(db) as store:
        app = create_app(store, token=token, state_file=state_file)
        url = f"{_url(sock, host)}/?token={token}"
        print(f"convergent console on {url}", flush=True)
        print("(anyone with this address can steer your runs: keep it private)", flush=True)
        if not _loopback(host):
            print(
                f"warning: listening on {host}: other machines can reach the console",
                file=sys.stderr,
                flush=True,
            )
        if open_browser:
            webbrowser.open(url)
        try:
            _server(app, quiet=True).run(sockets=[sock])
        finally:
            sock.close()


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
    from convergent.ui.app import create_app
    from convergent.ui.auth import new_token

    token = token or new_token()
    app = create_app(store, token=token, state_file=state_file)
    sock = bind(host, port)
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
