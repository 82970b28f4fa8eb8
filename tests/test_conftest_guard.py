from __future__ import annotations

import socket

import pytest


def test_non_loopback_connections_are_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(ConnectionRefusedError, match="only loopback"):
            sock.connect(("192.0.2.1", 443))
