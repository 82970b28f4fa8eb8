"""Pages of a run with many child runs stay small: the child runs are paged."""

from __future__ import annotations

import json
import re
import time

import pytest

pytest.importorskip("starlette", reason="the console needs the extra ui")

from starlette.testclient import TestClient  # noqa: E402

from convergent import Agent, Limits  # noqa: E402
from convergent.durability.sqlite import RunStore  # noqa: E402
from convergent.testing import call, scripted, step  # noqa: E402
from convergent.ui.app import CHILDREN_NESTED, CHILDREN_SHOWN  # noqa: E402

from .conftest import BASE, echo, make_run  # noqa: E402

CALLED = 30
"""Child runs the parent really starts, in one cycle."""


def fan_out(store: RunStore) -> None:
    """A run whose one cycle called an agent as a tool ``CALLED`` times."""
    child = Agent(scripted(*["child done"] * CALLED), [echo])
    helper = child.as_tool("helper", "Helps.")
    batch = step(*[call("helper", task=f"job {n}") for n in range(CALLED)])
    make_run(store, "fan", [batch, "all done"], tools=[helper], limits=Limits(max_cycles=100))


def more_children(store: RunStore, count: int) -> None:
    """Store ``count`` more child runs of ``fan`` (as rows its journal would have written)."""
    start = time.time()
    (known,) = store.query("SELECT COUNT(*) FROM runs WHERE parent_run_id = 'fan'")[0]
    rows = [
        (f"fan-extra-{known + n:05d}", f"job {known + n}", "scripted", start + n, start + n,
         json.dumps({"input_tokens": 0, "output_tokens": 0, "requests": 1, "cost": 0.0}),
         f"extra-call-{known + n}")
        for n in range(count)
    ]  # fmt: skip
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO runs (run_id, task, model, status, stop_reason, cycles, usage, elapsed, "
            "started_at, updated_at, epoch, message_count, state_version, parent_run_id, "
            "parent_call_id) VALUES (?, ?, ?, 'stopped', 'completed', 1, ?, 0.1, ?, ?, 1, 0, 6, "
            "'fan', ?)",
            [(r[0], r[1], r[2], r[5], r[3], r[4], r[6]) for r in rows],
        )


def sizes(client: TestClient) -> tuple[int, int]:
    return len(client.get(f"{BASE}/runs").content), len(client.get(f"{BASE}/runs/fan").content)


def test_the_pages_of_a_run_do_not_grow_with_its_child_runs(
    store: RunStore, client: TestClient
) -> None:
    fan_out(store)
    assert store.count_children("fan") == CALLED
    more_children(store, 1_000 - CALLED)
    runs_page, run_page = sizes(client)
    more_children(store, 2_000)
    assert store.count_children("fan") == 3_000
    bigger_runs_page, bigger_run_page = sizes(client)
    # a few digits of the counts change, nothing else
    assert abs(bigger_runs_page - runs_page) < 50 and abs(bigger_run_page - run_page) < 50
    assert runs_page < 20_000 and run_page < 150_000

    listed = client.get(f"{BASE}/runs").text
    assert len(re.findall(r'<tr class="status-\w+ child depth-1">', listed)) == CHILDREN_NESTED
    assert f"{3_000 - CHILDREN_NESTED} more child runs of fan" in listed
    page = client.get(f"{BASE}/runs/fan").text
    assert f"The first {CHILDREN_SHOWN} of 3000" in page
    assert f'href="{BASE}/runs?parent=fan"' in page


def test_every_child_run_is_on_a_page_of_its_parent_s_child_runs(
    store: RunStore, client: TestClient
) -> None:
    make_run(store, "fan", ["done"])
    more_children(store, 120)
    first = client.get(f"{BASE}/runs?parent=fan").text
    assert "120 runs started by run fan (its child runs, oldest first), page 1 of 3" in first
    assert first.count("fan-extra-") >= 50 and "fan-extra-00000" in first
    last = client.get(f"{BASE}/runs?parent=fan&page=3").text
    assert "fan-extra-00119" in last and "fan-extra-00000" not in last
    assert "child of" in last  # each names its parent


def test_a_cycle_with_many_calls_shows_some_and_counts_the_others(
    store: RunStore, client: TestClient
) -> None:
    from convergent.ui.timeline import CALLS_PER_CYCLE

    wide = step(*[call("echo", text=f"n{n}") for n in range(CALLS_PER_CYCLE + 7)])
    make_run(store, "wide", [wide, "done"], tools=[echo])
    page = client.get(f"{BASE}/runs/wide").text
    assert page.count('<div class="call ok"') == CALLS_PER_CYCLE
    assert "… 7 more calls of this cycle not shown here" in page
    assert "7 more calls or requests not drawn" in page
