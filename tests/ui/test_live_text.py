"""The reply a running model writes reaches the console through its live-text file."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.testclient import TestClient

from convergent import (
    CycleStarted,
    ModelResponded,
    RunStopped,
    StopReason,
    TextDelta,
    ToolCall,
    Usage,
)
from convergent.durability.sqlite import RunStore
from convergent.events import ToolCallDelta
from convergent.testing import call, step
from convergent.ui.live_text import (
    LiveText,
    LiveTextWriter,
    live_path,
    live_version,
    read_live_text,
)

from .conftest import BASE, make_run, needs_extra
from .test_app import mark_running

needs_extra()

CALL = ToolCall(id="c1", name="calculator", arguments={"expression": "17*23"})


def responded(cycle: int, content: str, calls: tuple[ToolCall, ...] = ()) -> ModelResponded:
    return ModelResponded(
        run_id="r1",
        cycle=cycle,
        content=content,
        tool_calls=calls,
        finish_reason="stop",
        usage=Usage(),
        metadata={},
        duration=1.0,
    )


def test_the_writer_keeps_the_reply_so_far_and_removes_it_after(store: RunStore) -> None:
    now = [0.0]
    writer = LiveTextWriter(store.path, clock=lambda: now[0])
    writer(CycleStarted(run_id="r1", cycle=3, message_count=5))
    assert read_live_text(store.path, "r1") is None
    writer(TextDelta(run_id="r1", cycle=3, text="17 * 23 "))
    assert read_live_text(store.path, "r1") == LiveText(3, "17 * 23 ", calls=False)
    seen = live_version(store.path, "r1")
    writer(TextDelta(run_id="r1", cycle=3, text="= 341"))  # within the interval: not yet
    assert read_live_text(store.path, "r1") == LiveText(3, "17 * 23 ", calls=False)
    now[0] = 0.2
    writer(TextDelta(run_id="r1", cycle=3, text="?"))
    assert read_live_text(store.path, "r1") == LiveText(3, "17 * 23 = 341?", calls=False)
    assert live_version(store.path, "r1") != seen
    writer(
        ToolCallDelta(run_id="r1", cycle=3, index=0, call_id="c1", name="calculator", arguments="")
    )
    assert read_live_text(store.path, "r1") == LiveText(3, "17 * 23 = 341?", calls=True)
    writer(responded(3, "17 * 23 = 341?!", (CALL,)))
    assert read_live_text(store.path, "r1") == LiveText(3, "17 * 23 = 341?!", calls=True)
    writer(CycleStarted(run_id="r1", cycle=4, message_count=7))
    assert read_live_text(store.path, "r1") is None
    writer(TextDelta(run_id="r1", cycle=4, text="391"))
    assert live_path(store.path, "r1").is_file()
    writer(
        RunStopped(
            run_id="r1",
            cycle=4,
            reason=StopReason.COMPLETED,
            detail="",
            output="391",
            usage=Usage(),
        )
    )
    assert not live_path(store.path, "r1").exists()
    assert live_version(store.path, "r1") is None


def test_closing_the_writer_removes_what_a_failed_run_left(store: RunStore) -> None:
    writer = LiveTextWriter(store.path)
    writer(CycleStarted(run_id="r1", cycle=1, message_count=1))
    writer(TextDelta(run_id="r1", cycle=1, text="half a"))
    assert live_path(store.path, "r1").is_file()
    writer.close()
    assert not live_path(store.path, "r1").exists()


def test_the_run_page_shows_the_reply_while_it_streams(store: RunStore, client: TestClient) -> None:
    make_run(store, "live", [step(call("calculator", expression="1+1")), "2"])
    mark_running(store, "live")
    writer = LiveTextWriter(store.path)
    writer(CycleStarted(run_id="live", cycle=3, message_count=5))
    writer(TextDelta(run_id="live", cycle=3, text="<b>halfway</b> through"))
    page: Any = client.get(f"{BASE}/runs/live").text
    assert 'id="cycle-3"' in page and "streaming" in page
    assert "&lt;b&gt;halfway&lt;/b&gt; through" in page  # escaped, like any model text
    writer(ToolCallDelta(run_id="live", cycle=3, index=0, call_id=None, name=None, arguments=""))
    assert "thinking" in client.get(f"{BASE}/runs/live").text
    writer.close()
    after = client.get(f"{BASE}/runs/live").text
    assert "halfway" not in after and "streaming" not in after


def test_a_stopped_run_ignores_a_leftover_file(store: RunStore, client: TestClient) -> None:
    make_run(store, "done", ["all done"])
    path = live_path(store.path, "done")
    path.parent.mkdir(exist_ok=True)
    path.write_text('{"cycle": 2, "text": "stale words", "calls": false}')
    assert "stale words" not in client.get(f"{BASE}/runs/done").text


async def test_text_held_back_by_the_interval_is_written_when_it_passes(store: RunStore) -> None:
    writer = LiveTextWriter(store.path, interval=0.05)
    writer(CycleStarted(run_id="r1", cycle=1, message_count=1))
    writer(TextDelta(run_id="r1", cycle=1, text="17 * 23 "))
    writer(TextDelta(run_id="r1", cycle=1, text="= 341"))  # then the model pauses
    assert read_live_text(store.path, "r1") == LiveText(1, "17 * 23 ", calls=False)
    # the later write is due before this sleep ends: the loop runs timers in time order
    await asyncio.sleep(0.3)
    assert read_live_text(store.path, "r1") == LiveText(1, "17 * 23 = 341", calls=False)
    writer.close()
