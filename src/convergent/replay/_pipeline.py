"""Read, label, replay and judge runs as a stream, here or in worker processes.

Runs are read one at a time and replayed in batches; at most a few batches are in
flight at once, so memory does not grow with the number of runs. With more than one
worker, batches go to that many processes (each replays with the convergent this
process imports) and verdicts come back in input order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from convergent.replay._declarations import Declarations
from convergent.replay._labels import Labels
from convergent.replay._readers import read_runs
from convergent.replay._recording import Malformed, Skipped, Trajectory
from convergent.replay._replayer import replay_run
from convergent.replay._settings import Settings, agent_arguments
from convergent.replay._verdict import RunVerdict, judge

__all__ = ["BATCH", "Item", "judged_runs"]

Item = RunVerdict | Malformed | Skipped
"""What the stream gives for each run, lost run or line passed over."""

BATCH = 64
"""Runs per batch sent to a worker."""
_IN_FLIGHT_PER_WORKER = 2


def _replay_batch(
    runs: Sequence[Trajectory], settings: Settings, threshold: int
) -> list[RunVerdict]:
    async def replay_all() -> list[RunVerdict]:
        return [judge(run, await replay_run(run, settings), threshold) for run in runs]

    return asyncio.run(replay_all())


def _batches(
    items: Iterable[Trajectory | Malformed | Skipped], labels: Labels, declarations: Declarations
) -> Iterator[list[Trajectory] | Malformed | Skipped]:
    batch: list[Trajectory] = []
    for item in items:
        if not isinstance(item, Trajectory):
            yield item
            continue
        batch.append(labels.apply(declarations.apply(item)))
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def judged_runs(
    paths: Sequence[str | Path],
    *,
    settings: Settings | None = None,
    format: str | None = None,
    labels: Labels | None = None,
    declarations: Declarations | None = None,
    threshold: int = 3,
    workers: int = 1,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[tuple[str, Item]]:
    """Every run of every path, judged (or reported lost), with the path it came from.

    Args:
        paths: Recording files or folders; each is one corpus.
        settings: The policy under test (default: the installed library's defaults).
        format: Read every file in this format (default: detected per file).
        labels: Labels given by the user.
        declarations: What the user declares of the tools and results.
        threshold: Unchanged repeats of one call that make a real loop.
        workers: Processes that replay (1: this one).
        on_read: Called with the number of runs in each batch read.

    Raises:
        UserError: On an unreadable input or an unknown setting (checked before any run).
    """
    settings = dict(settings or {})
    agent_arguments(settings)  # a bad setting fails here, once, not in every run
    labels = labels or Labels()
    declarations = declarations or Declarations()
    if workers <= 1:
        for path in paths:
            for batch in _batches(read_runs([path], format), labels, declarations):
                if not isinstance(batch, list):
                    yield str(path), batch
                    continue
                if on_read is not None:
                    on_read(len(batch))
                for verdict in _replay_batch(batch, settings, threshold):
                    yield str(path), verdict
        return
    yield from _in_workers(
        paths, settings, format, labels, declarations, threshold, workers, on_read
    )


_Job = concurrent.futures.Future[list[RunVerdict]] | Malformed | Skipped


def _in_workers(
    paths: Sequence[str | Path],
    settings: Settings,
    format: str | None,
    labels: Labels,
    declarations: Declarations,
    threshold: int,
    workers: int,
    on_read: Callable[[int], None] | None,
) -> Iterator[tuple[str, Item]]:
    context = multiprocessing.get_context("forkserver" if sys.platform == "linux" else "spawn")
    pending: deque[tuple[str, _Job]] = deque()
    limit = workers * _IN_FLIGHT_PER_WORKER
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        for path in paths:
            for batch in _batches(read_runs([path], format), labels, declarations):
                if not isinstance(batch, list):
                    pending.append((str(path), batch))
                    continue
                if on_read is not None:
                    on_read(len(batch))
                pending.append((str(path), pool.submit(_replay_batch, batch, settings, threshold)))
                while sum(isinstance(job, concurrent.futures.Future) for _, job in pending) > limit:
                    yield from _settle(pending.popleft())
        while pending:
            yield from _settle(pending.popleft())


def _settle(item: tuple[str, _Job]) -> Iterator[tuple[str, Item]]:
    path, job = item
    if not isinstance(job, concurrent.futures.Future):
        yield path, job
        return
    for verdict in job.result():
        yield path, verdict
