"""The ``live`` suite: convergence tasks a real model can do, run on a real model.

The tasks are the convergence suite's behaviour scenarios that do not depend on
scripted self-reports (1..N calls, parallel lookups, answering at once, no tools, a
tool that fails once). Each runs once through the library's loop with a verifier: an
external check of the world (the needed tool calls happened) and of the answer (it
names what the tools returned). The verifier must pass before ``completed`` counts;
while it fails, its feedback goes back to the model.

Two policies are reported from that one run:

- ``objective``: the loop without the verifier. It would have stopped at the model's
  first answer without tool calls (up to that point the two runs are the same
  requests), so it stopped prematurely when that first answer failed the check.
- ``objective_verified``: the run as it went. Its ``completed`` always passed the check.

A false negative is a run that looped: it hit ``max_cycles`` or stalled. Requests use
temperature 0, so a deterministic backend gives the same answers on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from convergent.agent import Agent
from convergent.bench._world import World
from convergent.bench.convergence import Task, build_tasks
from convergent.bench.report import PolicyStats, SuiteResult
from convergent.exceptions import ConvergentError, UserError
from convergent.extensions import Verification
from convergent.limits import Limits
from convergent.models.base import Model, ModelSettings
from convergent.policy import StopPolicy
from convergent.stop import StopReason

__all__ = [
    "LIVE_MAX_CYCLES",
    "LIVE_SCENARIOS",
    "LiveOutcome",
    "live_tasks",
    "load_live_model",
    "run_live",
    "run_live_task",
]

LIVE_SCENARIOS = (
    "sequential",
    "parallel_batch",
    "done_early",
    "no_tools",
    "tool_failure_recovered",
)
"""Scenarios whose tasks make sense for a real model."""
LIVE_MAX_CYCLES = 12
"""Cycle limit of each live run."""
SYSTEM_PROMPT = (
    "You are a careful assistant that solves tasks with tools. Call a tool whenever the "
    "task needs information you do not have; never guess what a tool would return. When "
    "you have the answer, reply with it in plain text and no tool call."
)

_LOOPING = (StopReason.MAX_CYCLES, StopReason.STALLED, StopReason.BUDGET_EXHAUSTED)


@dataclass(frozen=True, slots=True)
class LiveOutcome:
    """One live task's run."""

    task: str
    """Task id."""
    scenario: str
    """Scenario name."""
    stop: str
    """The run's stop reason."""
    cycles: int
    """Model requests made."""
    checks: tuple[bool, ...]
    """The verifier's verdict on each answer the model gave, in order."""
    tool_calls: int
    """Tool calls executed."""

    @property
    def answered(self) -> bool:
        """The model gave at least one answer without tool calls."""
        return bool(self.checks)

    @property
    def premature(self) -> bool:
        """Its first answer failed the check: the loop alone would have stopped there."""
        return self.answered and not self.checks[0]

    @property
    def looped(self) -> bool:
        """The run hit the cycle limit or stalled."""
        return self.stop in {reason.value for reason in _LOOPING}

    @property
    def verified(self) -> bool:
        """The run ended ``completed`` (the check passed)."""
        return self.stop == StopReason.COMPLETED.value


def live_tasks(seed: int = 0, per_scenario: int = 3) -> list[Task]:
    """The live suite's tasks (the same generator as the convergence suite)."""
    return build_tasks(seed, per_scenario, LIVE_SCENARIOS)


def load_live_model(spec: str) -> Model:
    """Build the model a spec names.

    Raises:
        UserError: If the spec is unknown or the model cannot be set up.
    """
    from convergent.models.registry import model_from_string

    return model_from_string(spec)


def _checker(task: Task, world: World, verdicts: list[bool]) -> Callable[[str], Verification]:
    def verify(answer: str) -> Verification:
        missing = world.missing(task.needed)
        if missing:
            verdict = Verification(
                False, "you answered before getting these tool results: " + ", ".join(missing)
            )
        elif task.answer.casefold() not in answer.casefold():
            verdict = Verification(False, "the answer does not match the tool results")
        else:
            verdict = Verification(True)
        verdicts.append(verdict.passed)
        return verdict

    return verify


async def run_live_task(
    model: Model, task: Task, *, max_cycles: int = LIVE_MAX_CYCLES
) -> LiveOutcome:
    """Run one task on a real model with the external check as verifier."""
    world = World(dict(task.failures))
    verdicts: list[bool] = []
    agent = Agent(
        model,
        world.tools(task.tools),
        system_prompt=SYSTEM_PROMPT,
        limits=Limits(max_cycles=max_cycles),
        policy=StopPolicy(on_tool_error=task.on_tool_error),
        verifier=_checker(task, world, verdicts),
        settings=ModelSettings(temperature=0.0),
        record_events=False,
    )
    result = await agent.run(task.prompt)
    return LiveOutcome(
        task=task.id,
        scenario=task.scenario,
        stop=result.stop_reason.value,
        cycles=result.cycles,
        checks=tuple(verdicts),
        tool_calls=len(result.tool_calls),
    )


def _stats(outcomes: Sequence[LiveOutcome], policy: str) -> PolicyStats:
    if policy == "objective":
        return PolicyStats(
            tasks=len(outcomes),
            false_positives=sum(o.premature for o in outcomes),
            false_negatives=sum(o.looped and not o.answered for o in outcomes),
            correct=sum(o.answered and o.checks[0] for o in outcomes),
        )
    return PolicyStats(
        tasks=len(outcomes),
        false_positives=sum(o.verified and not o.checks[-1] for o in outcomes),
        false_negatives=sum(o.looped for o in outcomes),
        correct=sum(o.verified for o in outcomes),
    )


def summarize(model_name: str, outcomes: Sequence[LiveOutcome], seconds: float) -> SuiteResult:
    """Rates per policy and scenario, plus how often verification caught a premature stop."""
    policies = ("objective", "objective_verified")
    scenarios = list(dict.fromkeys(o.scenario for o in outcomes))
    caught = [o for o in outcomes if o.premature]
    stops: dict[str, int] = {}
    for outcome in outcomes:
        stops[outcome.stop] = stops.get(outcome.stop, 0) + 1
    return SuiteResult(
        suite="live",
        policies={policy: _stats(outcomes, policy) for policy in policies},
        breakdown={
            scenario: {
                policy: _stats([o for o in outcomes if o.scenario == scenario], policy)
                for policy in policies
            }
            for scenario in scenarios
        },
        details={
            "model": model_name,
            "max_cycles": LIVE_MAX_CYCLES,
            "stopped_prematurely": len(caught),
            "looped": sum(o.looped for o in outcomes),
            "verification_caught_premature_stop": len(caught),
            "recovered_after_catch": sum(o.verified for o in caught),
            "stop_reasons": stops,
            "mean_cycles": round(sum(o.cycles for o in outcomes) / max(1, len(outcomes)), 2),
            "runs": [
                {
                    "task": o.task,
                    "stop": o.stop,
                    "cycles": o.cycles,
                    "tool_calls": o.tool_calls,
                    "checks": list(o.checks),
                }
                for o in outcomes
            ],
            "seconds": round(seconds, 1),
        },
        notes=(
            "one run per task with the verifier; 'objective' is that run cut at the first "
            "answer without tool calls, where the loop alone would have stopped",
            "stopped_prematurely = first answer failed the external check (each one was "
            "caught by verification); looped = hit max_cycles or stalled",
        ),
    )


def skipped(reason: str) -> SuiteResult:
    """A live suite result that says why it did not run."""
    return SuiteResult(suite="live", policies={}, skipped=reason)


async def run_live(
    model: Model,
    *,
    seed: int = 0,
    per_scenario: int = 3,
    on_progress: Callable[[LiveOutcome], None] | None = None,
) -> SuiteResult:
    """Run the live tasks on ``model``.

    A failure to bring the model up on the first task (missing weights, a backend that
    cannot start) skips the suite with a one-line reason instead of raising.
    """
    import time

    started = time.perf_counter()
    outcomes: list[LiveOutcome] = []
    try:
        for task in live_tasks(seed, per_scenario):
            try:
                outcome = await run_live_task(model, task)
            except ConvergentError as exc:
                if outcomes:
                    raise
                line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                return skipped(f"model {model.name} is not available: {line}")
            outcomes.append(outcome)
            if on_progress is not None:
                on_progress(outcome)
    finally:
        await model.aclose()
    if all(o.stop == StopReason.MODEL_ERROR.value for o in outcomes):
        return skipped(f"model {model.name} failed every request (model_error)")
    return summarize(model.name, outcomes, time.perf_counter() - started)


def describe_unavailable(spec: str, error: UserError) -> str:
    """One line saying that a live model could not be built."""
    line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return f"model {spec!r} is not available: {line}"
