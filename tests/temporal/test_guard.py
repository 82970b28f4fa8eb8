"""Ending a run whose payloads cannot be read survives the cancellation Temporal deals out.

A workflow task's payloads are read concurrently; the first read that fails makes
Temporal cancel the others (``BoundedVisitorFunctions`` drains them). A read that was
terminating the run when a sibling failed was cancelled with its termination, and the
run was marked ended: it stayed ``running`` for ever, its workflow task failing, and the
worker's shutdown waited on it (a wedged test in CI).
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest


class Cluster:
    """Stands in for a client: its terminations wait for ``answer`` (the network), and
    ``refuse`` makes the next one fail as an unreachable cluster does."""

    def __init__(self) -> None:
        self.terminated: list[tuple[str, str]] = []
        self.answer = asyncio.Event()
        self.refuse = False

    def get_workflow_handle(self, workflow_id: str) -> Any:
        cluster = self

        class Handle:
            async def terminate(self, *args: Any, reason: str | None = None) -> None:
                await cluster.answer.wait()
                if cluster.refuse:
                    cluster.refuse = False
                    raise ConnectionError("cluster out of reach")
                cluster.terminated.append((workflow_id, reason or ""))

        return Handle()


def _terminator(cluster: Cluster) -> Any:
    from convergent.temporal._guard import _Terminator

    terminator = _Terminator()
    terminator.client = cluster
    return terminator


async def test_a_termination_outlives_the_read_that_started_it() -> None:
    from temporalio.exceptions import ApplicationError

    cluster = Cluster()
    end = _terminator(cluster)
    error = ApplicationError("the payload store s.db does not hold payload p", type="missing")
    first = asyncio.ensure_future(end("run-1", error))  # the read that meets it first
    await asyncio.sleep(0)
    sibling = asyncio.ensure_future(end("run-1", error))  # a concurrent read of the task
    await asyncio.sleep(0)
    for read in (first, sibling):  # the task's reads drained: cancelled
        read.cancel()
    await asyncio.gather(first, sibling, return_exceptions=True)
    cluster.answer.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert cluster.terminated == [("run-1", "the payload store s.db does not hold payload p")]
    await end("run-1", error)  # the next attempt's read: ended already, once
    assert len(cluster.terminated) == 1


async def test_a_termination_that_failed_is_tried_again_by_the_next_read() -> None:
    from temporalio.exceptions import ApplicationError

    cluster = Cluster()
    cluster.refuse = True
    cluster.answer.set()
    end = _terminator(cluster)
    error = ApplicationError("damaged", type="damaged")
    with pytest.raises(ConnectionError):
        await end("run-2", error)
    assert cluster.terminated == []
    await end("run-2", error)
    assert cluster.terminated == [("run-2", "damaged")]


async def test_a_failed_termination_no_read_came_back_for_is_not_reported_as_unretrieved() -> None:
    from temporalio.exceptions import ApplicationError

    reported: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    cluster = Cluster()
    cluster.refuse = True
    end = _terminator(cluster)
    read = asyncio.ensure_future(end("run-3", ApplicationError("damaged", type="damaged")))
    await asyncio.sleep(0)
    read.cancel()  # the only read, drained before the termination failed
    await asyncio.gather(read, return_exceptions=True)
    cluster.answer.set()
    for _ in range(5):
        await asyncio.sleep(0)
    del end, read
    gc.collect()
    loop.set_exception_handler(None)
    assert reported == []
