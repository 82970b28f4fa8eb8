"""The live view of a Temporal run waits a bounded time for the last events of an ended run."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from convergent.cli._temporal import _Follower
from convergent.steering import SteeringQueue


@dataclass
class _SilentRunner:
    """A task queue that has a worker which never answers a query."""

    task_queue: str = "q"
    """The queue's name."""
    asked: int = 0
    """Queries sent to the run so far."""

    async def has_workers(self) -> bool:
        return True

    async def is_running(self, run_id: str) -> bool:
        return False


@dataclass
class _EndedRun:
    """A run that has ended, whose queries no worker answers."""

    run_id: str = "r1"
    """The run's id."""
    runner: _SilentRunner = field(default_factory=_SilentRunner)
    """Its task queue."""

    async def progress(self, after: int = 0) -> dict[str, Any]:
        self.runner.asked += 1
        raise TimeoutError("no worker answered the query")


def test_an_ended_run_whose_worker_never_answers_is_left_after_the_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _EndedRun()
    follower = _Follower(
        cast(Any, run),
        [],
        SteeringQueue(),
        interactive=False,
        address="127.0.0.1:7233",
        poll=0.01,
        end_wait=0.2,
    )

    async def follow() -> None:
        ended = asyncio.get_running_loop().create_future()
        ended.set_result(None)
        await asyncio.wait_for(follower.follow(ended), timeout=30)

    asyncio.run(follow())
    notes = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert "waiting for a worker of task queue 'q' to show its last events" in notes
    assert "showed the run's last events within 0.2 s: they are not shown" in notes
    assert run.runner.asked > 1
