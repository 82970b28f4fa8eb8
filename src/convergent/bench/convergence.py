"""The convergence suite: objective versus subjective stopping on scripted tasks.

Each task has a ground truth: the effects it needs in the world (the tool calls that
must be made) and the cycle at which it is done. A scripted model plays what real
models do, including the self-reports (``confidence``, ``action``) they attach, and
every task runs under each policy:

- ``objective``: the library's loop (`convergent.Agent`) with its defaults: continue
  while the response has tool calls, stop when it has none (or on a tool error, a
  stall or a limit), a note to the model before a stall or tool-error stop, an answer
  after such a stop.
- ``objective_verified``: the same loop with a verifier, an external check of the
  world that must pass before ``completed`` counts.
- ``counting``: the library's stop rules before stops became progress-aware, which
  exists only here as a baseline: the same call 3 times anywhere in the run stalls
  it at once, tool failures count per call, no answer after a stop
  (`convergent.bench._baselines`).
- ``subjective``: seed 000's naive rule, which exists only here as a baseline: stop
  when ``action == "finish"`` or ``confidence >= 0.7``, checked on each response
  before its tool calls run (as the seed's ``_check_convergence`` did).

A run is *correct* when it stopped where the task says it should, for the expected
`StopReason`; otherwise it made a *false stop* (a false positive: it stopped before
the work was done, or stopped a model that was making progress) or *missed a stop* (a
false negative: it went on after the task was done, let a stuck model run to the cycle
limit, or went over its budget). `judge` states the rule for each kind of scenario.

Scenario kinds:

- ``behaviour``: what models do with honest self-reports (1..N calls, parallel
  batches, answering at once, no tools, failing tools, invalid arguments).
- ``adversarial``: self-reports that break subjective stopping (hallucinated
  confidence with calls pending, ``finish`` with a pending call, low confidence on a
  finished answer, ``finish`` spelled otherwise, no finish signal at all).
- ``premature``: the model answers before doing the work. Its tool-call structure
  says "done" while the task is not, so no stopping rule that reads the response can
  catch it; only the external check does. The other kinds are *structural*.
- ``progress``, ``stuck``, ``budget``: the stop rules' own cases: repeats that are
  progress, loops, a budget that runs out (`convergent.bench._stop_scenarios`); results
  that differ only in a time or an id, slow polls, longer cycles, state-changing calls
  and the user's messages (`convergent.bench._stall_scenarios`); each streak of
  non-progress, replies that are not answers, and cases that look like a streak but
  recover (`convergent.bench._streak_scenarios`); cost budgets, tool-call caps and the
  provider's own count (`convergent.bench._budget_scenarios`); writes repeated, polls of
  tools that declare nothing and waiting between polls
  (`convergent.bench._effect_scenarios`).

When a policy asks the model again after the script ended, the model repeats its last
response: a model asked again after answering restates its answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from convergent.agent import Agent
from convergent.bench._baselines import (
    CONFIDENCE_THRESHOLD,
    RunEnd,
    run_counting,
    run_subjective,
    subjective_converged,
)
from convergent.bench._budget_scenarios import BUDGET_BUILDERS, BUDGET_SCENARIOS
from convergent.bench._effect_scenarios import EFFECT_BUILDERS, EFFECT_SCENARIOS
from convergent.bench._rules import agent_rules
from convergent.bench._stall_scenarios import STALL_BUILDERS, STALL_SCENARIOS
from convergent.bench._stop_scenarios import STOP_BUILDERS, STOP_SCENARIOS
from convergent.bench._streak_scenarios import STREAK_BUILDERS, STREAK_SCENARIOS
from convergent.bench._tasks import (
    Meta,
    Scenario,
    Script,
    Task,
    honest_final,
    honest_mid,
    make_task,
    script_task,
    scripted_model,
)
from convergent.bench._world import (
    QUESTIONS,
    TOOL_NAMES,
    Plan,
    World,
    dependent_plan,
    independent_plan,
)
from convergent.bench.report import EMPTY_STATS, PolicyStats, SuiteResult
from convergent.clock import use_clock
from convergent.events import Event, Nudged
from convergent.extensions import Verification
from convergent.steering import SteeringQueue
from convergent.stop import StopReason

__all__ = [
    "CONFIDENCE_THRESHOLD",
    "POLICIES",
    "SCENARIOS",
    "Policy",
    "Scenario",
    "Task",
    "TaskOutcome",
    "build_tasks",
    "judge",
    "run_task",
    "subjective_converged",
]

DEFAULT_MAX_CYCLES = 20
"""Cycle limit of every policy in this suite."""
Policy = Literal["objective", "objective_verified", "counting", "subjective"]
POLICIES: tuple[Policy, ...] = ("objective", "objective_verified", "counting", "subjective")
"""The stopping policies compared."""


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("sequential", "behaviour", "needs 1..6 calls, one per response"),
    Scenario("parallel_batch", "behaviour", "needs 2..6 independent calls in 1..3 batches"),
    Scenario("done_early", "behaviour", "tools available, answered at once without them"),
    Scenario("no_tools", "behaviour", "no tools available, answered at once"),
    Scenario("tool_failure", "behaviour", "a tool fails; the run must stop there"),
    Scenario("tool_failure_recovered", "behaviour", "a tool fails once; error fed back, retried"),
    Scenario("invalid_arguments", "behaviour", "one call has invalid arguments, then corrected"),
    Scenario("hallucinated_confidence", "adversarial", "confidence >= 0.7 with calls pending"),
    Scenario("finish_with_pending_call", "adversarial", "action 'finish' on a response with calls"),
    Scenario("low_confidence_final", "adversarial", "finished answer with confidence < 0.7"),
    Scenario("finish_synonym", "adversarial", "finish spelled 'done', 'complete', ..."),
    Scenario("no_finish_signal", "adversarial", "no action and no confidence at all"),
    Scenario("premature_answer", "premature", "answers before making the needed calls"),
    *STOP_SCENARIOS,
    *STALL_SCENARIOS,
    *STREAK_SCENARIOS,
    *BUDGET_SCENARIOS,
    *EFFECT_SCENARIOS,
)
"""Every scenario of the suite, in report order."""

_BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
_SYNONYMS = ("done", "complete", "completed", "final_answer", "stop", "end")


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """How one policy did on one task."""

    task: str
    """Task id."""
    scenario: str
    """Scenario name."""
    policy: str
    """Policy name."""
    stop: str
    """Why the run ended (a `StopReason` value or the baseline's own reason)."""
    cycles: int
    """Model requests made."""
    false_positive: bool
    """A false stop: the run stopped before the task was done (see `judge`)."""
    false_negative: bool
    """A missed stop: the run went on after it should have stopped (see `judge`)."""
    correct: bool
    """Stopped where the task says, for the expected reason (see `judge`)."""
    extra_cycles: int
    """Model requests after the done cycle."""
    answer_after_stop: bool = False
    """The run stopped for a reason other than completion and still returned an answer."""
    nudges: int = 0
    """Notes the model got in place of a stall or tool-error stop."""
    payments: int = 0
    """Payments the run sent (a stuck model sends the same one again)."""
    tokens: int = 0
    """Tokens used (a final answer after a stop included)."""
    cost: float = 0.0
    """What the responses cost (a final answer after a stop included)."""
    budget_notes: int = 0
    """Notes the model got on what is left of its budgets."""
    tool_calls: int = 0
    """Calls that reached a tool of the world."""
    writes: int = 0
    """Calls that reached a tool declared a write (``read_only=False``)."""
    answered: bool = False
    """The run's output holds the task's answer."""
    detail: str = ""
    """The stop in words, with its numbers."""


def _plan(rng: random.Random, low: int, high: int) -> Plan:
    return dependent_plan(rng, rng.randint(low, high))


def _standard(
    name: str, plan: Plan, rng: random.Random, mids: list[Meta], final: Meta
) -> tuple[tuple[Meta, ...], int]:
    script = Script()
    for batch, meta in zip(plan.batches, mids, strict=True):
        script.calls(batch, meta)
    script.answer(plan.answer_text, final)
    return tuple(script.items), len(script.items)


def _build_structural_simple(name: str, index: int, rng: random.Random) -> Task:
    """Scenarios that differ only in the plan and the self-reports attached to it."""
    if name == "parallel_batch":
        n = rng.randint(2, 6)
        plan = independent_plan(rng, n, rng.randint(1, min(3, n)))
    elif name == "sequential":
        plan = _plan(rng, 1, 6)
    else:
        plan = _plan(rng, 1, 4)
    mids = [honest_mid(rng) for _ in plan.batches]
    final = honest_final(rng)
    if name == "hallucinated_confidence":
        cycle = rng.randrange(len(mids))
        mids[cycle] = {"action": "tool_use", "confidence": round(rng.uniform(0.75, 0.99), 2)}
    elif name == "finish_with_pending_call":
        cycle = rng.randrange(len(mids))
        mids[cycle] = {"action": "finish", "confidence": round(rng.uniform(0.3, 0.69), 2)}
    elif name == "low_confidence_final":
        final = {"confidence": round(rng.uniform(0.3, 0.65), 2)}
        action = rng.choice(("answer", "respond", None))
        if action is not None:
            final["action"] = action
    elif name == "finish_synonym":
        final = {"action": rng.choice(_SYNONYMS)}
        if rng.random() < 0.5:
            final["confidence"] = round(rng.uniform(0.4, 0.69), 2)
    elif name == "no_finish_signal":
        mids = [{} for _ in mids]
        final = {}
    script, done = _standard(name, plan, rng, mids, final)
    return make_task(name, index, plan, script, done)


def _build_direct(name: str, index: int, rng: random.Random) -> Task:
    question, answer = QUESTIONS[rng.randrange(len(QUESTIONS))]
    plan = Plan("questions", question, (), (), answer, f"The answer is {answer}.")
    script = Script()
    script.answer(plan.answer_text, honest_final(rng))
    tools = TOOL_NAMES if name == "done_early" else ()
    return make_task(name, index, plan, script.items, 1, tools=tools)


def _build_tool_failure(name: str, index: int, rng: random.Random) -> Task:
    plan = _plan(rng, 1, 4)
    failing = rng.randrange(len(plan.batches))
    failed_call = plan.batches[failing][0]
    script = Script()
    for batch in plan.batches[: failing + 1]:
        script.calls(batch, honest_mid(rng))
    if name == "tool_failure":
        if rng.random() < 0.5:
            script.answer(f"Done. {plan.answer_text}", {"action": "finish", "confidence": 0.9})
        else:
            script.calls((failed_call,), honest_mid(rng), "The call failed; retrying.")
        attempted = tuple(call.effect for batch in plan.batches[: failing + 1] for call in batch)
        return make_task(
            name,
            index,
            plan,
            script.items,
            failing + 1,
            needed=attempted,
            expected_stop=StopReason.TOOL_ERROR,
            failures={failed_call.effect: -1},
        )
    script.calls((failed_call,), honest_mid(rng), "The call failed; retrying.")
    for batch in plan.batches[failing + 1 :]:
        script.calls(batch, honest_mid(rng))
    script.answer(plan.answer_text, honest_final(rng))
    return script_task(
        name,
        index,
        plan,
        script,
        on_tool_error="continue",
        failures={failed_call.effect: 1},
    )


def _build_invalid_arguments(name: str, index: int, rng: random.Random) -> Task:
    plan = _plan(rng, 1, 4)
    wrong = rng.randrange(len(plan.batches))
    call = plan.batches[wrong][0]
    bad = {} if rng.random() < 0.5 else {"value": "?", **call.arguments}
    script = Script()
    for position, batch in enumerate(plan.batches):
        if position == wrong:
            script.bad_call(call.name, bad, honest_mid(rng))
        script.calls(batch, honest_mid(rng))
    script.answer(plan.answer_text, honest_final(rng))
    return script_task(name, index, plan, script)


def _build_premature(name: str, index: int, rng: random.Random) -> Task:
    plan = _plan(rng, 1, 4)
    script = Script()
    script.answer(
        "I already know this: the answer is 42.",
        {"action": "finish", "confidence": round(rng.uniform(0.8, 0.97), 2)},
    )
    for batch in plan.batches:
        script.calls(batch, honest_mid(rng))
    script.answer(plan.answer_text, honest_final(rng))
    return script_task(name, index, plan, script)


_BUILDERS: dict[str, Callable[[str, int, random.Random], Task]] = {
    "sequential": _build_structural_simple,
    "parallel_batch": _build_structural_simple,
    "done_early": _build_direct,
    "no_tools": _build_direct,
    "tool_failure": _build_tool_failure,
    "tool_failure_recovered": _build_tool_failure,
    "invalid_arguments": _build_invalid_arguments,
    "hallucinated_confidence": _build_structural_simple,
    "finish_with_pending_call": _build_structural_simple,
    "low_confidence_final": _build_structural_simple,
    "finish_synonym": _build_structural_simple,
    "no_finish_signal": _build_structural_simple,
    "premature_answer": _build_premature,
    **STOP_BUILDERS,
    **STALL_BUILDERS,
    **STREAK_BUILDERS,
    **BUDGET_BUILDERS,
    **EFFECT_BUILDERS,
}


def build_tasks(
    seed: int = 0, per_scenario: int = 10, scenarios: Sequence[str] | None = None
) -> list[Task]:
    """Generate the suite's tasks: ``per_scenario`` of each scenario, reproducibly.

    Args:
        seed: Seed of the generator; the same seed gives the same tasks.
        per_scenario: Tasks per scenario.
        scenarios: Scenario names to build (default: all).
    """
    names = list(scenarios) if scenarios is not None else [s.name for s in SCENARIOS]
    tasks: list[Task] = []
    for name in names:
        rng = random.Random(f"{seed}:{name}")
        tasks.extend(_BUILDERS[name](name, index, rng) for index in range(per_scenario))
    return tasks


def _verifier(task: Task, world: World) -> Callable[[str], Verification]:
    def verify(answer: str) -> Verification:
        missing = world.missing(task.needed)
        if missing:
            return Verification(False, "these results are still missing: " + ", ".join(missing))
        if task.answer.casefold() not in answer.casefold():
            return Verification(False, "the answer does not match the tool results")
        return Verification(True)

    return verify


async def _run_objective(task: Task, world: World, max_cycles: int, verified: bool) -> RunEnd:
    harness = SteeringQueue() if task.messages else None
    agent = Agent(
        scripted_model(task, clock=world.clock, harness=harness),
        world.tools(task.tools, task.declared),
        **agent_rules(task, max_cycles),
        verifier=_verifier(task, world) if verified or task.verified else None,
        output_schema=task.output_schema,
        record_events=False,
    )
    notes = {"budget": 0, "other": 0}

    def count(event: Event) -> None:
        if isinstance(event, Nudged):
            notes["budget" if event.about == "budget" else "other"] += 1

    with use_clock(world.clock):
        result = await agent.run(task.prompt, steering=harness, on_event=count)
    return RunEnd(
        stop=result.stop_reason.value,
        cycles=result.cycles,
        output=result.output,
        after_stop=result.output_after_stop,
        tokens=result.usage.total_tokens,
        cost=result.usage.cost,
        nudges=notes["other"],
        budget_notes=notes["budget"],
        detail=result.stop_detail,
    )


_LOOPING = {StopReason.MAX_CYCLES.value, StopReason.STALLED.value, "budget_exhausted"}
_BUDGET = StopReason.BUDGET_EXHAUSTED.value


def judge(task: Task, policy: str, end: RunEnd, world: World) -> TaskOutcome:
    """Classify one run against the task's ground truth.

    - A task the model finishes (``behaviour``, ``adversarial``, ``premature``,
      ``progress``): a false stop when the run ended before the needed calls were made
      or before the done cycle; a missed stop when it made model requests after the
      done cycle, ended on a limit or a stall, or spent past a tool-call cap; correct
      when it ended at the done
      cycle, for the library's policies and ``counting`` also with the expected reason
      and, when that is ``completed``, with an output that holds the task's answer.
    - A stuck model (``stuck``): a false stop when the run ended before the done cycle
      (before the repetition justified a stop); a missed stop when it did not end with
      the expected reason (it ran into the cycle limit); correct otherwise. Cycles past
      the done cycle (the note before the stop) are counted as extra cycles.
    - A budget too small for the task (``budget``): a missed stop when the run spent
      more than a budget allows (tokens, cost, tool calls in all or of one tool); a
      false stop when it ended within its budgets for another reason; correct when it
      ended ``budget_exhausted`` within them, after the model was told what was left,
      with an answer after the stop (unless the task turns that answer off).
    """
    kind = _BY_NAME[task.scenario].kind
    stop, cycles = end.stop, end.cycles
    extra = max(0, cycles - task.done_cycle)
    answered = bool(task.answer) and task.answer.casefold() in end.output.casefold()
    if kind == "stuck":
        false_positive = cycles < task.done_cycle
        false_negative = not false_positive and stop != task.expected_stop.value
        correct = not false_positive and not false_negative
    elif kind == "budget":
        false_negative = overspent(task, end, world)
        false_positive = not false_negative and stop != _BUDGET
        answer = (end.after_stop and bool(end.output)) or not task.final_answer
        told = end.budget_notes > 0
        correct = not false_negative and stop == _BUDGET and told and answer
        extra = 0
    else:
        made_all = world.attempted(task.needed)
        false_positive = not made_all or cycles < task.done_cycle
        false_negative = not false_positive and (
            cycles > task.done_cycle or stop in _LOOPING or overspent(task, end, world)
        )
        completed = task.expected_stop is StopReason.COMPLETED
        reason_ok = policy == "subjective" or (
            stop == task.expected_stop.value and (answered or not completed)
        )
        correct = not false_positive and not false_negative and reason_ok
    return TaskOutcome(
        task=task.id,
        scenario=task.scenario,
        policy=policy,
        stop=stop,
        cycles=cycles,
        false_positive=false_positive,
        false_negative=false_negative,
        correct=correct,
        extra_cycles=extra,
        answer_after_stop=end.after_stop and bool(end.output),
        nudges=end.nudges,
        payments=world.payments,
        tokens=end.tokens,
        cost=end.cost,
        budget_notes=end.budget_notes,
        tool_calls=sum(world.calls.values()),
        writes=sum(world.calls[name] for name in _writes(task)),
        answered=answered,
        detail=end.detail,
    )


def _writes(task: Task) -> list[str]:
    """The task's tools declared writes (``read_only=False``)."""
    return [t.name for t in World().tools(task.tools, task.declared) if t.read_only is False]


def overspent(task: Task, end: RunEnd, world: World) -> bool:
    """Whether the run spent more than one of the task's budgets allows."""
    calls = world.calls
    return (
        (task.max_total_tokens is not None and end.tokens > task.max_total_tokens)
        or (task.max_cost is not None and end.cost > task.max_cost)
        or (task.max_tool_calls is not None and sum(calls.values()) > task.max_tool_calls)
        or (
            task.max_calls_per_tool is not None
            and max(calls.values(), default=0) > task.max_calls_per_tool
        )
    )


async def run_task(
    task: Task, policy: Policy, *, max_cycles: int = DEFAULT_MAX_CYCLES
) -> TaskOutcome:
    """Run one task under one policy in a fresh world and judge it."""
    world = World(dict(task.failures), receipt_ids=task.receipt_ids, tool_seconds=task.tool_seconds)
    if policy == "subjective":
        end = await run_subjective(task, world, max_cycles)
    elif policy == "counting":
        end = await run_counting(task, world, max_cycles)
    else:
        end = await _run_objective(task, world, max_cycles, policy != "objective")
    return judge(task, policy, end, world)


def _stats(outcomes: Sequence[TaskOutcome]) -> PolicyStats:
    return PolicyStats(
        tasks=len(outcomes),
        false_positives=sum(o.false_positive for o in outcomes),
        false_negatives=sum(o.false_negative for o in outcomes),
        correct=sum(o.correct for o in outcomes),
        extra_cycles=sum(o.extra_cycles for o in outcomes),
    )


def _counts(outcomes: Sequence[TaskOutcome]) -> dict[str, float]:
    """What the rates do not show: answers after a stop, notes, payments, what was spent."""
    return {
        "answers_after_stop": sum(o.answer_after_stop for o in outcomes),
        "nudges": sum(o.nudges for o in outcomes),
        "budget_notes": sum(o.budget_notes for o in outcomes),
        "payments": sum(o.payments for o in outcomes),
        "tokens": sum(o.tokens for o in outcomes),
        "cost": round(sum(o.cost for o in outcomes), 4),
        "tool_calls": sum(o.tool_calls for o in outcomes),
    }


def summarize(outcomes: Sequence[TaskOutcome]) -> SuiteResult:
    """Aggregate outcomes per policy, per scenario, and over the structural scenarios."""
    policies = list(dict.fromkeys(o.policy for o in outcomes))
    scenarios = list(dict.fromkeys(o.scenario for o in outcomes))

    def each(scenario: str, policy: str) -> list[TaskOutcome]:
        return [o for o in outcomes if o.scenario == scenario and o.policy == policy]

    breakdown = {
        scenario: {policy: _stats(each(scenario, policy)) for policy in policies}
        for scenario in scenarios
    }
    totals = {policy: _stats([o for o in outcomes if o.policy == policy]) for policy in policies}
    structural = {
        policy: sum(
            (
                per_policy[policy]
                for name, per_policy in breakdown.items()
                if _BY_NAME[name].structural
            ),
            EMPTY_STATS,
        ).to_dict()
        for policy in policies
    }
    kinds = {name: _BY_NAME[name].kind for name in scenarios}
    counts = {
        scenario: {policy: _counts(each(scenario, policy)) for policy in policies}
        for scenario in scenarios
        if not _BY_NAME[scenario].finishes or _BY_NAME[scenario].kind == "progress"
    }
    return SuiteResult(
        suite="convergence",
        policies=totals,
        breakdown=breakdown,
        details={"structural": structural, "scenario_kinds": kinds, "stop_rule_counts": counts},
        notes=(
            f"subjective = seed 000's rule: stop when action == 'finish' or confidence >= "
            f"{CONFIDENCE_THRESHOLD}, checked before the response's tool calls run",
            "counting = the stop rules before progress-aware stopping: the same call 3 times "
            "in a run stalls it at once, 3 failed calls in a row stop it, no answer after a stop",
            "objective_verified = the library's loop with an external check of the world "
            "that must pass before 'completed' counts",
            f"every policy has max_cycles={DEFAULT_MAX_CYCLES}; reaching it is a missed stop",
            "premature_answer is not structural: the model answers before doing the work, "
            "so only the external check can catch it",
        ),
    )


def iter_runs(tasks: Sequence[Task]) -> Iterator[tuple[Task, Policy]]:
    """Every (task, policy) pair of a run, in order."""
    for task in tasks:
        for policy in POLICIES:
            yield task, policy


async def run_convergence_async(
    seed: int = 0,
    per_scenario: int = 10,
    *,
    on_progress: Callable[[TaskOutcome], None] | None = None,
) -> tuple[SuiteResult, list[TaskOutcome]]:
    """Run every task under every policy; return the summary and each outcome."""
    tasks = build_tasks(seed, per_scenario)
    outcomes: list[TaskOutcome] = []
    for task, policy in iter_runs(tasks):
        outcome = await run_task(task, policy)
        outcomes.append(outcome)
        if on_progress is not None:
            on_progress(outcome)
    result = summarize(outcomes)
    details = {"seed": seed, "tasks_per_scenario": per_scenario, **result.details}
    return (
        SuiteResult(
            suite=result.suite,
            policies=result.policies,
            breakdown=result.breakdown,
            details=details,
            notes=result.notes,
        ),
        outcomes,
    )
