"""Scenarios for what a tool declares, and for waiting between polls.

Writes repeated, polls of tools that declare nothing, a CI run polled with sleeps
between:

- ``stuck`` (the run must stop ``stalled``): the same write asked for again and again
  (``repeated_writes``): a voucher issued with a new id each time, a profile updated
  with the same confirmation each time, or a booking that fails the same way each time.
  A stop is justified at the third request: the harm of a write is the repeat itself.
- ``progress`` (the run must not stop before the answer): a deployment polled with a
  tool that declares nothing (``queued``, ``running``, ``running``, ``succeeded``:
  ``undeclared_poll``); a CI run polled with ``gh run view`` and ``sleep 5`` between
  the polls, through a shell tool that declares nothing (``sleep_poll``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from convergent.bench._effect_world import CI_RUNS, DEPLOYMENTS
from convergent.bench._stop_scenarios import looping_script, rule_plan, stuck_task
from convergent.bench._tasks import Scenario, Script, Task, honest_final, honest_mid, script_task
from convergent.bench._world import Call

__all__ = ["EFFECT_BUILDERS", "EFFECT_SCENARIOS", "SLEEP_SECONDS"]

SLEEP_SECONDS = 5
"""Seconds a ``sleep`` between two CI polls takes (less than ``poll_gap``)."""

EFFECT_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "repeated_writes",
        "stuck",
        "the same voucher (new id), profile update or failing booking, again and again",
    ),
    Scenario("undeclared_poll", "progress", "an undeclared status: queued, running x2, done"),
    Scenario("sleep_poll", "progress", "a CI run polled via a shell, sleep 5 between polls"),
)
"""The scenarios of this module, in report order."""

CUSTOMERS = ("C-1042", "C-2291", "C-3310", "C-4477")
FLIGHTS = ("UA 100", "LH 441", "AF 22", "BA 117")


def _repeated_writes(name: str, index: int, rng: random.Random) -> Task:
    customer = rng.choice(CUSTOMERS)
    kind = index % 3
    if kind == 0:
        write = Call(
            "issue_voucher", {"customer": customer, "amount": 200}, f"voucher:{customer}:200"
        )
        prompt = f"Customer {customer} had a delayed flight: issue one $200 voucher."
    elif kind == 1:
        email = f"{customer.lower()}@mail.example"
        write = Call("update_profile", {"user": customer, "email": email}, f"profile:{customer}")
        prompt = f"Change the e-mail address of {customer} to {email}."
    else:
        flight = rng.choice(FLIGHTS)
        write = Call("book_flight", {"flight": flight}, f"book:{flight}")
        prompt = f"Book {write.arguments['flight']} for {customer}."
    plan = rule_plan(prompt, (write.effect,), "", "")
    script = looping_script(rng, (write,))
    return stuck_task(name, index, plan, script, 3, tools=(write.name,), on_tool_error="continue")


def _undeclared_poll(name: str, index: int, rng: random.Random) -> Task:
    deployment = rng.choice(DEPLOYMENTS)
    status = Call("deployment_status", {"deployment": deployment}, f"deploy:{deployment}")
    script = Script()
    for _ in range(4):
        script.calls((status,), honest_mid(rng))
    text = f"{deployment} succeeded."
    script.answer(text, honest_final(rng))
    prompt = f"Check {deployment} with deployment_status until it has succeeded."
    plan = rule_plan(prompt, (status.effect,) * 4, "succeeded", text)
    return script_task(name, index, plan, script, tools=("deployment_status",))


def _sleep_poll(name: str, index: int, rng: random.Random) -> Task:
    run = rng.choice(sorted(CI_RUNS))
    view = Call("shell", {"command": f"gh run view {run}"}, f"ci:{run}")
    sleep = Call("shell", {"command": f"sleep {SLEEP_SECONDS}"}, "sleep")
    polls = math.ceil(CI_RUNS[run] / SLEEP_SECONDS)
    script = Script()
    script.calls((view,), honest_mid(rng))
    for _ in range(polls):
        script.calls((sleep,), honest_mid(rng))
        script.calls((view,), honest_mid(rng))
    text = f"CI run {run} completed: success."
    script.answer(text, honest_final(rng))
    prompt = f"Wait for CI run {run} to finish (poll it every {SLEEP_SECONDS} s) and report."
    plan = rule_plan(prompt, (view.effect,) * (polls + 1), "success", text)
    return script_task(name, index, plan, script, tools=("shell",), request_seconds=1)


EFFECT_BUILDERS: dict[str, Callable[[str, int, random.Random], Task]] = {
    "repeated_writes": _repeated_writes,
    "undeclared_poll": _undeclared_poll,
    "sleep_poll": _sleep_poll,
}
"""How each scenario of this module builds a task."""
