"""The console's guard: who may ask, at which address, and for which changes.

`TokenGuard` wraps the whole application (pure ASGI, so it also guards the event
streams and static files). The pages live under a random path (the *base*, such as
``/c-3f9a...``), made anew at each start:

- a request must name this server in its ``Host`` header (its address, an IP address,
  ``localhost``), so a page whose domain was rebound to 127.0.0.1 gets nothing (400);
- a path with control characters or characters beyond Latin-1 is refused (400);
- the token printed at start logs a browser in once (``?token=...`` on any address, or
  the login form): the guard opens a *session* and sets its id, not the token, in an
  HttpOnly, SameSite=Strict cookie whose ``Path`` is the base, then redirects to the
  same page under the base. Browsers send cookies to every port of a host, but only
  for matching paths: a server on another port never sees this cookie, and the
  cookie's value is worth nothing as a token;
- ``Authorization: Bearer TOKEN`` (the token itself, never a session id) works on any
  path, for scripts; anything else gets 401;
- a request that changes something must be a POST whose ``Origin`` (or, without one,
  ``Referer``) is the console's own origin; otherwise 403;
- every response forbids framing and any script but the console's own file;
- ``/favicon.ico``, which browsers ask for by themselves, is an empty answer (204).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import secrets
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from html import escape
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

__all__ = ["Address", "Sessions", "TokenGuard", "new_base", "new_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS = frozenset({"GET", "HEAD"})
COOKIE = "convergent_session"
"""Name of the session cookie (its path, the base, keeps consoles apart)."""
MAX_SESSIONS = 256
"""Sessions kept; the oldest is forgotten first (its browser logs in again)."""
MAX_LOGIN_BYTES = 4096
"""Largest login form accepted."""
LANDING = "/runs"
"""Where a login lands when the address it came with is not a page path."""

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]

_PAGE_PATH = re.compile(r"(/[A-Za-z0-9._~-]+)+/?")
_BAD_PATH = re.compile(r"[\x00-\x1f\x7f]|[^\x00-\xff]")


def new_token() -> str:
    """A fresh random token (192 bits)."""
    return secrets.token_urlsafe(24)


def new_base() -> str:
    """A fresh random base path for the pages (``/c-`` and 64 random bits in hex)."""
    return f"/c-{secrets.token_hex(8)}"


class Sessions:
    """Logged-in browsers: random session ids, kept (hashed) in this process only.

    Args:
        limit: Sessions kept at most; the oldest is forgotten first.
    """

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self._known: dict[bytes, None] = {}

    def open(self) -> str:
        """A new session; returns its id (the cookie's value)."""
        session = secrets.token_urlsafe(32)
        while len(self._known) >= self.limit:
            self._known.pop(next(iter(self._known)))
        self._known[_digest(session)] = None
        return session

    def valid(self, session: str) -> bool:
        """Whether ``session`` is the id of an open session."""
        return _digest(session) in self._known

    def __len__(self) -> int:
        return len(self._known)


def _digest(session: str) -> bytes:
    return hashlib.sha256(session.encode("utf-8", "replace")).digest()


@dataclass(frozen=True, slots=True)
class Address:
    """Where the console listens: the ``Host`` headers it answers."""

    host: str
    """The host it was asked to listen on (a name or an address)."""
    port: int
    """The port it listens on."""
    wildcard: bool = False
    """Whether it listens on every interface (then this machine's names are its own)."""

    def accepts(self, header: str) -> bool:
        """Whether a ``Host`` header names this server (see the module)."""
        name, port = _split_host(header)
        if name is None or port != self.port:
            return False
        if name in ("localhost", _normal(self.host)) or name.endswith(".localhost"):
            return True
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            pass
        return self.wildcard and name in (_normal(socket.gethostname()), _normal(socket.getfqdn()))


def _normal(name: str) -> str:
    return name.strip("[]").rstrip(".").lower()


def _split_host(header: str) -> tuple[str | None, int]:
    """``(name, port)`` of a ``Host`` header (port 80 when absent); name None if malformed."""
    header = header.strip()
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ("" if not rest else None)
    else:
        name, _, port_text = header.partition(":")
    if not name or port_text is None or (port_text and not port_text.isdigit()):
        return None, 0
    return _normal(name), int(port_text) if port_text else 80


class TokenGuard:
    """ASGI middleware enforcing the rules of the module.

    Args:
        app: The application it guards (its pages are addressed under ``base``).
        token: The secret printed when the console starts.
        base: The random path the pages live under.
        address: Where the console listens (for the ``Host`` check).
    """

    def __init__(self, app: ASGIApp, token: str, *, base: str, address: Address) -> None:
        self.app = app
        self.token = token
        self.base = base
        self.address = address
        self.sessions = Sessions()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then pass it on with the security headers added."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path = str(scope.get("path", "/"))
        if await self._answered_first(scope, send, path, headers):
            return
        inside = path == self.base or path.startswith(self.base + "/")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query and scope["method"] in SAFE_METHODS:
            if _same(query["token"], self.token):
                rest = {key: value for key, value in query.items() if key != "token"}
                await self._log_in(send, path[len(self.base) :] if inside else path, rest)
            else:
                await self._refuse(send)
            return
        if path == "/login" and scope["method"] == "POST":
            await self._login_form(scope, receive, send, headers)
            return
        if not self._authorised(headers, inside):
            await self._refuse(send)
            return
        if scope["method"] not in SAFE_METHODS and not _same_origin(scope, headers):
            await _page(send, 403, "403: changes are accepted only from the console's own pages")
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if inside:
            scope = {**scope, "root_path": scope.get("root_path", "") + self.base}
        await self.app(scope, receive, secured)

    async def _answered_first(
        self, scope: Scope, send: Send, path: str, headers: dict[str, str]
    ) -> bool:
        """Answer what needs no session: a bad address or host (400), the icon (204)."""
        if _BAD_PATH.search(path):
            await _page(send, 400, "400: the address has characters a page address cannot have")
        elif not self.address.accepts(headers.get("host", "")):
            await _page(send, 400, "400: this console answers only requests addressed to it")
        elif path == "/favicon.ico" and scope["method"] in SAFE_METHODS:
            await _no_icon(send)  # browsers ask for it on their own, without the cookie
        else:
            return False
        return True

    def _authorised(self, headers: dict[str, str], inside: bool) -> bool:
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer "):
            return _same(bearer[7:], self.token)
        if not inside:
            return False
        cookies: SimpleCookie = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except CookieError:
            return False
        morsel = cookies.get(COOKIE)
        return morsel is not None and self.sessions.valid(morsel.value)

    async def _log_in(self, send: Send, path: str, query: dict[str, str]) -> None:
        """Open a session, set its cookie and redirect to the page under the base."""
        page = path if _PAGE_PATH.fullmatch(path) else LANDING
        target = self.base + page + (f"?{urlencode(query)}" if query else "")
        cookie = f"{COOKIE}={self.sessions.open()}; Path={self.base}; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", target.encode("ascii")),
                    (b"set-cookie", cookie.encode("ascii")),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    async def _login_form(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> None:
        """The login form's POST: the token in the body, never in an address."""
        if not _same_origin(scope, headers):
            await _page(send, 403, "403: changes are accepted only from the console's own pages")
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = bool(message.get("more_body")) and len(body) <= MAX_LOGIN_BYTES
        given = parse_qs(body[:MAX_LOGIN_BYTES].decode("latin-1")).get("token", [""])[0]
        if _same(given.strip(), self.token):
            await self._log_in(send, LANDING, {})
        else:
            await self._refuse(send, "that is not the token")

    async def _refuse(self, send: Send, why: str = "") -> None:
        text = "401: open the address convergent ui printed (with ?token=), or enter its token"
        await _page(send, 401, f"{why}: {text}" if why else text, login=True)


def _headers(scope: Scope) -> dict[str, str]:
    return {
        key.decode("latin-1").lower(): value.decode("latin-1")
        for key, value in scope.get("headers", [])
    }


def _same(given: str | None, token: str) -> bool:
    return given is not None and secrets.compare_digest(
        given.encode("utf-8", "replace"), token.encode()
    )


def _same_origin(scope: Scope, headers: dict[str, str]) -> bool:
    """Whether ``Origin`` (or ``Referer``) names this server, as the browser reached it."""
    host = headers.get("host")
    if not host:
        return False
    own = f"{scope.get('scheme', 'http')}://{host}".lower()
    origin = headers.get("origin")
    if origin is not None:
        return origin.lower() == own
    referer = headers.get("referer")
    if referer is None:
        return False
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}".lower() == own


_LOGIN = (
    '<form method="post" action="/login"><label for="token">Token</label> '
    '<input type="password" id="token" name="token" autocomplete="off" required> '
    '<button type="submit">Log in</button></form>'
)


async def _no_icon(send: Send) -> None:
    """``/favicon.ico``: nothing (204), so no page logs a failed request for it."""
    headers = [(b"content-length", b"0"), *SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _page(send: Send, status: int, text: str, *, login: bool = False) -> None:
    """A minimal HTML page with one line of text (and the login form on a 401)."""
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{status} · convergent console</title></head><body>"
        f"<p>{escape(text)}</p>{_LOGIN if login else ''}</body></html>\n"
    )
    body = html.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
