"""The console's guard: a secret token for every request, same origin for every change.

`TokenGuard` wraps the whole application (pure ASGI, so it also guards the event
streams and static files):

- every request must carry the token: ``?token=...`` once (the guard then sets an
  HttpOnly, SameSite=Strict cookie and redirects to the same address without it, so
  the token does not stay in the address bar or the history), the cookie, or an
  ``Authorization: Bearer`` header; otherwise 401;
- a request that changes something must be a POST whose ``Origin`` (or, without one,
  ``Referer``) is the console's own origin; otherwise 403 (another site cannot make the
  browser act, even with the cookie);
- every response forbids framing and any script but the console's own file.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

__all__ = ["TokenGuard", "new_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS = frozenset({"GET", "HEAD"})

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


def new_token() -> str:
    """A fresh random token (192 bits)."""
    return secrets.token_urlsafe(24)


def cookie_name(token: str) -> str:
    """The cookie's name: per token, so consoles on other ports keep their own."""
    return "convergent_" + hashlib.sha256(token.encode()).hexdigest()[:10]


class TokenGuard:
    """ASGI middleware enforcing the token and the same-origin rule (see the module).

    Args:
        app: The application it guards.
        token: The secret printed when the console starts.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_name(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then pass it on with the security headers added."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if _same(query.get("token"), self.token) and scope["method"] in SAFE_METHODS:
            await self._adopt_token(scope, query, send)
            return
        if not self._authorised(headers):
            await _plain(send, 401, "401: open the address convergent ui printed (with ?token=)")
            return
        if scope["method"] not in SAFE_METHODS and not _same_origin(scope, headers):
            await _plain(send, 403, "403: changes are accepted only from the console's own pages")
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    def _authorised(self, headers: dict[str, str]) -> bool:
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header is no token
            return False
        morsel = cookies.get(self.cookie)
        if morsel is not None and _same(morsel.value, self.token):
            return True
        bearer = headers.get("authorization", "")
        return bearer.startswith("Bearer ") and _same(bearer[7:], self.token)

    async def _adopt_token(self, scope: Scope, query: dict[str, str], send: Send) -> None:
        """Set the cookie and redirect to the same address without the token."""
        rest = {key: value for key, value in query.items() if key != "token"}
        target = scope.get("path", "/") + (f"?{urlencode(rest)}" if rest else "")
        cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", target.encode("latin-1")),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _headers(scope: Scope) -> dict[str, str]:
    return {
        key.decode("latin-1").lower(): value.decode("latin-1")
        for key, value in scope.get("headers", [])
    }


def _same(given: str | None, token: str) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), token.encode())


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


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
