"""The console's guard over real HTTP: login redirects, odd paths and the Host header.

Requests are written with `http.client` against a uvicorn server on 127.0.0.1, so
paths and ``Host`` headers reach the server exactly as a client or a hostile page
could send them.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from convergent.durability.sqlite import RunStore
from convergent.ui.auth import Address
from convergent.ui.server import Listening, serve_in_thread

from .conftest import make_run, needs_extra

needs_extra()


@pytest.fixture
def console(store: RunStore) -> Iterator[Listening]:
    make_run(store, "r1", ["done"])
    with serve_in_thread(store) as listening:
        yield listening


def fetch(
    console: Listening, path: str, *, host: str | None = None, bearer: bool = False
) -> tuple[int, dict[str, str], str]:
    """GET ``path`` as written; status, headers (lower-case names) and body."""
    address = urlsplit(console.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    headers = {"Host": host or address.netloc}
    if bearer:
        headers["Authorization"] = f"Bearer {console.token}"
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read().decode("utf-8", "replace")
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        connection.close()


@pytest.mark.parametrize(
    "path",
    [
        "//evil.example/?token={token}",
        "/\\evil.example?token={token}",
        "/\\/evil.example/?token={token}",
        "/%5Cevil.example?token={token}",
        "/%2F%2Fevil.example?token={token}",
        "///evil.example/x?token={token}",
        "/runs?next=//evil.example&redirect=https://evil.example&token={token}",
        "/runs?token={token}&next=%2F%2Fevil.example",
        "https://evil.example/?token={token}",
    ],
)
def test_a_login_never_redirects_off_the_console(console: Listening, path: str) -> None:
    status, headers, _ = fetch(console, path.format(token=console.token))
    assert status == 303
    location = headers["location"]
    assert location.startswith(f"{console.base}/"), location
    assert urlsplit(location).netloc == "" and "\\" not in location and "//" not in location
    # wherever it lands, the page is the console's (the session cookie opens it)
    cookie = headers["set-cookie"].split(";")[0]
    address = urlsplit(console.url)
    landed = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    landed.request("GET", location, headers={"Cookie": cookie})
    assert landed.getresponse().status in (200, 404)
    landed.close()


def test_redirects_after_actions_and_from_home_stay_under_the_base(console: Listening) -> None:
    status, headers, _ = fetch(console, "/", bearer=True)
    assert status == 303 and headers["location"] == f"{console.base}/runs"


@pytest.mark.parametrize(
    "path",
    [
        "/%0d%0aSet-Cookie:%20injected=1?token={token}",
        "/%09/evil.example?token={token}",
        "/runs/%0d%0aX:%20y?token={token}",
        "/%E2%80%A8?token={token}",
        "/runs/%F0%9F%98%80?token={token}",
        "{base}/runs/%0Ar1",
        "{base}/runs/%E2%82%AC",
        "/%00",
    ],
)
def test_control_characters_or_characters_beyond_latin_1_in_a_path_get_400(
    console: Listening, path: str
) -> None:
    status, headers, body = fetch(
        console, path.format(token=console.token, base=console.base), bearer=True
    )
    assert status == 400, body
    assert "set-cookie" not in headers and "injected" not in str(headers)
    assert "characters a page address cannot have" in body and "Traceback" not in body


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "rebound.evil.example:{port}", "127.0.0.1:{other}", "evil.example"],
)
def test_a_request_for_another_host_gets_400_even_with_the_token(
    console: Listening, host: str
) -> None:
    port = urlsplit(console.url).port
    named = host.format(port=port, other=(port or 0) + 1)
    status, _, body = fetch(console, f"{console.base}/runs", host=named, bearer=True)
    assert status == 400
    assert "answers only requests addressed to it" in body
    login, headers, _ = fetch(console, f"/?token={console.token}", host=named)
    assert login == 400 and "set-cookie" not in headers


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}",
                                  "[::1]:{port}", "app.localhost:{port}"])  # fmt: skip
def test_the_console_answers_its_own_names(console: Listening, host: str) -> None:
    port = urlsplit(console.url).port
    status, _, body = fetch(console, f"{console.base}/runs", host=host.format(port=port),
                            bearer=True)  # fmt: skip
    assert status == 200 and "r1" in body


def test_the_host_rule() -> None:
    loopback = Address("127.0.0.1", 8765)
    assert loopback.accepts("127.0.0.1:8765") and loopback.accepts("localhost:8765")
    assert loopback.accepts("[::1]:8765") and loopback.accepts("10.1.2.3:8765")
    assert not loopback.accepts("127.0.0.1:8766") and not loopback.accepts("127.0.0.1")
    assert not loopback.accepts("evil.example:8765") and not loopback.accepts("")
    assert not loopback.accepts("127.0.0.1:80x") and not loopback.accepts("[::1:8765")
    assert Address("127.0.0.1", 80).accepts("127.0.0.1")
    named = Address("console.lan", 8765)
    assert named.accepts("CONSOLE.LAN.:8765") and not named.accepts("other.lan:8765")
    import socket

    machine = socket.gethostname()
    assert Address("0.0.0.0", 8765, wildcard=True).accepts(f"{machine}:8765")
    assert not Address("127.0.0.1", 8765).accepts(f"{machine}.evil.example:8765")
