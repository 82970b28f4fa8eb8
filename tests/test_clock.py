"""The clock seam: the loop reads time and ids only from the installed clock."""

from __future__ import annotations

import ast
import os
import time
import uuid
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

import convergent
from convergent import Agent, Limits, ScriptedModel, StopReason, calculator
from convergent.clock import Clock, use_clock
from convergent.events import event_to_dict
from convergent.testing import call, scripted


class FakeClock(Clock):
    """Deterministic time that advances one second per reading, and counted ids."""

    def __init__(self) -> None:
        self.ticks = 0
        self.ids = 0

    def now(self) -> float:
        self.ticks += 1
        return 1_000.0 + self.ticks

    def monotonic(self) -> float:
        self.ticks += 1
        return float(self.ticks)

    def new_id(self) -> str:
        self.ids += 1
        return f"id{self.ids}"


def script() -> ScriptedModel:
    return scripted(
        call("calculator", expression="2*3"),
        call("calculator", expression="4*5"),
        "6 and 20",
    )


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the loop read the system clock or a random id")


async def run_once() -> tuple[list[dict[str, Any]], str, float]:
    with use_clock(FakeClock()):
        result = await Agent(script(), [calculator], limits=Limits(max_seconds=1e9)).run("calc")
    return [event_to_dict(e) for e in result.events], result.run_id, result.usage.cost


async def test_a_run_under_a_fake_clock_never_touches_the_system_clock() -> None:
    # time.monotonic stays: the asyncio event loop itself reads it
    with (
        patch.object(time, "time", refuse),
        patch.object(time, "perf_counter", refuse),
        patch.object(uuid, "uuid4", refuse),
        patch.object(os, "urandom", refuse),
    ):
        events, run_id, _ = await run_once()
    assert run_id == "id1"
    assert events[-1]["type"] == "run_stopped"
    assert events[-1]["reason"] == StopReason.COMPLETED.value


async def test_two_runs_under_the_same_clock_decide_and_record_the_same() -> None:
    assert await run_once() == await run_once()


async def test_elapsed_time_limits_use_the_clock() -> None:
    with use_clock(FakeClock()):
        model = scripted(*(call("calculator", expression=f"{n}") for n in range(50)))
        result = await Agent(model, [calculator], limits=Limits(max_seconds=12)).run("x")
    # each cycle reads the fake monotonic clock a fixed number of times
    assert result.stop_reason is StopReason.BUDGET_EXHAUSTED
    assert "max_seconds=12" in result.stop_detail


LOOP_MODULES = (
    "agent",
    "loop/cycle",
    "loop/executor",
    "loop/trace",
    "stop",
    "events",
    "steering",
    "extensions",
    "state",
    "gate/ask",
    "gate/executive",
    "compaction",
)


def imported_modules(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", LOOP_MODULES)
def test_the_loop_modules_do_not_import_time_uuid_or_random(module: str) -> None:
    source = (Path(convergent.__file__).parent / f"{module}.py").read_text()
    assert not imported_modules(source) & {"time", "uuid", "random"}
