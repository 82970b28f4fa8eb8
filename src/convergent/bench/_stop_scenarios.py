"""Scenarios for the stop rules: repeats that are progress, repeats that are loops, budgets.

- ``progress``: the model repeats a call while the world changes, or fails while it
  searches, and then answers; a stop before its answer is a false stop. Running the
  tests after each edit, polling a job (with or without a wait between polls), listing
  the files after each deletion, a batch of lookups with different arguments that all
  fail, and reading the same thing three times before answering.
- ``stuck``: the model repeats itself while nothing changes, or a tool is broken; the
  run must stop. Two or three reads in a cycle (A-B-A-B), the same payment sent again
  (confirmed with the same text, or with a new transaction id each time), and a tool
  that fails the same way whatever the arguments.
- ``budget``: the task needs more tokens than its budget; the run must stop within it,
  and should still answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from convergent.bench._tasks import (
    Scenario,
    Script,
    Task,
    honest_final,
    honest_mid,
    honest_script,
    make_task,
    script_task,
)
from convergent.bench._world import (
    BUGGY_SUITES,
    DOCS,
    FILES,
    JOBS,
    ORDERS,
    PAYEES,
    WEATHER,
    Call,
    Plan,
    dependent_plan,
    format_number,
)
from convergent.stop import StopReason

__all__ = [
    "STOP_BUILDERS",
    "STOP_SCENARIOS",
    "STUCK_SCRIPT_LENGTH",
    "cycle_plan",
    "looping_script",
    "payment_loop",
    "rule_plan",
    "stuck_task",
]

STUCK_SCRIPT_LENGTH = 24
"""Responses a stuck model's script holds (more than any policy's cycle limit here)."""

STOP_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("edit_then_test", "progress", "runs the tests after each edit; fewer fail each time"),
    Scenario("polling", "progress", "polls a job's status until it is done; the status changes"),
    Scenario("polling_with_wait", "progress", "polls a job with the same wait call between polls"),
    Scenario("verify_after_write", "progress", "lists the files after each deletion"),
    Scenario("parallel_failures", "progress", "one batch of 3-4 lookups fails, each differently"),
    Scenario("answer_after_third_read", "progress", "reads the same thing 3 times, then answers"),
    Scenario("abab_loop", "stuck", "2 or 3 reads in a cycle, the same results, forever"),
    Scenario("repeated_payment", "stuck", "sends the same payment again; the same confirmation"),
    Scenario("repeated_payment_new_ids", "stuck", "sends the same payment again; a new receipt id"),
    Scenario("broken_tool", "stuck", "a tool fails the same way whatever the arguments"),
    Scenario("hits_budget", "budget", "needs 6 calls; the token budget holds fewer"),
)
"""The stop-rule scenarios, in report order."""

PROGRESS_TOOLS = ("edit_file", "run_tests", "list_files", "delete_file", "job_status", "wait")


def rule_plan(prompt: str, needed: tuple[str, ...], answer: str, text: str) -> Plan:
    """The plan of a stop-rule task: its prompt, needed effects and answer (no batches)."""
    return Plan("stop rules", prompt, (), needed, answer, text)


def _edit_then_test(name: str, index: int, rng: random.Random) -> Task:
    suite = rng.choice(sorted(BUGGY_SUITES))
    tests, failing = BUGGY_SUITES[suite]
    path = f"src/{suite}.py"
    run = Call("run_tests", {"suite": suite}, f"tests:{suite}")
    script = Script()
    script.calls((run,), honest_mid(rng))
    for fix in range(1, failing + 1):
        change = f"fix failing case {fix}"
        script.calls((Call("edit_file", {"path": path, "change": change}, ""),), honest_mid(rng))
        script.calls((run,), honest_mid(rng))
    text = f"All {tests} tests of {suite} pass now."
    needed = (run.effect,) * (failing + 1) + (f"edit:{suite}",) * failing
    prompt = (
        f"The {suite} tests fail. Fix {path} with edit_file, one failing case at a time, "
        f"and run run_tests after each edit until they all pass."
    )
    script.answer(text, honest_final(rng))
    plan = rule_plan(prompt, needed, f"All {tests} tests", text)
    return script_task(name, index, plan, script, tools=PROGRESS_TOOLS)


def _polling(name: str, index: int, rng: random.Random) -> Task:
    job = rng.choice(sorted(JOBS))
    polls = JOBS[job]
    status = Call("job_status", {"job": job}, f"job:{job}")
    wait = Call("wait", {"seconds": 10}, "wait")
    script = Script()
    for poll in range(polls):
        if poll and name == "polling_with_wait":
            script.calls((wait,), honest_mid(rng))
        script.calls((status,), honest_mid(rng))
    text = f"{job} is done; its results are in reports/{job}.csv."
    script.answer(text, honest_final(rng))
    pacing = " Wait 10 seconds between two requests." if name == "polling_with_wait" else ""
    prompt = f"Start nothing: check job {job} with job_status until it is done.{pacing}"
    plan = rule_plan(prompt, (status.effect,) * polls, f"reports/{job}.csv", text)
    return script_task(name, index, plan, script, tools=PROGRESS_TOOLS)


def _verify_after_write(name: str, index: int, rng: random.Random) -> Task:
    doomed = rng.sample(sorted(FILES), rng.randint(2, 3))
    left = sorted(set(FILES) - set(doomed))
    listing = Call("list_files", {}, "list")
    script = Script()
    script.calls((listing,), honest_mid(rng))
    for file in doomed:
        script.calls((Call("delete_file", {"path": file}, f"delete:{file}"),), honest_mid(rng))
        script.calls((listing,), honest_mid(rng))
    text = f"Deleted {', '.join(doomed)}; left: {', '.join(left)}."
    script.answer(text, honest_final(rng))
    prompt = (
        f"Delete {', '.join(doomed)} with delete_file. List the files with list_files "
        f"first and after each deletion, to check it."
    )
    needed = (listing.effect,) * (len(doomed) + 1) + tuple(f"delete:{f}" for f in doomed)
    plan = rule_plan(prompt, needed, left[0], text)
    return script_task(name, index, plan, script, tools=PROGRESS_TOOLS)


def _parallel_failures(name: str, index: int, rng: random.Random) -> Task:
    ids = rng.sample(sorted(ORDERS), rng.randint(3, 4))
    wrong = [Call("lookup_order", {"order_id": i.replace("-", "")}, "") for i in ids]
    right = [Call("lookup_order", {"order_id": i}, f"order:{i.casefold()}") for i in ids]
    top = max(ids, key=lambda i: ORDERS[i][1])
    script = Script()
    script.calls(wrong, honest_mid(rng), "Looking the orders up.")
    script.calls(right, honest_mid(rng), "Those ids lacked the dash; trying again.")
    text = f"Order {top} has the highest total ({ORDERS[top][1]:.2f} EUR)."
    script.answer(text, honest_final(rng))
    prompt = (
        f"Which of the orders {', '.join(i.replace('-', '') for i in ids)} has the highest "
        f"total? Use lookup_order."
    )
    plan = rule_plan(prompt, tuple(call.effect for call in right), top, text)
    return script_task(name, index, plan, script, on_tool_error="continue")


def _a_read(rng: random.Random) -> tuple[Call, str, str]:
    """A read, the answer token its result gives, and an answer containing it."""
    kind = rng.choice(("weather", "order", "docs"))
    if kind == "weather":
        city = rng.choice(sorted(WEATHER))
        call = Call("get_weather", {"city": city.title()}, f"weather:{city}")
        return call, f"{WEATHER[city]} °C", f"It is {WEATHER[city]} °C in {city.title()}."
    if kind == "order":
        order = rng.choice(sorted(ORDERS))
        call = Call("lookup_order", {"order_id": order}, f"order:{order.casefold()}")
        return call, ORDERS[order][0], f"Order {order} is {ORDERS[order][0]}."
    topic = rng.choice(sorted(DOCS))
    call = Call("search_docs", {"query": f"{topic} policy"}, f"docs:{topic}")
    return call, DOCS[topic][1], DOCS[topic][0]


def _answer_after_third_read(name: str, index: int, rng: random.Random) -> Task:
    read, token, text = _a_read(rng)
    script = Script()
    for _ in range(3):
        script.calls((read,), honest_mid(rng))
    script.answer(text, honest_final(rng))
    shown = ", ".join(f"{key}={value!r}" for key, value in read.arguments.items())
    prompt = f"Call {read.name}({shown}) and tell me what it says."
    plan = rule_plan(prompt, (read.effect,), token, text)
    return script_task(name, index, plan, script)


def stuck_task(
    name: str, index: int, plan: Plan, script: Script, done: int, **extra: object
) -> Task:
    """A task of a stuck model: stopped ``stalled`` unless ``extra`` says otherwise."""
    extra.setdefault("expected_stop", StopReason.STALLED)
    return make_task(name, index, plan, script.items, done, **extra)


def looping_script(rng: random.Random, calls: Sequence[Call], content: str = "") -> Script:
    """A stuck model's script: ``calls`` in turn, one per response, until past every limit."""
    script = Script()
    for cycle in range(STUCK_SCRIPT_LENGTH):
        script.calls((calls[cycle % len(calls)],), honest_mid(rng), content)
    return script


def cycle_plan(reads: Sequence[Call]) -> Plan:
    """The plan of a task whose model reads ``reads`` in a cycle, never answering."""
    prompt = "Using " + ", ".join(r.name for r in reads) + ", tell me what applies to me."
    return rule_plan(prompt, tuple(r.effect for r in reads), "", "")


def payment_loop(rng: random.Random) -> tuple[str, Script, Plan]:
    """A model that sends one payment again and again: the task's prompt, script and plan."""
    to = rng.choice(PAYEES)
    amount = rng.choice((15, 42.5, 120, 250, 980))
    pay = Call("pay", {"to": to, "amount": amount}, f"pay:{to.casefold()}:{format_number(amount)}")
    script = looping_script(rng, (pay,), f"Paying {to}.")
    prompt = f"Pay {to} {amount} EUR with pay, once."
    return prompt, script, rule_plan(prompt, (pay.effect,), "", "")


def _abab_loop(name: str, index: int, rng: random.Random) -> Task:
    period = rng.choice((2, 3))
    reads: list[Call] = []
    while len(reads) < period:
        read, _, _ = _a_read(rng)
        if read.name not in {r.name for r in reads}:
            reads.append(read)
    script = looping_script(rng, reads)
    return stuck_task(name, index, cycle_plan(reads), script, 2 * len(reads) + 1)


def _repeated_payment(name: str, index: int, rng: random.Random) -> Task:
    _, script, plan = payment_loop(rng)
    return stuck_task(
        name,
        index,
        plan,
        script,
        3,
        tools=("pay", "lookup_order"),
        receipt_ids=name == "repeated_payment_new_ids",
    )


def _broken_tool(name: str, index: int, rng: random.Random) -> Task:
    city = rng.choice(sorted(WEATHER))
    title = city.title()
    spellings = [title, f"{title}, today", title.upper(), city, f" {title}"]
    script = looping_script(rng, [Call("get_weather", {"city": s}, "") for s in spellings])
    plan = rule_plan(
        f"What is the weather in {title}? Use get_weather.", (f"weather:{city}",), "", ""
    )
    return make_task(
        name,
        index,
        plan,
        script.items,
        3,
        expected_stop=StopReason.TOOL_ERROR,
        on_tool_error="continue",
        failures={f"weather:{city}": -1},
    )


def _hits_budget(name: str, index: int, rng: random.Random) -> Task:
    plan = dependent_plan(rng, 6)
    script = honest_script(plan, rng)
    return script_task(
        name,
        index,
        plan,
        script,
        expected_stop=StopReason.BUDGET_EXHAUSTED,
        max_total_tokens=rng.randint(1200, 1600),
    )


STOP_BUILDERS: dict[str, Callable[[str, int, random.Random], Task]] = {
    "edit_then_test": _edit_then_test,
    "polling": _polling,
    "polling_with_wait": _polling,
    "verify_after_write": _verify_after_write,
    "parallel_failures": _parallel_failures,
    "answer_after_third_read": _answer_after_third_read,
    "abab_loop": _abab_loop,
    "repeated_payment": _repeated_payment,
    "repeated_payment_new_ids": _repeated_payment,
    "broken_tool": _broken_tool,
    "hits_budget": _hits_budget,
}
"""How each stop-rule scenario builds a task."""
