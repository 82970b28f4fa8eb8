"""The counting baseline is the earlier stop rules: counts per run, errors per call."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from convergent.bench._baselines import run_counting
from convergent.bench._tasks import Meta, Task
from convergent.bench._world import World
from convergent.stop import StopReason


def calls(*batch: tuple[str, dict[str, Any]]) -> Meta:
    return {
        "content": "",
        "tool_calls": [
            {"id": f"c{i}", "name": name, "arguments": arguments}
            for i, (name, arguments) in enumerate(batch)
        ],
    }


def task(
    *script: Meta,
    tools: tuple[str, ...] = ("get_weather", "write_file", "lookup_order"),
    failures: dict[str, int] | None = None,
    on_tool_error: str = "continue",
) -> Task:
    return Task(
        id="t-00",
        scenario="sequential",
        prompt="p",
        tools=tools,
        script=script,
        needed=(),
        done_cycle=len(script),
        expected_stop=StopReason.COMPLETED,
        answer="",
        failures=failures or {},
        on_tool_error=on_tool_error,  # type: ignore[arg-type]
    )


OSLO = ("get_weather", {"city": "Oslo"})
WRITE = ("write_file", {"path": "a.txt", "content": "x"})


async def test_the_third_identical_call_anywhere_in_the_run_stalls_it_before_it_runs() -> None:
    world = World()
    script = (calls(OSLO), calls(WRITE), calls(OSLO), calls(WRITE), calls(OSLO), {"content": "ok"})
    end = await run_counting(task(*script), world, 20)
    assert (end.stop, end.cycles, end.output) == ("stalled", 5, "")
    assert world.attempts == ["weather:oslo", "write:a.txt", "weather:oslo", "write:a.txt"]


async def test_three_failed_calls_in_one_batch_stop_the_run() -> None:
    orders = [("lookup_order", {"order_id": f"X-{n}"}) for n in range(3)]
    end = await run_counting(task(calls(*orders), {"content": "ok"}), World(), 20)
    assert (end.stop, end.cycles) == ("tool_error", 1)


async def test_a_success_resets_the_count_and_a_bad_call_does_not_count() -> None:
    bad = ("get_weather", {"town": "Oslo"})
    script = (
        calls(("lookup_order", {"order_id": "X-1"}), ("lookup_order", {"order_id": "X-2"})),
        calls(bad),
        calls(("lookup_order", {"order_id": "A-1001"})),
        calls(("lookup_order", {"order_id": "X-3"}), ("lookup_order", {"order_id": "X-4"})),
        {"content": "done"},
    )
    end = await run_counting(task(*script), World(), 20)
    assert (end.stop, end.cycles, end.output) == ("completed", 5, "done")


async def test_the_stop_policy_ends_at_the_first_failure() -> None:
    script = (calls(OSLO), {"content": "done"})
    failing = task(*script, failures={"weather:oslo": 1}, on_tool_error="stop")
    end = await run_counting(failing, World({"weather:oslo": 1}), 20)
    assert (end.stop, end.cycles) == ("tool_error", 1)


async def test_the_token_budget_is_checked_on_what_was_used() -> None:
    script = tuple(calls(("get_weather", {"city": c})) for c in ("Oslo", "Lima", "Cairo"))
    budgeted = replace(task(*script), max_total_tokens=1)
    end = await run_counting(budgeted, World(), 20)
    assert (end.stop, end.cycles) == ("budget_exhausted", 1)
    assert end.tokens > 1
