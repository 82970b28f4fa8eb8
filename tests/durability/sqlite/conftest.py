from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from convergent.durability.sqlite import RunStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore(tmp_path / "runs.db") as opened:
        yield opened
