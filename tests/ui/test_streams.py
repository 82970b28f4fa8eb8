"""A huge run in the console: long values cut in pages and streams, and closed streams let go.

The run's task, model text, tool arguments, tool result and output are each a
million characters. Pages and live updates show a bounded part of each, and the run's
JSON download has every value whole. A live stream served by uvicorn is opened and
closed like a browser tab: once closed, the console holds nothing of it.
"""

from __future__ import annotations

import gc
import inspect
import json
import time
import weakref
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from convergent import tool
from convergent.durability.sqlite import RunStore
from convergent.testing import call, step
from convergent.ui import sse
from convergent.ui.app import console_of
from convergent.ui.server import Listening, serve_in_thread
from convergent.ui.timeline import CLIP

from .conftest import BASE, make_run, needs_extra

needs_extra()

SIZE = 1_000_000
"""Characters of each long value of the huge run."""
PAGE_BOUND = 120_000
"""Characters a page (or a stream's first update) of the huge run may have at most."""


@tool
def dump(text: str) -> str:
    """Return a very long text."""
    return "r" * SIZE


@pytest.fixture
def huge(store: RunStore) -> str:
    make_run(
        store,
        "huge",
        [step(call("dump", text="a" * SIZE), content="m" * SIZE), "o" * SIZE],
        tools=[dump],
        task="t" * SIZE,
    )
    return "huge"


def test_a_page_shows_long_values_cut_and_the_download_has_them_whole(
    huge: str, client: Any
) -> None:
    page = client.get(f"{BASE}/runs/{huge}").text
    assert len(page) < PAGE_BOUND
    for letter in "tmro":
        assert letter * CLIP in page and letter * (CLIP + 1) not in page
    # the arguments' JSON text, {"text":"aaa...: cut to CLIP characters with its start
    assert "a" * (CLIP - 12) in page and "a" * (CLIP + 1) not in page
    # the task, both model texts, the arguments' JSON text, the result and the output each
    # say what they leave out
    assert page.count("more characters") == 6
    assert f"{SIZE - CLIP:,} more characters" in page
    assert page.count(f'href="{BASE}/runs/huge/download"') == 7
    runs = client.get(f"{BASE}/runs").text
    assert len(runs) < PAGE_BOUND and "t" * 80 in runs
    download = client.get(f"{BASE}/runs/{huge}/download")
    assert download.headers["content-disposition"] == 'attachment; filename="run-huge.json"'
    data = json.loads(download.text)
    assert data["run"]["task"] == "t" * SIZE and data["run"]["output"] == "o" * SIZE
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert data["messages"][1]["content"] == "m" * SIZE
    (record,) = data["tool_calls"]
    assert record["arguments"] == {"text": "a" * SIZE} and record["result"] == "r" * SIZE


@pytest.fixture
def console(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[Listening]:
    # nothing renders a stream again by itself: only a disconnect can end it
    monkeypatch.setattr(sse, "REFRESH_SECONDS", 3600.0)
    with serve_in_thread(store) as listening:
        yield listening


def suspended_streams() -> list[Any]:
    """Event-stream generators of the console that are still suspended (not finished)."""
    return [
        thing
        for thing in gc.get_objects()
        if inspect.isasyncgen(thing)
        and thing.ag_frame is not None
        and thing.ag_code.co_filename == sse.__file__
    ]


@pytest.mark.slow
def test_a_closed_stream_lets_go_of_everything_it_held(huge: str, console: Listening) -> None:
    served = console_of(console.app)
    headers = {"authorization": f"Bearer {console.token}"}
    with (
        httpx.Client(base_url=console.url, headers=headers, timeout=60) as client,
        client.stream("GET", f"{console.base}/runs/{huge}/stream") as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()  # kept: closing it would close the connection
        update = ""
        while not update.startswith("data:"):
            update = next(lines)
        assert len(update) < PAGE_BOUND and "o" * CLIP in update
        (stream,) = served.streams
        assert set(stream.sent) == {"summary", "controls", "questions", "chart", "timeline"}
        # between renders it keeps digests of what it sent, never the HTML
        assert all(len(value) == 16 for value in stream.sent.values())
        assert len(suspended_streams()) == 1
    gone = weakref.ref(stream)
    deadline = time.monotonic() + 30
    while served.streams and time.monotonic() < deadline:
        time.sleep(0.02)
    assert served.streams == set()
    assert stream.closed and stream.sent == {}
    assert stream.render is None and stream.version is None
    del stream
    gc.collect()
    assert suspended_streams() == []
    assert gone() is None
