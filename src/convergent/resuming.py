"""`resume`: continue a stored run from any process, rebuilding its agent from its spec.

A run started from Python (``build_agent(spec).run(task, store=store)``) or from the
command line (``convergent run``) stores its `AgentSpec`; ``resume(run_id)`` reads it
back, builds the same agent and continues where the run stopped, from Python or from
``convergent resume`` alike. Runs stored by earlier versions (a spec of an earlier
shape, or the settings of convergent 0.1's command line) are read as specs.

A resumption first claims the run (`RunStore.claim`), before anything else happens: of
any number of processes or tasks resuming one run at once, one continues it and the
others are refused with ``run ID is running (pid N)``, their answers and messages unused.

`resume` is the one way a stored run goes on: ``convergent.resume`` (with an agent
given, or rebuilt from the run's spec), ``convergent resume`` (through `prepare_resume`, to
run it in its terminal session) and the web console (which starts ``convergent
resume``). It rebuilds agents from specs, so this module sits beside the builder,
above the loop and its durability backends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent._run_id import check_run_id
from convergent.agent import Agent
from convergent.builder import BuildContext, build_agent
from convergent.durability.sqlite import (
    DEFAULT_DB_PATH,
    PendingQuestion,
    RunClaim,
    RunStore,
    RunSummary,
)
from convergent.events import EventHandler
from convergent.exceptions import UserError
from convergent.limits import Limits
from convergent.loop.budget import added, budgets_used, check_room, renewed
from convergent.models.base import Replayable
from convergent.result import RunResult
from convergent.spec import AgentSpec, command_line_tools
from convergent.state import RunState
from convergent.steering import SteeringQueue

__all__ = [
    "Continuation",
    "added",
    "answers_for",
    "budgets_used",
    "check_room",
    "pending_answers",
    "prepare_resume",
    "renewed",
    "resumable_run",
    "resume",
    "spec_of",
    "steerable_run",
]
"""``added``, ``budgets_used``, ``check_room`` and ``renewed`` are `convergent.loop.budget`'s,
named here too: they say how a resumed run's budgets count."""


def spec_of(run: RunSummary) -> AgentSpec:
    """The spec stored with a run (runs from convergent 0.1 stored CLI settings instead).

    Raises:
        UserError: If the run has no spec, or one from a newer convergent.
    """
    if run.spec is not None:
        return AgentSpec.from_json(run.spec)
    if run.config:
        return _from_settings(run.config)
    raise UserError(
        f"run {run.run_id!r} has no agent spec; resume it from Python with the agent that "
        "started it: convergent.resume(run_id, store=store, agent=agent)"
    )


def _from_settings(config: Mapping[str, Any]) -> AgentSpec:
    """A spec from the settings convergent 0.1's ``run`` stored.

    Raises:
        UserError: If they do not describe a valid agent.
    """
    model = config.get("model")
    gate = config.get("gate")
    return AgentSpec.from_json(
        {
            "model": model,
            "base_url": config.get("base_url"),
            "protocol": config.get("protocol"),
            "temperature": config.get("temperature"),
            "system_prompt": config.get("system") or None,
            "tools": command_line_tools(
                model if isinstance(model, str) else "",
                allow_writes=bool(config.get("allow_writes")),
            ),
            "workspace": config.get("workspace"),
            "skills": config.get("skills") or (),
            "gate": (
                {"threshold": gate, "model": config.get("gate_model")} if gate is not None else None
            ),
            "ask_via": config.get("ask_via") or "none",
            "ask_timeout": config.get("ask_timeout") or 300.0,
            "policy": {
                "on_tool_error": "stop" if config.get("tool_error") == "stop" else "continue"
            },
        }
    )


def resumable_run(store: RunStore, run_id: str) -> RunSummary:
    """The summary of a run that may be resumed now.

    Raises:
        UserError: If it is unknown, running, or ended ``completed``.
    """
    run = store.get_run(run_id)
    if run.running:
        raise UserError(f"run {run_id!r} is running (pid {run.pid})")
    if not run.resumable:
        reason = run.stop_reason.value if run.stop_reason else run.status
        raise UserError(f"run {run_id!r} ended {reason}; there is nothing to resume")
    return run


def steerable_run(store: RunStore, run_id: str) -> RunSummary:
    """The summary of a run that can still take a message: running, or resumable.

    A message to a stopped run waits for ``resume``; a completed run is never resumed, so
    a message to it would never be read.

    Raises:
        UserError: If it is unknown or ended ``completed``.
    """
    run = store.get_run(run_id)
    if not run.running and not run.resumable:
        raise UserError(
            f"run {run_id!r} ended completed; there is nothing to steer "
            "(convergent resume continues only runs that did not complete)"
        )
    return run


def pending_answers(store: RunStore, run_id: str, answer: str | None) -> dict[str, str]:
    """``answer`` for every question the run waits on, by call id.

    Raises:
        UserError: If an answer is given to a run that asked nothing, or is missing.
    """
    return answers_for(run_id, store.pending_questions(run_id), answer)


def answers_for(
    run_id: str, questions: Sequence[PendingQuestion], answer: str | None
) -> dict[str, str]:
    """``answer`` for each of ``questions`` (what run ``run_id`` waits on), by call id.

    Every backend that resumes runs (SQLite here, Temporal's runner) checks answers with it.

    Raises:
        UserError: If an answer is given to a run that asked nothing, or is missing.
    """
    if not questions:
        if answer is not None:
            raise UserError(f"run {run_id!r} is not waiting for an answer")
        return {}
    if answer is None:
        raise UserError(
            f"run {run_id!r} waits for an answer to: {questions[0].question} "
            "(pass --answer TEXT, or answer= in Python)"
        )
    return {question.call_id: answer for question in questions}


@dataclass(frozen=True, slots=True)
class Continuation:
    """A stored run, ready to go on: its agent, its state and the answers given."""

    agent: Agent
    """The agent that continues it (rebuilt from its spec unless one was given)."""
    state: RunState
    """The state to continue."""
    answers: dict[str, str]
    """Replies to the questions it waits on, by call id."""
    claim: RunClaim
    """The claim on the run, which `run` continues it under and then releases."""

    async def run(
        self, *, on_event: EventHandler | None = None, steering: SteeringQueue | None = None
    ) -> RunResult:
        """Continue the run under the claim; the claim is released when it ends.

        Args:
            on_event: Called with every event, in order.
            steering: Steering queue (default: the commands stored for the run).
        """
        try:
            return await self.agent.run(
                state=self.state,
                answers=self.answers,
                on_event=on_event,
                steering=steering,
                store=self.claim,
            )
        finally:
            self.claim.release()


def prepare_resume(
    store: RunStore,
    run_id: str,
    *,
    agent: Agent | None = None,
    answer: str | None = None,
    answers: Mapping[str, str] | None = None,
    message: str | None = None,
    limits: Limits | None = None,
    model: str | None = None,
    claim: RunClaim | None = None,
    handed: str | None = None,
    price: tuple[float, float] | None = None,
) -> Continuation:
    """Claim the run and get everything `resume` needs, without running.

    The claim comes first: nothing is recorded or queued for a run that another process
    or task holds. If anything after it fails, the claim is released.

    Args:
        store: The run store.
        run_id: The run.
        agent: The agent to continue it with (default: the one its stored spec describes).
        answer: The reply to the question it waits on.
        answers: Replies by call id, instead of ``answer`` (given as they are).
        message: New instructions, queued for its next cycle.
        limits: Budgets instead of the spec's (with the spec's agent), counted from the
            run's start; default: the spec's, each one the run used up granted once
            more (`renewed`).
        model: A model spec instead of the spec's (without the spec's price).
        claim: A claim already taken on the run (default: one is taken now).
        handed: The token of a claim another process took for this one (the console's):
            taken over only once the agent is built, so that a resume that cannot start
            never shows the run as going on.
        price: The model's price, (input, output) in US dollars per million tokens,
            instead of the spec's.

    Raises:
        UserError: If the run cannot be resumed, ``run_id`` is not a valid id, another
            process or task holds the run, ``agent`` comes with spec changes, or the
            budgets leave the run no room (`check_room`).
    """
    check_run_id(run_id)
    if agent is not None and (limits, model, price) != (None, None, None):
        raise UserError("give resume() an agent, or changes to the stored spec, not both")
    if answer is not None and answers is not None:
        raise UserError("give resume() an answer or answers by call id, not both")
    if claim is not None and handed is not None:
        raise UserError("give prepare_resume() a claim or a handed claim's token, not both")
    held = claim if claim is not None or handed is not None else store.claim(run_id)
    try:
        state = store.load(run_id)
        if agent is None:
            agent = _rebuilt(store, state, limits=limits, model=model, price=price)
        if held is None:
            held = store.claim(run_id, token=handed)
        if answers is None:
            answers = pending_answers(store, run_id, answer)
        if message is not None:
            if not message.strip():
                raise UserError("the message is empty")
            store.send_steering(run_id, "message", message)
        return Continuation(agent, state, dict(answers), held)
    except BaseException:
        if held is not None:
            held.release()
        raise


def _rebuilt(
    store: RunStore,
    state: RunState,
    *,
    limits: Limits | None,
    model: str | None,
    price: tuple[float, float] | None,
) -> Agent:
    """The agent the run's stored spec describes, with the changes asked for.

    Raises:
        UserError: If its budgets (``limits``, else the spec's renewed) leave it no room.
    """
    run_id = state.run_id
    spec = spec_of(store.get_run(run_id))
    chosen = limits if limits is not None else renewed(spec.limits, state)
    check_room(chosen, state)
    changes: dict[str, Any] = {}
    if model is not None:
        changes["model"] = model
        changes["price"] = None  # the stored price was the stored model's
    if price is not None:
        changes["price"] = price
    if chosen != spec.limits:
        changes["limits"] = chosen
    if changes:
        spec = spec.model_copy(update=changes)
    agent = build_agent(spec, context=BuildContext(run_id=run_id, store=store))
    if model is None:
        # the spec rebuilt the same scripts: each goes on after the responses it gave
        positions = store.model_positions(run_id)
        for role, rebuilt in agent.models.items():
            if isinstance(rebuilt, Replayable) and role in positions:
                rebuilt.seek(positions[role])
    return agent


async def resume(
    run_id: str,
    *,
    store: RunStore | str | Path = DEFAULT_DB_PATH,
    agent: Agent | None = None,
    answer: str | None = None,
    answers: Mapping[str, str] | None = None,
    message: str | None = None,
    limits: Limits | None = None,
    model: str | None = None,
    on_event: EventHandler | None = None,
    steering: SteeringQueue | None = None,
    price: tuple[float, float] | None = None,
) -> RunResult:
    """Continue a stored run where it stopped: the one way every caller resumes.

    ``convergent.resume`` (from Python), ``convergent resume`` and the web console
    (which starts ``convergent resume``) all come here. The run is claimed first, so
    that of any number of resumptions at once exactly one goes on.

    Args:
        run_id: The run.
        store: The run store, or the path of its database.
        agent: Continue with this agent (default: rebuild the one its stored spec
            describes, and close it when the run ends).
        answer: The reply to the question the run stopped ``needs_user`` on.
        answers: Replies by call id, instead of ``answer``.
        message: New instructions, delivered before its next cycle.
        limits: Budgets for the continued run, as everywhere counted from the run's
            start (``Limits(max_cycles=60)`` after 50 cycles allows 10 more); default:
            the spec's, with each budget the run used up granted once more, so that a
            run that stopped ``max_cycles`` or ``budget_exhausted`` goes on.
        model: Continue with this model spec instead of the spec's.
        on_event: Called with every event, in order.
        steering: Steering queue (default: the commands stored for the run).
        price: The model's price, (input, output) in US dollars per million tokens,
            instead of the spec's (a run keeps the price it was started with).

    Raises:
        UserError: If the run cannot be resumed (unknown, completed, waiting for an
            answer that was not given, spec from a newer convergent, an invalid run
            id, budgets that leave it no room), or another process or task is running it
            (``run ID is running (pid N)``).
    """
    check_run_id(run_id)
    opened = store if isinstance(store, RunStore) else RunStore(store)
    try:
        ready = prepare_resume(
            opened,
            run_id,
            agent=agent,
            answer=answer,
            answers=answers,
            message=message,
            limits=limits,
            model=model,
            price=price,
        )
        if agent is not None:
            return await ready.run(on_event=on_event, steering=steering)
        async with ready.agent:
            return await ready.run(on_event=on_event, steering=steering)
    finally:
        if opened is not store:
            opened.close()
