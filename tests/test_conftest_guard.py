from __future__ import annotations

import socket

import pytest


def test_non_loopback_connections_are_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(ConnectionRefusedError, match="only loopback"):
            sock.connect(("192.0.2.1", 443))


class _Item:
    """The part of a collected test the marking hook reads and writes."""

    def __init__(self, *markers: str) -> None:
        self.markers = set(markers)

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.add(marker.name)


def test_tests_of_heavy_components_are_slow() -> None:
    from conftest import pytest_collection_modifyitems

    items = [_Item("temporal"), _Item("local_model"), _Item("browser"), _Item("asyncio"), _Item()]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert ["slow" in item.markers for item in items] == [True, True, True, False, False]
