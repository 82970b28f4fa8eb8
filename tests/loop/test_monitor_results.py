"""`RunMonitor`: each result compared with the previous result of the same call."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterable

import pytest
from pydantic import TypeAdapter

from convergent import StopPolicy, ToolCall
from convergent.digest import call_digest
from convergent.loop.monitor import RunMonitor
from convergent.meaning import MAX_DIFFERENCES
from convergent.messages import CallOutcome
from convergent.state import MonitorState
from convergent.stop import Nudge, Stall, StopReason
from convergent.testing import call

TOOLS: dict[str, bool | None] = {
    "job_status": True,
    "download_status": True,
    "git_log": True,
    "list_jobs": True,
    "read": True,
    "status": None,
    "next_ticket": None,
}


def monitor(state: MonitorState | None = None) -> RunMonitor:
    return RunMonitor(StopPolicy(), tools=TOOLS, state=state)


def trajectory(m: RunMonitor, steps: Iterable[tuple[ToolCall, str]]) -> list[int]:
    """Run single-call steps; the positions (0-based) of the findings, noted as the loop would."""
    found = []
    for n, (made, result) in enumerate(steps):
        finding = m.review([made])
        if finding is None:
            m.observe(made, CallOutcome.OK, result)
            finding = m.end_step()[1]
        if finding is not None:
            found.append(n)
            if isinstance(finding, Stall) and finding.nudge:
                m.noted(Nudge(StopReason.STALLED, "note", finding.kind))
    return found


def polls(name: str, texts: Iterable[str]) -> list[tuple[ToolCall, str]]:
    return [(call(name, job="j1"), text) for text in texts]


# --- progress once taken for a clock or an id -------------------------------------------------


def test_a_queue_that_hands_out_the_next_ticket_is_progress() -> None:
    tickets = [(call("next_ticket"), f"TICKET-{1001 + n}") for n in range(8)]
    assert trajectory(monitor(), tickets) == []


@pytest.mark.parametrize(
    ("name", "results"),
    [
        ("download_status", [f"downloaded {1_500_000_000 + n} bytes" for n in range(8)]),
        ("git_log", [f"HEAD is {0x3F2A9C1E0B + n * 7919:x}" for n in range(8)]),
        ("list_jobs", [f'{{"last_id": "{1_500_000_000 + n}", "jobs": []}}' for n in range(8)]),
        (
            "job_status",
            [f'{{"job_id": "0b6f6e52-3a2e-4d65-9a3c-1c0f1e1d7a1{n}"}}' for n in range(8)],
        ),
    ],
    ids=["byte-count", "git-sha", "last-id", "uuid-job"],
)
def test_a_read_whose_count_or_subject_moves_is_progress(name: str, results: list[str]) -> None:
    assert trajectory(monitor(), polls(name, results)) == []


# --- volatile values once missed --------------------------------------------------------------


@pytest.mark.parametrize(
    "result",
    [
        "2026-11-28 10:26:{:02d},123 INFO job j1 running",
        "job j1 running, status took {}ms",
        "job j1 running for 1m{}.456s",
        "job j1 running, updated {} seconds ago",
        "job j1 running on 127.0.0.1:{}",
        "job j1 running in /tmp/tmpab12cd{:02d}",
        "traceparent: 00-0af7651916cd43dd8448eb211c8031{:02d}-b7ad6b7169203331-01\nrunning",
        "X-Request-Id: req-{}\nstatus: running",
        '{{"status": "running", "request_id": "r{}", "updated_at": "2026-11-28T10:26:{:02d}Z"}}',
    ],
)
@pytest.mark.parametrize("name", ["job_status", "status"])
def test_a_poll_whose_only_change_is_volatile_is_noted_then_stopped(name: str, result: str) -> None:
    first = 40_000 if "127.0.0.1" in result else 10  # an ephemeral port, or a count of units
    texts = [result.format(first + 7 * n, n) for n in range(6)]
    assert trajectory(monitor(), polls(name, texts))[:2] == [2, 3]


def test_a_cycle_of_reads_with_fresh_time_stamps_is_found() -> None:
    steps = []
    for n in range(8):
        steps += [
            (call("read", path="a"), f"a.txt at 10:26:{2 * n:02d}"),
            (call("job_status", job="j1"), f"running at 10:26:{2 * n + 1:02d}"),
        ]
    # as with the same bytes: the fifth call completes the cycle's third repetition
    assert trajectory(monitor(), steps)[:2] == [4, 5]


# --- kept by reference, digests in the state -------------------------------------------------


def test_the_previous_result_is_kept_without_a_copy() -> None:
    m = monitor()
    result = "x" * 4_000_000
    made = call("read", path="big")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        m.observe(made, CallOutcome.OK, result)
        m.end_step()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 100_000
    assert json.dumps(TypeAdapter(MonitorState).dump_python(m.state, mode="json")).count("x") < 50


def test_after_a_resume_only_the_same_bytes_are_the_same() -> None:
    m = monitor()
    for n in range(2):
        m.observe(call("job_status", job="j1"), CallOutcome.OK, f"running at 10:26:0{n}")
        m.end_step()
    adapter = TypeAdapter(MonitorState)
    stored = adapter.validate_python(json.loads(adapter.dump_json(m.state)))
    # the same bytes as the last result: the third poll of the same result
    same = monitor(adapter.validate_python(adapter.dump_python(stored)))
    same.observe(call("job_status", job="j1"), CallOutcome.OK, "running at 10:26:01")
    assert same.end_step()[1] is not None
    # another time stamp: the previous text is gone, so it counts as a change
    other = monitor(stored)
    other.observe(call("job_status", job="j1"), CallOutcome.OK, "running at 10:26:02")
    assert other.end_step()[1] is None
    assert other.state.stretch[call_digest("job_status", {"job": "j1"})][1] == 1


def test_a_state_without_result_digests_still_loads() -> None:
    old = TypeAdapter(MonitorState).dump_python(MonitorState(), mode="json")
    del old["results"]
    assert TypeAdapter(MonitorState).validate_python(old) == MonitorState()


def test_the_differences_examined_in_one_step_are_bounded() -> None:
    m = monitor()
    lines = "\n".join(f"line {n} took {{}}ms" for n in range(MAX_DIFFERENCES))
    calls = [call("read", path=str(n)) for n in range(8)]
    keys = [call_digest(made.name, made.arguments) for made in calls]
    for result in (lines.format(*[1] * MAX_DIFFERENCES), lines.format(*[2] * MAX_DIFFERENCES)):
        for made in calls:
            m.observe(made, CallOutcome.OK, result)
        m.end_step()
    # a result that means what the previous one meant keeps its meaning, not its digest
    kept = [m.state.results[key][1] != m.state.results[key][0] for key in keys]
    # four results of 64 differences fill the step's budget: the rest count as new
    assert kept == [True] * 4 + [False] * 4


def test_a_task_sent_again_with_a_new_time_stamp_is_not_new() -> None:
    m = monitor()
    m.task("2026-11-28 10:26:05 Fix the failing test (request_id=a1).")
    assert not m.message("2026-11-28 10:31:47 Fix the failing test (request_id=b7).")
    assert m.message("2026-11-28 10:31:47 Fix the 2 failing tests (request_id=b7).")
