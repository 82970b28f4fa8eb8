"""A run as a Temporal workflow: the same `Agent.run`, its side effects as activities.

The loop's decisions (stop reasons, stall counts, limits, the tool-error policy, the
gate) run as workflow code, deterministic under the workflow's clock: replaying the
history reaches the same decisions. Each model request and each tool call is an
activity on a worker: the agent is built by `convergent.builder.build_agent`, as for a
local run, with a model factory and a tool factory whose requests and calls are
activities. Steering arrives as signals; ``ask_user`` waits durably for an ``answer``
signal, with the spec's timeout as a durable timer; the ``progress`` query returns the
run's state and events (long texts as previews).

The conversation stays out of the history: a model request sends only the messages
new since the previous one, after a claim of the conversation in the payload store
(`convergent.temporal._conversation`). A convergent error in the workflow (a spec that
cannot be built, a caller's mistake) fails the workflow, never only its task: a task
that failed on it would fail again at every retry.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from convergent.agent import Agent
    from convergent.builder import BuildContext, ModelRole, Toolbox, build_agent
    from convergent.clock import Clock, use_clock
    from convergent.events import Event, event_to_dict
    from convergent.exceptions import ConvergentError, ModelError
    from convergent.gate.ask import ASK_USER
    from convergent.loop.agent_tool import nesting, spent_cycles, spent_tool_calls
    from convergent.loop.cycle import RolledOver
    from convergent.loop.executor import ClassifiedOutcome
    from convergent.messages import (
        AssistantMessage,
        CallOutcome,
        Message,
        ModelResponse,
        ToolCall,
        ToolSpec,
    )
    from convergent.models._prices import TokenPrice, load_price
    from convergent.models.base import Model, ModelSettings
    from convergent.output import OutputSpec
    from convergent.spec import AgentSpec
    from convergent.state import RunState
    from convergent.steering import SteeringCommand, SteeringKind, SteeringQueue, Taken
    from convergent.temporal._children import child_workflow_tool, spend_details
    from convergent.temporal._payloads import (
        USER_ERROR,
        Blueprint,
        DescribeRun,
        ModelAnswer,
        ModelCall,
        RunStart,
        ToolBlueprint,
        ToolRun,
        dump_call,
        dump_messages,
        dump_settings,
        dump_specs,
        load_response,
    )
    from convergent.tools import Tool

__all__ = ["AgentWorkflow", "MODEL_ATTEMPTS", "WORKFLOW_NAME"]

WORKFLOW_NAME = "convergent.run"
"""Registered name of the run workflow."""

MODEL_ATTEMPTS = 3
"""Attempts of a model request whose failure is transient, before ``model_error``."""

_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
_MODEL_TIMEOUT = timedelta(minutes=10)


class WorkflowClock(Clock):
    """The workflow's deterministic time and ids."""

    __slots__ = ()

    def now(self) -> float:
        """Workflow time, as Unix seconds."""
        return workflow.now().timestamp()

    def monotonic(self) -> float:
        """Workflow time in seconds (replays identically)."""
        return workflow.time()

    def new_id(self) -> str:
        """A seeded random id (the same on replay)."""
        return workflow.uuid4().hex[:12]


class WorkflowSteering(SteeringQueue):
    """Steering from signals; a pause waits on a workflow condition, not a timer.

    At a cycle boundary where the workflow should continue as new (its history is long),
    the queue asks the loop to roll over; the messages stay queued for the next
    workflow run.

    Args:
        roll_over: Whether the workflow should continue as new now.
    """

    def __init__(self, roll_over: Callable[[], bool]) -> None:
        super().__init__()
        self.roll_over = roll_over
        self.rolling = False

    def take(self) -> Taken:
        """The queued commands, and whether to hand the run over now."""
        taken = super().take()
        if not self.rolling and self.roll_over():
            self.rolling = True
            return dataclasses.replace(taken, roll_over=True)
        return taken

    def undelivered(self) -> list[str]:
        """Messages not yet delivered, for the next workflow run."""
        return [command.text for command in SteeringQueue.take(self).messages]

    async def wait_while_paused(self, poll: float = 0.05) -> None:
        """Return once no pause is in force."""
        await workflow.wait_condition(lambda: not self._paused)

    async def wait_for_stop(self, poll: float = 0.1) -> None:
        """Return once a stop signal waits to be taken (a workflow condition, no timer)."""
        await workflow.wait_condition(lambda: self.stopping)


class SignalChannel:
    """Asks the user through the workflow: the question waits for an ``answer`` signal."""

    name = "signal"

    def __init__(self) -> None:
        self.question: str | None = None
        self._answers: deque[str] = deque()

    async def ask(self, question: str) -> str:
        """Publish the question (the ``progress`` query shows it) and wait for the answer."""
        self.question = question
        try:
            await workflow.wait_condition(lambda: bool(self._answers))
            return self._answers.popleft()
        finally:
            self.question = None

    def answer(self, text: str) -> None:
        """Deliver an answer (kept for the next question when none is open)."""
        self._answers.append(text)


class ActivityModel(Model):
    """A model whose every request is an activity on a worker.

    Args:
        spec: The run's agent spec, as JSON (the worker builds the model from it).
        role: Which of the spec's models (``model`` or ``scorer``).
        name: The model's name, as the worker reported it.
        context_window: Its context window, as the worker reported it.
        price: Its price, as the worker reported it.
        checked: Where to keep the workers' verdicts on answers against the run's output
            schema: text -> why it is invalid (None: valid).
    """

    def __init__(
        self,
        spec: dict[str, Any],
        role: str,
        name: str,
        context_window: int | None,
        price: TokenPrice | None = None,
        checked: dict[str, str | None] | None = None,
    ) -> None:
        self.spec = spec
        self.role = role
        self._price = price
        self._name = name
        self._window = context_window
        self._history: dict[str, str] | None = None
        self._sent: list[Message] = []
        self.checked = checked if checked is not None else {}

    @property
    def name(self) -> str:
        """The worker's model name."""
        return self._name

    @property
    def context_window(self) -> int | None:
        """The worker's model's context window."""
        return self._window

    @property
    def price(self) -> TokenPrice | None:
        """The worker's model's price."""
        return self._price

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Run the request as an activity; a failure after its retries is ``model_error``.

        Only the messages new since the previous request travel (after the claim of
        the conversation the store holds); all of them when the conversation changed
        otherwise (compacted), or on the first request.
        """
        sent = self._sent
        fresh = list(messages)
        extends = (
            self._history is not None
            and len(fresh) >= len(sent)
            and all(a is b or a == b for a, b in zip(sent, fresh, strict=False))
        )
        call = ModelCall(
            recipe=self.spec,
            role=self.role,
            messages=dump_messages(fresh[len(sent) :] if extends else fresh),
            tools=dump_specs(list(tools)),
            settings=dump_settings(settings),
            history=self._history if extends else None,
        )
        try:
            answer = await workflow.execute_activity(
                "convergent.model_request",
                call,
                result_type=ModelAnswer,
                start_to_close_timeout=_MODEL_TIMEOUT,
                heartbeat_timeout=_HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(
                    maximum_attempts=MODEL_ATTEMPTS, initial_interval=timedelta(seconds=1)
                ),
            )
        except ActivityError as exc:
            cause = exc.cause if exc.cause is not None else exc
            text = cause.message if isinstance(cause, ApplicationError) else str(cause)
            raise ModelError(text or type(cause).__name__) from None
        self._history, self._sent = answer.history, fresh
        response = load_response(answer.response)
        if answer.output_checked:
            self.checked[response.content] = answer.output_errors
        return response


def _remote(blueprint: ToolBlueprint, spec: dict[str, Any], run_id: str) -> Tool:
    attempts = 3 if blueprint.idempotent else 1
    limit = timedelta(seconds=(blueprint.timeout or 24 * 3600) + 30)

    async def run_on_worker(**arguments: Any) -> str:
        run = ToolRun(
            recipe=spec,
            run_id=run_id,
            call=dump_call(ToolCall(id="worker", name=blueprint.name, arguments=arguments)),
        )
        try:
            kind, text, fatal = await workflow.execute_activity(
                "convergent.tool_call",
                run,
                result_type=list,
                start_to_close_timeout=limit,
                heartbeat_timeout=_HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=attempts),
            )
        except ActivityError as exc:
            raise _classify(blueprint, exc) from None
        if kind == CallOutcome.OK:
            return str(text)
        raise ClassifiedOutcome(CallOutcome(kind), str(text), fatal=bool(fatal))

    # the worker validates the arguments against the real schema and classifies the call
    return Tool.from_schema(
        name=blueprint.name,
        description=blueprint.description,
        parameters=blueprint.parameters,
        function=run_on_worker,
        timeout=None,
        idempotent=blueprint.idempotent,
        terminal=blueprint.terminal,
        read_only=blueprint.read_only,
    )


def _classify(blueprint: ToolBlueprint, exc: ActivityError) -> ClassifiedOutcome:
    """What a tool call whose activity failed means for the run.

    Only a timeout (no heartbeat, no result) means that its worker stopped; an error
    the activity raised is a failure on the worker, fatal when retrying cannot help.
    """
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return ClassifiedOutcome(
            CallOutcome.FAILED,
            f"{blueprint.name} failed on the worker: {cause.message}",
            fatal=cause.non_retryable,
        )
    if blueprint.idempotent:
        return ClassifiedOutcome(
            CallOutcome.FAILED,
            f"{blueprint.name} failed on every worker attempt: {exc.cause or exc}",
        )
    if isinstance(cause, ActivityTimeout):
        return ClassifiedOutcome(
            CallOutcome.INTERRUPTED,
            "interrupted: the worker stopped before this call finished; it was not "
            "retried because the tool is not idempotent",
        )
    return ClassifiedOutcome(
        CallOutcome.INTERRUPTED,
        f"interrupted: {exc.cause or exc}; it was not retried because the tool is not idempotent",
    )


def _run_failure(exc: ActivityError) -> ApplicationError:
    """The failure that ends a run whose agent the workers cannot build."""
    cause = exc.cause
    message = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
    return ApplicationError(message, type=USER_ERROR, non_retryable=True)


PREVIEW_CHARS = 2000
"""Characters of a long text (a tool result, a task) the ``progress`` query shows."""


def _preview(value: Any) -> Any:
    """``value`` with every long text cut to a preview."""
    if isinstance(value, str) and len(value) > PREVIEW_CHARS:
        return f"{value[:PREVIEW_CHARS]}… ({len(value) - PREVIEW_CHARS} more characters)"
    if isinstance(value, dict):
        return {key: _preview(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_preview(item) for item in value]
    return value


class _Recorder:
    """Keeps the run's state and events for the ``progress`` query.

    Long texts are kept as previews, except a run's output: the query answers in one
    message, and what a tool returned is in the run's result.
    """

    receives_deltas = False
    """A workflow's model requests are activities: they do not stream."""

    def __init__(self) -> None:
        self.state: RunState | None = None
        self.events: list[dict[str, Any]] = []

    def on_event(self, event: Event, state: RunState) -> None:
        self.state = state
        data = event_to_dict(event)
        output = data.get("output")
        data = _preview(data)
        if output is not None:
            data["output"] = output
        self.events.append(data)


@workflow.defn(name=WORKFLOW_NAME, failure_exception_types=[ConvergentError])
class AgentWorkflow:
    """One agent run to an objective stop, durable in Temporal."""

    def __init__(self) -> None:
        self.steering = WorkflowSteering(self._roll_over)
        self.channel = SignalChannel()
        self.first_cycle = 0
        self.cycles_per_run: int | None = None
        self.recorder = _Recorder()
        self.finished = False

    @workflow.run
    async def run(self, start: RunStart) -> dict[str, Any]:
        """Run the spec's agent on the task (or continue the given state) to a stop."""
        spec = AgentSpec.from_json(start.recipe)
        self.cycles_per_run = start.cycles_per_run
        self.first_cycle = (start.state or {}).get("cycles", 0)
        for message in start.messages:
            self.steering.send(message)
        if start.paused:
            self.steering.pause()
        # quick and local to the worker: recorded as a marker, not a round trip per task
        try:
            blueprint: Blueprint = await workflow.execute_local_activity(
                "convergent.describe",
                DescribeRun(start.recipe, start.probe),
                result_type=Blueprint,
                start_to_close_timeout=timedelta(minutes=2),
            )
        except ActivityError as exc:
            raise _run_failure(exc) from None
        agent = self._agent(spec, start, blueprint)
        result = None
        with use_clock(WorkflowClock()), nesting(start.depth):
            try:
                if start.state is not None:
                    state = RunState.from_jsonable(start.state)
                    result = await agent.run(
                        state=state, steering=self.steering, answers=start.answers
                    )
                else:
                    result = await agent.run(
                        start.task, run_id=start.run_id, steering=self.steering
                    )
            except RolledOver:
                pass  # the run goes on in a fresh workflow run, below
            except ConvergentError as exc:
                raise self._failure(str(exc), type(exc).__name__) from None
            except asyncio.CancelledError:
                if workflow.info().parent is None:
                    raise
                # a child cancelled as its call timed out: its caller counts its spend
                raise self._failure("the run was cancelled by its caller", "Cancelled") from None
        final = self.recorder.state
        assert final is not None
        if result is None:
            workflow.continue_as_new(
                RunStart(
                    recipe=start.recipe,
                    run_id=start.run_id,
                    state=final.to_jsonable(),
                    messages=self.steering.undelivered(),
                    paused=self.steering.paused,
                    cycles_per_run=start.cycles_per_run,
                    probe=start.probe,
                    depth=start.depth,
                )
            )
        self.finished = True
        workflow.upsert_memo({"stop_reason": result.stop_reason.value, "cycles": result.cycles})
        # the result is the final state's (the client rebuilds it): the conversation once
        return {"state": final.to_jsonable(), "recipe": start.recipe}

    def _failure(self, message: str, kind: str) -> ApplicationError:
        """The failure that ends a run before its stop, with what it had spent."""
        state = self.recorder.state
        spent = (
            ()
            if state is None
            else (spend_details(state.usage, spent_cycles(state), spent_tool_calls(state)),)
        )
        return ApplicationError(message, *spent, type=kind, non_retryable=True)

    def _agent(self, spec: AgentSpec, start: RunStart, blueprint: Blueprint) -> Agent:
        """The spec's agent, built as for a local run, its models and tools on workers.

        Its answers are checked against its output schema by the workers, in time; the
        workflow takes their verdicts, and checks in steps only what they did not (an
        answer joined from replies cut at the token limit).
        """
        checked: dict[str, str | None] = {}

        def on_workers(role: ModelRole) -> Model:
            if role == "model" or blueprint.scorer_name is None:
                name, price = blueprint.model_name, blueprint.model_price
            else:
                name, price = blueprint.scorer_name, blueprint.scorer_price
            window = blueprint.context_window if role == "model" else None
            verdicts = checked if role == "model" else None
            return ActivityModel(start.recipe, role, name, window, load_price(price), verdicts)

        def worker_tools(spec: AgentSpec) -> Toolbox:
            # ask_user is the workflow's own: its questions wait for the ``answer`` signal;
            # an agent called as a tool is a child workflow
            children = {child.name: child for child in spec.agents}
            return Toolbox(
                tools=[
                    _remote(tool, start.recipe, start.run_id)
                    if tool.name not in children
                    else child_workflow_tool(children[tool.name], spec.workspace, WORKFLOW_NAME)
                    for tool in blueprint.tools
                    if tool.name != ASK_USER
                ],
                system_prompt=blueprint.system_prompt,
            )

        agent = build_agent(
            spec,
            context=BuildContext(run_id=start.run_id, ask_channel=self.channel),
            model_factory=on_workers,
            tool_factory=worker_tools,
            observers=[self.recorder],
            # a workflow replays its history: spans made here would repeat on every replay
            instrument=False,
            record_events=False,
        )
        if agent.output is not None:
            agent.output = OutputSpec.of_schema(agent.output.schema, seconds=None, checked=checked)
        return agent

    def _roll_over(self) -> bool:
        """Whether to hand the run over to a fresh workflow run at this boundary.

        Never when the model has just answered without tool calls: the run is finishing.
        """
        state = self.recorder.state
        if state is None:
            return False
        last = state.messages[-1] if state.messages else None
        if isinstance(last, AssistantMessage) and not last.tool_calls:
            return False
        if self.cycles_per_run is not None:
            return state.cycles - self.first_cycle >= self.cycles_per_run
        return workflow.info().is_continue_as_new_suggested()

    @workflow.signal(name="steer")
    def steer(self, kind: str, text: str = "") -> None:
        """A steering command: ``message``, ``stop``, ``pause`` or ``resume``."""
        try:
            command = SteeringCommand(SteeringKind(kind), text)
        except ValueError:
            workflow.logger.warning("ignored unknown steering command %r", kind)
            return
        self.steering.put(command)

    @workflow.signal(name="answer")
    def answer(self, text: str) -> None:
        """The user's answer to the question ``ask_user`` waits on."""
        self.channel.answer(text)

    @workflow.query(name="progress")
    def progress(self, after: int = 0) -> dict[str, Any]:
        """The run so far: cycles, usage, the open question, and the events after ``after``."""
        state = self.recorder.state
        return {
            "running": not self.finished,
            "cycles": state.cycles if state is not None else 0,
            "usage": (
                {
                    "input_tokens": state.usage.input_tokens,
                    "output_tokens": state.usage.output_tokens,
                    "cost": state.usage.cost,
                }
                if state is not None
                else {}
            ),
            "question": self.channel.question,
            "events": self.recorder.events[after:],
            "event_count": len(self.recorder.events),
        }
