"""Scenarios for budgets a task needs more of than it has: cost, and tool-call caps.

Each is of kind ``budget``: the run must stop ``budget_exhausted`` without spending past
the budget, after the model was told what was left, and (unless the task turns it
off) with an answer after the stop.

- ``cost_limit``: 12 reports of about 24,000 characters each, read one per response, at
  a frontier model's price, with ``max_cost=1.0``: the whole task costs more (US$ 1.2 to
  2.4); ``cost_limit_no_final_answer``: the same without the answer after the stop;
- ``max_tool_calls``: 9 or 12 lookups in batches of 3, with ``max_tool_calls`` 5 to 7;
- ``max_calls_per_tool``: ``get_weather`` for 5 or 6 cities, with
  ``max_calls_per_tool=3``;
- ``provider_growth``: ``get_weather`` for 12 cities, one per response, with short
  results, while the provider counts 4,000 more input tokens at each request than the
  text shows, with ``max_total_tokens=80,000``.

And one of kind ``progress`` (the run must complete, within its caps): ``caps_continue``,
weather, an order and a rate asked two calls at a time with ``get_weather`` capped at 2
calls whose policy is ``continue``: the weather calls past the cap are refused, the
others of their batches run, and the model answers from what it has.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from convergent.bench._tasks import (
    Scenario,
    Script,
    Task,
    honest_final,
    honest_mid,
    honest_script,
    script_task,
)
from convergent.bench._world import ORDERS, RATES, REPORTS, WEATHER, Call, Plan
from convergent.stop import StopReason

__all__ = ["BUDGET_BUILDERS", "BUDGET_SCENARIOS", "MAX_COST"]

MAX_COST = 1.0
"""The cost budget of the cost scenarios."""
PRICES = ((3.0, 15.0), (2.5, 10.0), (5.0, 25.0))
"""Prices of frontier models, in US dollars per million input and output tokens."""

BUDGET_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("cost_limit", "budget", "reads 12 long reports; max_cost=1.0 holds fewer"),
    Scenario("cost_limit_no_final_answer", "budget", "the same, no answer after the stop"),
    Scenario("max_tool_calls", "budget", "needs 9-12 calls in batches of 3; max_tool_calls 5-7"),
    Scenario("max_calls_per_tool", "budget", "needs get_weather 5-6 times; max_calls_per_tool=3"),
    Scenario(
        "provider_growth",
        "budget",
        "short reads; the provider counts 4,000 input tokens more each cycle; 80,000 in all",
    ),
    Scenario(
        "caps_continue",
        "progress",
        "weather, an order, a rate in pairs; get_weather capped at 2, the cap refuses and goes on",
    ),
)
"""The scenarios of this module, in report order."""


def _weather_plan(cities: list[str], per_response: int = 1) -> Plan:
    """Find the warmest of ``cities`` with ``get_weather``, ``per_response`` calls at a time."""
    names = [city.title() for city in cities]
    calls = tuple(Call("get_weather", {"city": c}, f"weather:{c.casefold()}") for c in names)
    batches = tuple(calls[at : at + per_response] for at in range(0, len(calls), per_response))
    warmest = max(names, key=lambda c: WEATHER[c.casefold()])
    pace = "one city at a time" if per_response == 1 else f"{per_response} cities at a time"
    prompt = f"Use get_weather, {pace}, to find the warmest of {', '.join(names)}."
    text = f"{warmest} is the warmest at {WEATHER[warmest.casefold()]} °C."
    effects = tuple(call.effect for call in calls)
    return Plan("weather", prompt, batches, effects, warmest, text)


def _budget(name: str, index: int, plan: Plan, script: Script, **extra: object) -> Task:
    return script_task(
        name,
        index,
        plan,
        script,
        expected_stop=StopReason.BUDGET_EXHAUSTED,
        **extra,
    )


def _cost_limit(name: str, index: int, rng: random.Random) -> Task:
    regions = rng.sample(sorted(REPORTS), len(REPORTS))
    calls = tuple(Call("read_report", {"region": r}, f"report:{r}") for r in regions)
    best = max(regions, key=REPORTS.__getitem__)
    prompt = f"Read the sales reports of {', '.join(regions)} with read_report, one at a time: "
    prompt += "which region sold most?"
    text = f"The {best} region sold most: {REPORTS[best]} kEUR."
    effects = tuple(call.effect for call in calls)
    plan = Plan("reports", prompt, tuple((call,) for call in calls), effects, best, text)
    return _budget(
        name,
        index,
        plan,
        honest_script(plan, rng),
        tools=("read_report",),
        max_cost=MAX_COST,
        price=rng.choice(PRICES),
        final_answer=name == "cost_limit",
    )


def _max_tool_calls(name: str, index: int, rng: random.Random) -> Task:
    plan = _weather_plan(rng.sample(sorted(WEATHER), 3 * rng.choice((3, 4))), 3)
    return _budget(name, index, plan, honest_script(plan, rng), max_tool_calls=rng.randint(5, 7))


def _max_calls_per_tool(name: str, index: int, rng: random.Random) -> Task:
    plan = _weather_plan(rng.sample(sorted(WEATHER), rng.randint(5, 6)))
    return _budget(name, index, plan, honest_script(plan, rng), max_calls_per_tool=3)


def _provider_growth(name: str, index: int, rng: random.Random) -> Task:
    plan = _weather_plan(rng.sample(sorted(WEATHER), 12))
    script = honest_script(plan, rng)
    return _budget(name, index, plan, script, max_total_tokens=80_000, hidden_growth=4000)


def _caps_continue(name: str, index: int, rng: random.Random) -> Task:
    cities = [city.title() for city in rng.sample(sorted(WEATHER), 4)]
    order = rng.choice(sorted(ORDERS))
    base, target = rng.choice(sorted(RATES))
    weather = [Call("get_weather", {"city": c}, f"weather:{c.casefold()}") for c in cities]
    lookup = Call("lookup_order", {"order_id": order}, f"order:{order.casefold()}")
    rate = Call("exchange_rate", {"base": base, "target": target}, f"rate:{base}-{target}".lower())
    script = Script()
    script.calls(weather[:2], honest_mid(rng))
    script.calls((weather[2], lookup), honest_mid(rng))
    script.calls((weather[3], rate), honest_mid(rng))
    warmer = max(cities[:2], key=lambda c: WEATHER[c.casefold()])
    text = (
        f"Of the cities I could check, {warmer} is warmer; order {order} is "
        f"{ORDERS[order][0]}; 1 {base} = {RATES[(base, target)]} {target}."
    )
    script.answer(text, honest_final(rng))
    prompt = (
        f"Which of {', '.join(cities)} is warmest (get_weather), what is the status of order "
        f"{order}, and the {base}/{target} rate? Two calls at a time."
    )
    needed = (weather[0].effect, weather[1].effect, lookup.effect, rate.effect)
    plan = Plan("caps", prompt, (), needed, warmer, text)
    return script_task(
        name,
        index,
        plan,
        script,
        max_calls_per_tool=2,
        on_max_calls_per_tool="continue",
    )


BUDGET_BUILDERS: dict[str, Callable[[str, int, random.Random], Task]] = {
    "cost_limit": _cost_limit,
    "cost_limit_no_final_answer": _cost_limit,
    "max_tool_calls": _max_tool_calls,
    "max_calls_per_tool": _max_calls_per_tool,
    "provider_growth": _provider_growth,
    "caps_continue": _caps_continue,
}
"""How each scenario of this module builds a task."""
