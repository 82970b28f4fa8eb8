"""Scenarios for repeats judged by what they mean: volatile text, time, cycles, messages.

- ``stuck`` (the run must stop ``stalled``): a status call whose result differs only in
  its clock time (``running (as of 12:00:NN)``); a clock read (``get_current_time``,
  answered as the MCP time server does, its tool unannotated) over and over; cycles of
  2 to 5 calls of unannotated tools whose results do not change; the same payment asked
  for again while the user's harness sends the task again after every step (AgentDojo's
  repeated prompt).
- ``progress`` (the run must not stop before the answer): an export polled until it is
  done, its status the same text each time: each poll taking 30 s, the same with the
  poll's tool unannotated, and instant polls with ``wait(30)`` (declared
  state-changing) between them; ``cd("..")`` twice, each answered ``{}``; the same
  read twice before and twice after a new instruction from the user.
"""

from __future__ import annotations

import posixpath
import random
from collections.abc import Callable

from convergent.bench._stop_scenarios import (
    STUCK_SCRIPT_LENGTH,
    cycle_plan,
    looping_script,
    payment_loop,
    rule_plan,
    stuck_task,
)
from convergent.bench._tasks import (
    Scenario,
    Script,
    Task,
    honest_final,
    honest_mid,
    script_task,
)
from convergent.bench._world import (
    DEEP_PATHS,
    DIRECTORIES,
    DOCS,
    EXPORTS,
    FILES,
    ORDERS,
    RATES,
    WEATHER,
    Call,
)

__all__ = ["POLL_SECONDS", "STALL_BUILDERS", "STALL_SCENARIOS"]

POLL_SECONDS = 30
"""Seconds a slow poll takes, or a wait between two polls (more than ``poll_gap``)."""

STALL_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("timestamped_status", "stuck", "the same status call; only its clock time changes"),
    Scenario("current_time_loop", "stuck", "reads the time (MCP time server) again and again"),
    Scenario("slow_poll", "progress", "polls an export running 3-6 times; each poll takes 30 s"),
    Scenario("slow_poll_unannotated", "progress", "the same; the poll's tool is unannotated"),
    Scenario("slow_poll_with_wait", "progress", "instant polls; wait(30) (state-changing) between"),
    Scenario("cycle_of_2", "stuck", "2 unannotated calls in a cycle, the same results"),
    Scenario("cycle_of_3", "stuck", "3 unannotated calls in a cycle, the same results"),
    Scenario("cycle_of_4", "stuck", "4 unannotated calls in a cycle, the same results"),
    Scenario("cycle_of_5", "stuck", "5 unannotated calls in a cycle, the same results"),
    Scenario("cd_up_twice", "progress", 'cd("..") twice (a write), each answered {}'),
    Scenario("repeated_user_prompt", "stuck", "pays again; the task is sent again after each step"),
    Scenario("new_instruction", "progress", "the same read twice, a new instruction, twice again"),
)
"""The scenarios of this module, in report order."""

SERVICES = ("checkout", "search", "billing", "auth", "payments", "inventory")
TIMEZONES = ("Europe/Paris", "America/New_York", "Asia/Tokyo", "Europe/Oslo", "UTC")


def _timestamped_status(name: str, index: int, rng: random.Random) -> Task:
    service = rng.choice(SERVICES)
    status = Call("service_status", {"service": service}, f"service:{service}")
    script = looping_script(rng, (status,))
    plan = rule_plan(f"Is {service} up? Check it with service_status.", (status.effect,), "", "")
    return stuck_task(name, index, plan, script, 3, tools=("service_status",), request_seconds=2)


def _current_time_loop(name: str, index: int, rng: random.Random) -> Task:
    zone = rng.choice(TIMEZONES)
    read = Call("get_current_time", {"timezone": zone}, f"time:{zone}")
    script = looping_script(rng, (read,))
    plan = rule_plan(f"What time is it in {zone}? Use get_current_time.", (read.effect,), "", "")
    return stuck_task(
        name,
        index,
        plan,
        script,
        3,
        tools=("get_current_time",),
        declared={"get_current_time": None},
        request_seconds=3,
    )


def _slow_poll(name: str, index: int, rng: random.Random) -> Task:
    export = rng.choice(sorted(EXPORTS))
    polls = EXPORTS[export] + 1
    status = Call("export_status", {"export": export}, f"export:{export}")
    wait = Call("wait", {"seconds": POLL_SECONDS}, "wait")
    waits = name == "slow_poll_with_wait"
    script = Script()
    for poll in range(polls):
        if poll and waits:
            script.calls((wait,), honest_mid(rng))
        script.calls((status,), honest_mid(rng))
    text = f"The {export} export is done; its file is exports/{export}.csv."
    script.answer(text, honest_final(rng))
    pacing = f" Wait {POLL_SECONDS} seconds between two checks." if waits else ""
    prompt = f"Check the {export} export with export_status until it is done.{pacing}"
    plan = rule_plan(prompt, (status.effect,) * polls, f"exports/{export}.csv", text)
    tools = ("export_status", "wait") if waits else ("export_status",)
    return script_task(
        name,
        index,
        plan,
        script,
        tools=tools,
        declared={"export_status": None} if name == "slow_poll_unannotated" else {},
        tool_seconds={} if waits else {"export_status": POLL_SECONDS},
    )


def _reads(rng: random.Random, count: int) -> list[Call]:
    """``count`` reads of different tools, each with arguments drawn at random."""
    city = rng.choice(sorted(WEATHER))
    order = rng.choice(sorted(ORDERS))
    topic = rng.choice(sorted(DOCS))
    base, target = rng.choice(sorted(RATES))
    file = rng.choice(sorted(FILES))
    pool = [
        Call("get_weather", {"city": city.title()}, f"weather:{city}"),
        Call("lookup_order", {"order_id": order}, f"order:{order.casefold()}"),
        Call("search_docs", {"query": f"{topic} policy"}, f"docs:{topic}"),
        Call("exchange_rate", {"base": base, "target": target}, f"rate:{base}-{target}".lower()),
        Call("read_file", {"path": file}, f"read:{file}"),
    ]
    return rng.sample(pool, count)


def _cycle(name: str, index: int, rng: random.Random) -> Task:
    period = int(name.removeprefix("cycle_of_"))
    reads = _reads(rng, period)
    script = looping_script(rng, reads)
    plan = cycle_plan(reads)
    # tools as most are written: not saying whether they only read
    unannotated = dict.fromkeys((r.name for r in reads), None)
    return stuck_task(name, index, plan, script, 2 * period + 1, declared=unannotated)


def _cd_up_twice(name: str, index: int, rng: random.Random) -> Task:
    start = rng.choice(DEEP_PATHS)
    up = Call("cd", {"path": ".."}, "")
    script = Script()
    script.calls((Call("cd", {"path": start}, f"cd:{start}"),), honest_mid(rng))
    needed = [f"cd:{start}"]
    here = start
    for _ in range(2):
        here = posixpath.dirname(here)
        needed.append(f"cd:{here}")
        script.calls((up,), honest_mid(rng))
    script.calls((Call("ls", {}, f"ls:{here}"),), honest_mid(rng))
    needed.append(f"ls:{here}")
    text = f"Two levels above {start} is {here}: {', '.join(DIRECTORIES[here])}."
    script.answer(text, honest_final(rng))
    prompt = (
        f"Go to {start} with cd, then up two levels with cd('..'), one level at a time, "
        f"and tell me what ls shows there."
    )
    plan = rule_plan(prompt, tuple(needed), here, text)
    return script_task(name, index, plan, script, tools=("cd", "ls"))


def _repeated_user_prompt(name: str, index: int, rng: random.Random) -> Task:
    prompt, script, plan = payment_loop(rng)
    return stuck_task(
        name,
        index,
        plan,
        script,
        3,
        tools=("pay", "lookup_order"),
        messages=(prompt,) * STUCK_SCRIPT_LENGTH,
    )


def _new_instruction(name: str, index: int, rng: random.Random) -> Task:
    city = rng.choice(sorted(WEATHER))
    read = Call("get_weather", {"city": city.title()}, f"weather:{city}")
    script = Script()
    for _ in range(4):
        script.calls((read,), honest_mid(rng))
    text = f"It is {WEATHER[city]} °C in {city.title()}."
    script.answer(text, honest_final(rng))
    prompt = f"What is the temperature in {city.title()}? Check it twice with get_weather."
    update = f"The weather service was just restarted: check {city.title()} twice more."
    plan = rule_plan(prompt, (read.effect,) * 4, f"{WEATHER[city]} °C", text)
    return script_task(
        name,
        index,
        plan,
        script,
        tools=("get_weather",),
        messages=("", update),
    )


STALL_BUILDERS: dict[str, Callable[[str, int, random.Random], Task]] = {
    "timestamped_status": _timestamped_status,
    "current_time_loop": _current_time_loop,
    "slow_poll": _slow_poll,
    "slow_poll_unannotated": _slow_poll,
    "slow_poll_with_wait": _slow_poll,
    "cycle_of_2": _cycle,
    "cycle_of_3": _cycle,
    "cycle_of_4": _cycle,
    "cycle_of_5": _cycle,
    "cd_up_twice": _cd_up_twice,
    "repeated_user_prompt": _repeated_user_prompt,
    "new_instruction": _new_instruction,
}
"""How each scenario of this module builds a task."""
