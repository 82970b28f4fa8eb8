"""The convergence suite: objective versus subjective stopping on scripted tasks.

Each task has a ground truth: the effects it needs in the world (the tool calls that
must be made) and the cycle at which it is done. A scripted model plays what real
models do, including the self-reports (``confidence``, ``action``) they attach, and
every task runs under each policy:

- ``objective``: the library's loop (`convergent.Agent`): continue while the response
  has tool calls, stop when it has none (or on a tool error, a stall or a limit).
- ``objective_verified``: the same loop with a verifier, an external check of the
  world that must pass before ``completed`` counts.
- ``subjective``: seed 000's naive rule, which exists only here as a baseline: stop
  when ``action == "finish"`` or ``confidence >= 0.7``, checked on each response
  before its tool calls run (as the seed's ``_check_convergence`` did).

A run is a *false positive* when it stopped before the needed calls were made (or
before the done cycle), a *false negative* when it made model requests after the task
was done or hit the cycle limit, and *correct* when it stopped exactly at the done
cycle (for the library's policies: also for the expected `StopReason`).

Scenario kinds:

- ``behaviour``: what models do with honest self-reports (1..N calls, parallel
  batches, answering at once, no tools, failing tools, invalid arguments).
- ``adversarial``: self-reports that break subjective stopping (hallucinated
  confidence with calls pending, ``finish`` with a pending call, low confidence on a
  finished answer, ``finish`` spelled otherwise, no finish signal at all).
- ``premature``: the model answers before doing the work. Its tool-call structure
  says "done" while the task is not, so no stopping rule that reads the response can
  catch it; only the external check does. Behaviour and adversarial scenarios are the
  *structural* ones.

When a policy asks the model again after the script ended, the model repeats its last
response: a model asked again after answering restates its answer.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from convergent.agent import Agent
from convergent.bench._world import (
    QUESTIONS,
    TOOL_NAMES,
    Call,
    Plan,
    World,
    dependent_plan,
    independent_plan,
)
from convergent.bench.report import EMPTY_STATS, PolicyStats, SuiteResult
from convergent.exceptions import ToolError
from convergent.extensions import Verification
from convergent.messages import (
    Message,
    ModelResponse,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from convergent.models.scripted import ScriptedModel, response_from_dict
from convergent.stop import Limits, StopReason
from convergent.tools import Tool, ToolArgumentsError

__all__ = [
    "CONFIDENCE_THRESHOLD",
    "POLICIES",
    "SCENARIOS",
    "Scenario",
    "Task",
    "TaskOutcome",
    "build_tasks",
    "judge",
    "run_convergence",
    "run_task",
    "subjective_converged",
]

CONFIDENCE_THRESHOLD = 0.7
"""Seed 000's threshold: the subjective baseline stops at or above this confidence."""
DEFAULT_MAX_CYCLES = 20
"""Cycle limit of every policy in this suite."""
Kind = Literal["behaviour", "adversarial", "premature"]
Policy = Literal["objective", "objective_verified", "subjective"]
POLICIES: tuple[Policy, ...] = ("objective", "objective_verified", "subjective")
"""The stopping policies compared."""
Meta = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Scenario:
    """A family of tasks that shares one model behaviour."""

    name: str
    """Short name used in reports."""
    kind: Kind
    """``behaviour``, ``adversarial`` or ``premature``."""
    description: str
    """What the scripted model does."""

    @property
    def structural(self) -> bool:
        """Whether the response's tool calls reflect the work left (objective stopping works)."""
        return self.kind != "premature"


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
)
"""Every scenario of the suite, in report order."""

_BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
_SYNONYMS = ("done", "complete", "completed", "final_answer", "stop", "end")


@dataclass(frozen=True, slots=True)
class Task:
    """One benchmark task with its ground truth."""

    id: str
    """Stable id, e.g. ``sequential-03``."""
    scenario: str
    """Name of its `Scenario`."""
    prompt: str
    """The task as the user wrote it."""
    tools: tuple[str, ...]
    """Names of the world's tools the agent gets."""
    script: tuple[Meta, ...]
    """The scripted model's responses, in order (``content``, ``tool_calls``, self-reports)."""
    needed: tuple[str, ...]
    """Effects the task needs (ground truth of the calls that must be made)."""
    done_cycle: int
    """The cycle at which the task is done and the run should stop."""
    expected_stop: StopReason
    """The stop reason the library's loop should end with."""
    answer: str
    """Token a correct final answer contains (checked by the verifier)."""
    on_tool_error: Literal["stop", "continue"] = "stop"
    """The tool-error policy the task declares."""
    failures: Mapping[str, int] = field(default_factory=dict)
    """Effects whose calls fail, with how many times (``-1``: always)."""


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
    """Stopped before the needed calls were made or before the done cycle."""
    false_negative: bool
    """Went on after the done cycle, or hit the cycle limit."""
    correct: bool
    """Stopped exactly at the done cycle (for the expected reason, where one applies)."""
    extra_cycles: int
    """Model requests after the done cycle."""


def _honest_mid(rng: random.Random) -> Meta:
    return {"action": "tool_use", "confidence": round(rng.uniform(0.2, 0.6), 2)}


def _honest_final(rng: random.Random) -> Meta:
    return {"action": "finish", "confidence": round(rng.uniform(0.75, 0.98), 2)}


class _Script:
    """Builds a scripted conversation, numbering tool-call ids by cycle."""

    def __init__(self) -> None:
        self.items: list[Meta] = []

    def calls(self, batch: Sequence[Call], meta: Meta, content: str = "") -> None:
        cycle = len(self.items) + 1
        self.items.append(
            {
                "content": content or "Calling " + ", ".join(call.name for call in batch) + ".",
                "tool_calls": [
                    {"id": f"c{cycle}_{i}", "name": call.name, "arguments": dict(call.arguments)}
                    for i, call in enumerate(batch)
                ],
                **meta,
            }
        )

    def bad_call(self, name: str, arguments: dict[str, Any], meta: Meta) -> None:
        cycle = len(self.items) + 1
        self.items.append(
            {
                "content": f"Calling {name}.",
                "tool_calls": [{"id": f"c{cycle}_0", "name": name, "arguments": arguments}],
                **meta,
            }
        )

    def answer(self, text: str, meta: Meta) -> None:
        self.items.append({"content": text, **meta})


def _plan(rng: random.Random, low: int, high: int) -> Plan:
    return dependent_plan(rng, rng.randint(low, high))


def _standard(
    name: str, plan: Plan, rng: random.Random, mids: list[Meta], final: Meta
) -> tuple[tuple[Meta, ...], int]:
    script = _Script()
    for batch, meta in zip(plan.batches, mids, strict=True):
        script.calls(batch, meta)
    script.answer(plan.answer_text, final)
    return tuple(script.items), len(script.items)


def _make_task(
    scenario: str, index: int, plan: Plan, script: Sequence[Meta], done: int, **extra: Any
) -> Task:
    return Task(
        id=f"{scenario}-{index:02d}",
        scenario=scenario,
        prompt=plan.prompt,
        tools=extra.pop("tools", TOOL_NAMES),
        script=tuple(script),
        needed=extra.pop("needed", plan.needed),
        done_cycle=done,
        expected_stop=extra.pop("expected_stop", StopReason.COMPLETED),
        answer=plan.answer,
        **extra,
    )


def _build_structural_simple(name: str, index: int, rng: random.Random) -> Task:
    """Scenarios that differ only in the plan and the self-reports attached to it."""
    if name == "parallel_batch":
        n = rng.randint(2, 6)
        plan = independent_plan(rng, n, rng.randint(1, min(3, n)))
    elif name == "sequential":
        plan = _plan(rng, 1, 6)
    else:
        plan = _plan(rng, 1, 4)
    mids = [_honest_mid(rng) for _ in plan.batches]
    final = _honest_final(rng)
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
    return _make_task(name, index, plan, script, done)


def _build_direct(name: str, index: int, rng: random.Random) -> Task:
    question, answer = QUESTIONS[rng.randrange(len(QUESTIONS))]
    plan = Plan("questions", question, (), (), answer, f"The answer is {answer}.")
    script = _Script()
    script.answer(plan.answer_text, _honest_final(rng))
    tools = TOOL_NAMES if name == "done_early" else ()
    return _make_task(name, index, plan, script.items, 1, tools=tools)


def _build_tool_failure(name: str, index: int, rng: random.Random) -> Task:
    plan = _plan(rng, 1, 4)
    failing = rng.randrange(len(plan.batches))
    failed_call = plan.batches[failing][0]
    script = _Script()
    for batch in plan.batches[: failing + 1]:
        script.calls(batch, _honest_mid(rng))
    if name == "tool_failure":
        if rng.random() < 0.5:
            script.answer(f"Done. {plan.answer_text}", {"action": "finish", "confidence": 0.9})
        else:
            script.calls((failed_call,), _honest_mid(rng), "The call failed; retrying.")
        attempted = tuple(call.effect for batch in plan.batches[: failing + 1] for call in batch)
        return _make_task(
            name,
            index,
            plan,
            script.items,
            failing + 1,
            needed=attempted,
            expected_stop=StopReason.TOOL_ERROR,
            failures={failed_call.effect: -1},
        )
    script.calls((failed_call,), _honest_mid(rng), "The call failed; retrying.")
    for batch in plan.batches[failing + 1 :]:
        script.calls(batch, _honest_mid(rng))
    script.answer(plan.answer_text, _honest_final(rng))
    return _make_task(
        name,
        index,
        plan,
        script.items,
        len(script.items),
        on_tool_error="continue",
        failures={failed_call.effect: 1},
    )


def _build_invalid_arguments(name: str, index: int, rng: random.Random) -> Task:
    plan = _plan(rng, 1, 4)
    wrong = rng.randrange(len(plan.batches))
    call = plan.batches[wrong][0]
    bad = {} if rng.random() < 0.5 else {"value": "?", **call.arguments}
    script = _Script()
    for position, batch in enumerate(plan.batches):
        if position == wrong:
            script.bad_call(call.name, bad, _honest_mid(rng))
        script.calls(batch, _honest_mid(rng))
    script.answer(plan.answer_text, _honest_final(rng))
    return _make_task(name, index, plan, script.items, len(script.items))


def _build_premature(name: str, index: int, rng: random.Random) -> Task:
    plan = _plan(rng, 1, 4)
    script = _Script()
    script.answer(
        "I already know this: the answer is 42.",
        {"action": "finish", "confidence": round(rng.uniform(0.8, 0.97), 2)},
    )
    for batch in plan.batches:
        script.calls(batch, _honest_mid(rng))
    script.answer(plan.answer_text, _honest_final(rng))
    return _make_task(name, index, plan, script.items, len(script.items))


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


def _replay(task: Task) -> ScriptedModel:
    """The task's script; past its end the model repeats its last response."""
    responses = [response_from_dict(item) for item in task.script]
    position = 0

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        nonlocal position
        response = responses[min(position, len(responses) - 1)]
        position += 1
        return response

    return ScriptedModel(respond, name=f"scripted:{task.id}")


def subjective_converged(metadata: Mapping[str, Any]) -> str | None:
    """Seed 000's naive convergence check; the reason it fires, or None.

    This is the baseline under measurement, never used by the library's loop.
    """
    if metadata.get("action") == "finish":
        return "finish"
    confidence = metadata.get("confidence", 0)
    if isinstance(confidence, int | float) and confidence >= CONFIDENCE_THRESHOLD:
        return "confidence"
    return None


async def _call_tool(tools: Mapping[str, Tool], name: str, arguments: dict[str, Any]) -> str:
    selected = tools.get(name)
    if selected is None:
        return f"unknown tool {name!r}"
    try:
        return await selected.call(arguments)
    except (ToolArgumentsError, ToolError) as exc:
        return f"error: {exc}"


async def _run_subjective(task: Task, world: World, max_cycles: int) -> tuple[str, int]:
    """The naive loop: stop on a finish action or high confidence, else run the calls."""
    model = _replay(task)
    tools = {t.name: t for t in world.tools(task.tools)}
    specs = [t.spec for t in tools.values()]
    messages: list[Message] = [UserMessage(content=task.prompt)]
    for cycle in range(1, max_cycles + 1):
        response = await model.request(messages, specs)
        messages.append(response.to_message())
        reason = subjective_converged(response.metadata)
        if reason is not None:
            return reason, cycle
        for call in response.tool_calls:
            text = await _call_tool(tools, call.name, call.arguments)
            messages.append(ToolResultMessage(tool_call_id=call.id, name=call.name, content=text))
    return StopReason.MAX_CYCLES.value, max_cycles


def _verifier(task: Task, world: World) -> Callable[[str], Verification]:
    def verify(answer: str) -> Verification:
        missing = world.missing(task.needed)
        if missing:
            return Verification(False, "these results are still missing: " + ", ".join(missing))
        if task.answer.casefold() not in answer.casefold():
            return Verification(False, "the answer does not match the tool results")
        return Verification(True)

    return verify


async def _run_objective(
    task: Task, world: World, max_cycles: int, verified: bool
) -> tuple[str, int]:
    agent = Agent(
        _replay(task),
        world.tools(task.tools),
        limits=Limits(max_cycles=max_cycles),
        on_tool_error=task.on_tool_error,
        verifier=_verifier(task, world) if verified else None,
        record_events=False,
    )
    result = await agent.run(task.prompt)
    return result.stop_reason.value, result.cycles


_LOOPING = {StopReason.MAX_CYCLES.value, StopReason.STALLED.value, "budget_exhausted"}


def judge(task: Task, policy: str, stop: str, cycles: int, world: World) -> TaskOutcome:
    """Classify one run against the task's ground truth."""
    made_all = world.attempted(task.needed)
    false_positive = not made_all or cycles < task.done_cycle
    false_negative = not false_positive and (cycles > task.done_cycle or stop in _LOOPING)
    reason_ok = policy == "subjective" or stop == task.expected_stop.value
    return TaskOutcome(
        task=task.id,
        scenario=task.scenario,
        policy=policy,
        stop=stop,
        cycles=cycles,
        false_positive=false_positive,
        false_negative=false_negative,
        correct=not false_positive and not false_negative and reason_ok,
        extra_cycles=max(0, cycles - task.done_cycle),
    )


async def run_task(
    task: Task, policy: Policy, *, max_cycles: int = DEFAULT_MAX_CYCLES
) -> TaskOutcome:
    """Run one task under one policy in a fresh world and judge it."""
    world = World(dict(task.failures))
    if policy == "subjective":
        stop, cycles = await _run_subjective(task, world, max_cycles)
    else:
        stop, cycles = await _run_objective(task, world, max_cycles, policy != "objective")
    return judge(task, policy, stop, cycles, world)


def _stats(outcomes: Sequence[TaskOutcome]) -> PolicyStats:
    return PolicyStats(
        tasks=len(outcomes),
        false_positives=sum(o.false_positive for o in outcomes),
        false_negatives=sum(o.false_negative for o in outcomes),
        correct=sum(o.correct for o in outcomes),
        extra_cycles=sum(o.extra_cycles for o in outcomes),
    )


def summarize(outcomes: Sequence[TaskOutcome]) -> SuiteResult:
    """Aggregate outcomes per policy, per scenario, and over the structural scenarios."""
    policies = list(dict.fromkeys(o.policy for o in outcomes))
    scenarios = list(dict.fromkeys(o.scenario for o in outcomes))
    breakdown = {
        scenario: {
            policy: _stats([o for o in outcomes if o.scenario == scenario and o.policy == policy])
            for policy in policies
        }
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
    return SuiteResult(
        suite="convergence",
        policies=totals,
        breakdown=breakdown,
        details={"structural": structural, "scenario_kinds": kinds},
        notes=(
            f"subjective = seed 000's rule: stop when action == 'finish' or confidence >= "
            f"{CONFIDENCE_THRESHOLD}, checked before the response's tool calls run",
            "objective_verified = the library's loop with an external check of the world "
            "that must pass before 'completed' counts",
            f"every policy has max_cycles={DEFAULT_MAX_CYCLES}; reaching it is a false negative",
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


def run_convergence(
    seed: int = 0,
    per_scenario: int = 10,
    *,
    on_progress: Callable[[TaskOutcome], None] | None = None,
) -> SuiteResult:
    """Synchronous wrapper of `run_convergence_async` returning the summary only."""
    result, _ = asyncio.run(run_convergence_async(seed, per_scenario, on_progress=on_progress))
    return result
