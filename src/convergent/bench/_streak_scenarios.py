"""Scenarios for the streaks of non-progress and for replies that are not answers.

- ``stuck`` (the run must stop, a note first, with the streak's reason): failing steps
  whose arguments and errors differ each time (``tool_error``); a tool the run does
  not have, a new name each step; arguments that do not validate, different each
  step; answers the check rejects; answers that never match the output schema (each
  ``stalled``); empty replies, and replies cut at the output token limit, that never
  become an answer (``model_error``, with the best text the replies gave).
- ``progress`` (the run must not stop before the answer): a garbled tool name
  (``get_weather<|channel|>commentary``, as open models emit it) three times (the
  note comes with the third), then the right call; the same error text for four
  different amounts, then one that fits (as BFCL's ``fillFuelTank``); an empty reply
  or two before the answer; an answer cut at the token limit once or twice, then
  completed (the output is the parts joined); 6 to 10 patches in a row that the linter
  refuses, each a new one, then one it accepts (a coding agent searching for a valid
  edit); 4 to 10 searches in a row for symbols the code base does not have, then one it
  has (a search phase).
- ``one_note``: the same failing call again and again, with
  ``max_repeated_failures=2``: one note, whichever rule sees the stretch first, then the
  stop (``tool_error``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from convergent.bench._effect_world import FIXES, SYMBOLS
from convergent.bench._stop_scenarios import (
    STUCK_SCRIPT_LENGTH,
    looping_script,
    rule_plan,
    stuck_task,
)
from convergent.bench._tasks import (
    Scenario,
    Script,
    Task,
    honest_final,
    honest_mid,
    honest_script,
    script_task,
)
from convergent.bench._world import (
    FUEL_LEVEL,
    ORDERS,
    TANK_CAPACITY,
    WEATHER,
    Call,
    Plan,
    dependent_plan,
    format_number,
)
from convergent.stop import StopReason

__all__ = ["STREAK_BUILDERS", "STREAK_SCENARIOS"]

STREAK_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("failing_steps", "stuck", "a new wrong order id each step; each error differs"),
    Scenario("unknown_tools", "stuck", "calls a tool the run does not have, a new name each step"),
    Scenario("malformed_arguments", "stuck", "new wrong argument names each step"),
    Scenario(
        "rejected_answers", "stuck", "answers wrongly again and again; the check rejects each"
    ),
    Scenario("schema_never_met", "stuck", "answers in prose where a JSON object is required"),
    Scenario("empty_forever", "stuck", "replies empty, again and again"),
    Scenario("cut_forever", "stuck", "its reply is cut at the token limit, again and again"),
    Scenario("garbled_tool_names", "progress", "a garbled tool name 3 times, then the right one"),
    Scenario(
        "same_error_new_arguments", "progress", "4 amounts fail with one error, then one fits"
    ),
    Scenario("empty_reply", "progress", "replies empty once or twice, then answers"),
    Scenario("cut_reply", "progress", "its answer is cut at the token limit 1-2 times, then ends"),
    Scenario(
        "lint_refused_edits", "progress", "6-10 patches the linter refuses, each new; then one fits"
    ),
    Scenario(
        "failing_search_phase", "progress", "4-10 searches for symbols that do not exist; then one"
    ),
    Scenario("one_note", "stuck", "the same failing call; max_repeated_failures=2: one note"),
)
"""The scenarios of this module, in report order."""

GARBLED_STEPS = 3
"""Garbled calls before the right one: as many as the default ``max_mistakes``, so the
note comes with the last of them."""

UNKNOWN_TOOLS = (
    "find_order",
    "order_lookup",
    "get_order",
    "search_orders",
    "fetch_order",
    "lookupOrder",
    "order_status",
    "query_orders",
    "get_order_details",
    "retrieve_order",
    "track_order",
    "orders_get",
    "check_order",
    "read_order",
    "order_info",
    "describe_order",
    "show_order",
    "getOrderStatus",
    "lookup_orders",
    "order_details",
    "find_orders",
    "get_orders",
    "inspect_order",
    "order_search",
)
"""Names a model invents for a tool the run does not have."""
WRONG_KEYS = ("town", "location", "place", "name", "q", "city_name", "where", "query")
"""Argument names ``get_weather`` does not take (it takes ``city``)."""
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
"""What ``schema_never_met`` asks for."""
CHANNELS = ("commentary", "analysis", "final")


def _streak(name: str, index: int, plan: Plan, script: Script, **extra: Any) -> Task:
    """A stuck model's streak: a stop is justified at its third step."""
    return stuck_task(name, index, plan, script, 3, **extra)


def _failing_steps(name: str, index: int, rng: random.Random) -> Task:
    real = rng.choice(sorted(ORDERS))
    ids = [f"A-{2000 + n}" for n in rng.sample(range(1, 100), STUCK_SCRIPT_LENGTH)]
    script = Script()
    for order in ids:  # the model garbles the id, each time otherwise
        script.calls((Call("lookup_order", {"order_id": order}, ""),), honest_mid(rng))
    effect = f"order:{real.casefold()}"
    plan = rule_plan(f"What is the status of order {real}? Use lookup_order.", (effect,), "", "")
    return _streak(
        name, index, plan, script, expected_stop=StopReason.TOOL_ERROR, on_tool_error="continue"
    )


def _unknown_tools(name: str, index: int, rng: random.Random) -> Task:
    names = rng.sample(UNKNOWN_TOOLS, STUCK_SCRIPT_LENGTH)
    order = rng.choice(sorted(ORDERS))
    script = Script()
    for tool in names:
        script.bad_call(tool, {"order_id": order}, honest_mid(rng))
    effect = f"order:{order.casefold()}"
    plan = rule_plan(f"What is the status of order {order}?", (effect,), "", "")
    return _streak(name, index, plan, script)


def _malformed_arguments(name: str, index: int, rng: random.Random) -> Task:
    city = rng.choice(sorted(WEATHER))
    title = city.title()
    spellings = (title, title.upper(), f"{title}, today")
    variants = [{key: spelling} for key in WRONG_KEYS for spelling in spellings]
    rng.shuffle(variants)
    script = Script()
    for arguments in variants[:STUCK_SCRIPT_LENGTH]:
        script.bad_call("get_weather", arguments, honest_mid(rng))
    prompt = f"What is the weather in {title}? Use get_weather."
    plan = rule_plan(prompt, (f"weather:{city}",), "", "")
    return _streak(name, index, plan, script)


def _answers(name: str, index: int, rng: random.Random) -> Task:
    """The model reads the temperature, then answers without ever satisfying the check."""
    city = rng.choice(sorted(WEATHER))
    read = Call("get_weather", {"city": city.title()}, f"weather:{city}")
    script = Script()
    script.calls((read,), honest_mid(rng))
    schema = name == "schema_never_met"
    for attempt in range(STUCK_SCRIPT_LENGTH - 1):
        if schema:  # the right figure, never the JSON asked for
            text = f"It is {WEATHER[city]} °C in {city.title()} (reply {attempt + 1})."
        else:  # a wrong figure, each time another, never the one the check looks for
            text = f"It is about {WEATHER[city] + 40 + attempt} degrees in {city.title()}."
        script.answer(text, honest_final(rng))
    ask = " Reply with JSON: city and celsius." if schema else ""
    prompt = f"What is the temperature in {city.title()}? Use get_weather.{ask}"
    plan = rule_plan(prompt, (read.effect,), f"{WEATHER[city]} °C", "")
    return stuck_task(
        name,
        index,
        plan,
        script,
        4,
        verified=not schema,
        output_schema=OUTPUT_SCHEMA if schema else None,
    )


def _garbled_tool_names(name: str, index: int, rng: random.Random) -> Task:
    plan = dependent_plan(rng, 1)
    call = plan.calls[0]
    garbled = f"{call.name}<|channel|>{rng.choice(CHANNELS)}"
    script = Script()
    for _ in range(GARBLED_STEPS):
        script.bad_call(garbled, dict(call.arguments), honest_mid(rng))
    script.calls((call,), honest_mid(rng))
    script.answer(plan.answer_text, honest_final(rng))
    return script_task(name, index, plan, script)


def _same_error_new_arguments(name: str, index: int, rng: random.Random) -> Task:
    room = TANK_CAPACITY - FUEL_LEVEL
    too_much = sorted(rng.sample(range(int(room) + 1, int(room) + 30), 4), reverse=True)
    fits = rng.randint(int(room) - 15, int(room))
    script = Script()
    for liters in too_much:
        script.calls((Call("fill_fuel_tank", {"liters": liters}, ""),), honest_mid(rng))
    script.calls(
        (Call("fill_fuel_tank", {"liters": fits}, f"fuel:{fits}"),),
        honest_mid(rng),
        "That did not fit either; trying less.",
    )
    total = format_number(FUEL_LEVEL + fits)
    text = f"Done: the tank holds {total} litres now."
    script.answer(text, honest_final(rng))
    prompt = (
        f"Fill the car's tank with fill_fuel_tank. It holds {format_number(TANK_CAPACITY)} "
        "litres; I do not know how much is in it."
    )
    plan = rule_plan(prompt, (f"fuel:{fits}",), f"{total} litres", text)
    return script_task(
        name,
        index,
        plan,
        script,
        tools=("fill_fuel_tank",),
        on_tool_error="continue",
    )


def _cuts(text: str, token: str, parts: int, rng: random.Random) -> list[str]:
    """``text`` in ``parts`` pieces, the first cut inside ``token`` (if it is in the text)."""
    at = text.find(token)
    first = at + max(1, len(token) // 2) if at >= 0 and len(token) > 1 else len(text) // 2
    cuts = [first, *sorted(rng.sample(range(first + 1, len(text)), parts - 2))]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _unfinished(name: str, index: int, rng: random.Random) -> Task:
    """Replies that are not answers before the answer (or instead of it)."""
    plan = dependent_plan(rng, rng.randint(1, 3))
    script = honest_script(plan, rng, answer=False)
    calls = len(script.items)
    if name == "empty_reply":
        for _ in range(rng.randint(1, 2)):
            script.answer("", honest_mid(rng))
        script.answer(plan.answer_text, honest_final(rng))
        return script_task(name, index, plan, script)
    if name == "cut_reply":
        pieces = _cuts(plan.answer_text, plan.answer, rng.randint(2, 3), rng)
        for piece in pieces[:-1]:
            script.answer(piece, honest_mid(rng), finish_reason="length")
        script.answer(pieces[-1], honest_final(rng))
        return script_task(name, index, plan, script)
    # the answer's token is cut in two: the best text holds it only if the parts are joined
    pieces = _cuts(plan.answer_text, plan.answer, 2, rng)
    for part in range(STUCK_SCRIPT_LENGTH - calls):
        if name == "empty_forever":
            script.answer("", honest_mid(rng))
        else:
            text = pieces[part] if part < len(pieces) else f" More on that, part {part + 1}:"
            script.answer(text, honest_mid(rng), finish_reason="length")
    # a stop is justified when a reply is still no answer after the model was asked twice
    return stuck_task(name, index, plan, script, calls + 3, expected_stop=StopReason.MODEL_ERROR)


WRONG_PATCHES = (
    "add a null check",
    "inline the helper",
    "rename the loop variable",
    "catch the ValueError",
    "return early on None",
    "cast the index to int",
    "split the long condition",
    "move the import up",
    "use a list comprehension",
    "drop the default argument",
)
"""Patches a coding agent tries that the linter refuses (each is new)."""
WRONG_SYMBOLS = (
    "tokenize",
    "Parser",
    "parse_input",
    "TokenList",
    "lex",
    "read_tokens",
    "ParseError",
    "split_tokens",
    "scan",
    "Lexer",
)
"""Symbols a search phase looks for that the code base does not define."""


def _lint_refused_edits(name: str, index: int, rng: random.Random) -> Task:
    path = rng.choice(sorted(FIXES))
    suite = path.removeprefix("src/").removesuffix(".py")
    refused = rng.sample(WRONG_PATCHES, 6 + index % 5)
    script = Script()
    for patch in refused:
        script.calls((Call("apply_patch", {"path": path, "patch": patch}, ""),), honest_mid(rng))
    fix = Call("apply_patch", {"path": path, "patch": FIXES[path]}, f"patch:{path}")
    tests = Call("run_tests", {"suite": suite}, f"tests:{suite}")
    script.calls((fix,), honest_mid(rng))
    script.calls((tests,), honest_mid(rng))
    text = f"The {suite} tests pass now."
    script.answer(text, honest_final(rng))
    prompt = f"The {suite} tests fail: fix {path} with apply_patch, then run run_tests."
    plan = rule_plan(prompt, (fix.effect, tests.effect), "pass now", text)
    return script_task(
        name, index, plan, script, tools=("apply_patch", "run_tests"), on_tool_error="continue"
    )


def _failing_search_phase(name: str, index: int, rng: random.Random) -> Task:
    symbol = rng.choice(sorted(SYMBOLS))
    misses = rng.sample(WRONG_SYMBOLS, 4 + index % 7)
    script = Script()
    for missing in misses:
        script.calls((Call("search_code", {"symbol": missing}, ""),), honest_mid(rng))
    found = Call("search_code", {"symbol": symbol}, f"search:{symbol}")
    script.calls((found,), honest_mid(rng))
    text = f"The code is in {SYMBOLS[symbol]}."
    script.answer(text, honest_final(rng))
    prompt = "Which file defines the function that splits the input into tokens?"
    plan = rule_plan(prompt, (found.effect,), SYMBOLS[symbol], text)
    return script_task(name, index, plan, script, tools=("search_code",), on_tool_error="continue")


def _one_note(name: str, index: int, rng: random.Random) -> Task:
    command = rng.choice(("make deploy", "kubectl rollout status web", "terraform apply"))
    failing = Call("shell", {"command": command}, "shell")
    plan = rule_plan(f"Run `{command}` and tell me how it went.", (failing.effect,), "", "")
    script = looping_script(rng, (failing,))
    return stuck_task(
        name,
        index,
        plan,
        script,
        2,
        tools=("shell",),
        expected_stop=StopReason.TOOL_ERROR,
        on_tool_error="continue",
        policy={"max_repeated_failures": 2},
    )


STREAK_BUILDERS: dict[str, Callable[[str, int, random.Random], Task]] = {
    "failing_steps": _failing_steps,
    "unknown_tools": _unknown_tools,
    "malformed_arguments": _malformed_arguments,
    "rejected_answers": _answers,
    "schema_never_met": _answers,
    "empty_forever": _unfinished,
    "cut_forever": _unfinished,
    "garbled_tool_names": _garbled_tool_names,
    "same_error_new_arguments": _same_error_new_arguments,
    "empty_reply": _unfinished,
    "cut_reply": _unfinished,
    "lint_refused_edits": _lint_refused_edits,
    "failing_search_phase": _failing_search_phase,
    "one_note": _one_note,
}
"""How each scenario of this module builds a task."""
