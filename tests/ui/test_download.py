"""A run's JSON download is read and sent a piece at a time, whatever the size of a value."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from convergent import tool
from convergent.durability.sqlite import RunStore
from convergent.testing import call, step
from convergent.ui import download
from convergent.ui.download import run_json

from .conftest import make_run

SIZE = 3_000_000
"""Characters of the run's long result and output (each 3 MB: 48 pieces of `PIECE`)."""
PIECE = 64 * 1024
"""Characters a download reads at a time here."""


@tool
def flood() -> str:
    """Return a very long text, with characters JSON escapes."""
    return ('"\\\n\u00e9' * (SIZE // 4))[:SIZE]


@pytest.mark.slow  # stores and sends a run of many megabytes
def test_a_run_with_values_of_many_megabytes_downloads_in_bounded_memory(
    store: RunStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download, "PIECE", PIECE)
    make_run(store, "big", [step(call("flood")), "o" * SIZE], tools=[flood], task="t" * 1000)
    sent = tmp_path / "run.json"
    largest = 0
    tracemalloc.start()
    try:
        with sent.open("wb") as out:
            for chunk in run_json(store, "big"):
                largest = max(largest, len(chunk))
                out.write(chunk)
                del chunk
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # no piece is more than a piece of a value, escaped (a character becomes 2-6 bytes)
    assert largest <= 6 * download.PIECE + 1000
    # what the download held at most: a few pieces, never a 3 MB value
    assert peak < 16 * PIECE
    data = json.loads(sent.read_bytes())
    (record,) = data["tool_calls"]
    assert record["result"] == flood.function()
    assert data["run"]["output"] == "o" * SIZE and data["run"]["task"] == "t" * 1000
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_small_pieces_make_the_same_document(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = '"\\\n\u00e9 ' * 30
    make_run(store, "run", [step(call("echo", text=text)), 'done \u00e9\n"quoted"'])
    whole = b"".join(run_json(store, "run"))
    monkeypatch.setattr(download, "PIECE", 7)
    monkeypatch.setattr(download, "ROWS", 1)
    assert b"".join(run_json(store, "run")) == whole
    assert json.loads(whole)["run"]["output"] == 'done \u00e9\n"quoted"'
