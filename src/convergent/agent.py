"""The objective agent loop: continue while the model calls tools, stop when it does not.

`Agent.run` is the whole loop. Each step ends in one decision of `convergent.stop.decide`
(`Continue`, `Stop`, `Interrupted`, `Nudge`, `Paused`, `RollOver`), and every run ends
with exactly one `StopReason`. The model's self-reported confidence or ``finish``
action is recorded, never obeyed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, assert_never

from convergent.clock import current_clock
from convergent.durability.protocol import Durability, JournaledRun
from convergent.events import (
    Event,
    EventHandler,
)
from convergent.exceptions import UserError
from convergent.extensions import (
    ActionGate,
    ContextPolicy,
    FollowUpGate,
    RunObserver,
    Verifier,
)
from convergent.limits import Limits, without_legacy
from convergent.loop.agent_tool import DEFAULT_MAX_DEPTH, agent_tool
from convergent.loop.cycle import Run
from convergent.loop.instrument import run_tracer
from convergent.messages import (
    Message,
    SystemMessage,
    UserMessage,
)
from convergent.models.base import Model, ModelSettings
from convergent.output import OutputSpec
from convergent.policy import UNSET, StopPolicy, ToolErrorPolicy, Unset, resolved_policy
from convergent.result import RunResult
from convergent.state import RunState
from convergent.steering import SteeringQueue
from convergent.stop import (
    CONTINUE,
    Continue,
    Decision,
    Interrupted,
    Nudge,
    Paused,
    RollOver,
    Stop,
    StopReason,
)
from convergent.tools import Tool

if TYPE_CHECKING:
    from convergent.mcp.config import MCPServer
    from convergent.mcp.toolset import MCPToolset

__all__ = ["Agent", "RunStream"]


class Agent:
    """A model, its tools and the objective rules that decide when a run stops.

    Args:
        model: The model backend.
        tools: Tools the model may call.
        system_prompt: Instructions placed before the task.
        limits: Cycle, token, time, cost and tool-call budgets.
        policy: The rules that stop a run that makes no progress: repeats, cycles, the
            streaks of failures, mistakes and rejected answers, the notes before a stop,
            the tool-error policy, replies that are not answers (`StopPolicy`).
        on_tool_error: Deprecated: ``StopPolicy(on_tool_error=...)``.
        max_consecutive_tool_errors: Deprecated: ``StopPolicy(max_repeated_failures=...)``.
        final_answer: Deprecated: ``StopPolicy(final_answer=...)``.
        settings: Per-request model settings.
        verifier: Optional external check on the final answer; while it fails, its
            feedback goes back to the model and the run continues.
        output_type: The type the final answer must have (any type pydantic's
            ``TypeAdapter`` accepts): the run is ``completed`` only when the answer is
            JSON that validates, and `RunResult.output_data` holds the value. While it
            does not validate, the errors go back to the model and the run continues
            (see `convergent.output`). Backends with native structured output are
            asked for it.
        output_schema: The same as a JSON Schema (the answer's data is then plain
            JSON); give one of ``output_type`` and ``output_schema``.
        observers: Receive every event with the live state (live views, telemetry).
        context_policy: Optional context compression, run before every model request.
        gate: Optional executive function that reviews proposed tool calls; the tools
            a `FollowUpGate` needs (its ``ask_user``) are offered to the model too.
        record_events: Keep every event on the `RunResult`.
        parallel_tool_calls: Run the calls of one response concurrently (the default);
            False runs them one at a time in call order, for tools that share state.
        workspace: Folder the file tools work in; a durable run snapshots the files a
            ``modifies_files`` tool changes there, so that it can be rewound.
        spec: How to rebuild this agent in another process: the JSON form of the
            `convergent.spec.AgentSpec` it was built from (set by
            `convergent.builder.build_agent`); durable runs store it, so that
            `convergent.resume` can continue them.
        store: Persist every run of this agent here (e.g. a `convergent.RunStore`),
            unless `run` is given another; None runs in memory only.
        instrument: Trace runs with OpenTelemetry (`convergent.telemetry`). None (the
            default): when an OpenTelemetry SDK tracer provider is configured globally,
            checked at the start of each run; True: always, through the global provider;
            False: never. An `OpenTelemetryObserver` in ``observers`` is used instead.
        mcp_servers: MCP tool servers (`convergent.mcp.MCPServer`) whose tools the model
            may call too; they are started when a run starts (or when the agent is
            entered with ``async with``) and stopped when it ends. A server's tool
            named like one of ``tools`` is offered as ``SERVER_TOOL``.

    Raises:
        UserError: For an invalid option or tool list.
    """

    def __init__(
        self,
        model: Model,
        tools: Sequence[Tool] = (),
        *,
        system_prompt: str | None = None,
        limits: Limits | None = None,
        policy: StopPolicy | None = None,
        on_tool_error: ToolErrorPolicy | Unset = UNSET,
        max_consecutive_tool_errors: int | None | Unset = UNSET,
        final_answer: bool | Unset = UNSET,
        settings: ModelSettings | None = None,
        verifier: Verifier | None = None,
        output_type: Any = None,
        output_schema: Mapping[str, Any] | None = None,
        observers: Sequence[RunObserver] = (),
        context_policy: ContextPolicy | None = None,
        gate: ActionGate | None = None,
        record_events: bool = True,
        parallel_tool_calls: bool = True,
        workspace: str | Path | None = None,
        spec: Mapping[str, Any] | None = None,
        store: Durability | None = None,
        instrument: bool | None = None,
        mcp_servers: Sequence[MCPServer] = (),
    ) -> None:
        limits = limits or Limits()
        self.policy = resolved_policy(
            policy,
            limits,
            {
                "on_tool_error": on_tool_error,
                "max_consecutive_tool_errors": max_consecutive_tool_errors,
                "final_answer": final_answer,
            },
        )
        self.limits = without_legacy(limits)
        self.model = model
        # the protocol check is slow (it inspects members), so it is done once, here
        self.follow_up: FollowUpGate | None = gate if isinstance(gate, FollowUpGate) else None
        self._own_tools = tuple(tools)
        self._install_tools(())
        self.mcp_servers = tuple(mcp_servers)
        self._toolset: MCPToolset | None = None
        if self.mcp_servers:
            from convergent.mcp.toolset import MCPToolset  # MCP only for agents with servers

            self._toolset = MCPToolset(self.mcp_servers, reserved=self.tool_names)
        self._entered = 0
        self.system_prompt = system_prompt
        self.output = _output_spec(output_type, output_schema)
        if self.output is not None:
            settings = dataclasses.replace(
                settings or ModelSettings(), output_schema=self.output.schema
            )
        self.settings = settings
        self.verifier = verifier
        self.observers = list(observers)
        self.context_policy = context_policy
        self.gate = gate
        self.record_events = record_events
        self.parallel_tool_calls = parallel_tool_calls
        self.workspace = str(Path(workspace).resolve()) if workspace is not None else None
        if spec is not None and self.output is not None:
            # a resumed run checks its answer against the same schema
            spec = {**spec, "output_schema": self.output.schema}
        self.spec = spec
        self.store = store
        self.instrument = instrument

    @property
    def final_answer(self) -> bool:
        """Whether a stop asks for one more answer (`StopPolicy.final_answer`)."""
        return self.policy.final_answer

    @property
    def on_tool_error(self) -> ToolErrorPolicy:
        """The tool-error policy (`StopPolicy.on_tool_error`)."""
        return self.policy.on_tool_error

    @property
    def max_consecutive_tool_errors(self) -> int | None:
        """`StopPolicy.max_repeated_failures`, by its earlier name."""
        return self.policy.max_repeated_failures

    def _install_tools(self, served: Sequence[Tool]) -> None:
        """Set the tools a run offers: the agent's own, the servers', the gate's."""
        found: dict[str, Tool] = {}
        gate_tools = self.follow_up.tools if self.follow_up is not None else ()
        for item in (*self._own_tools, *served, *gate_tools):
            if item in gate_tools and found.get(item.name) is item:
                continue
            if not isinstance(item, Tool):
                raise UserError(f"not a Tool: {item!r} (decorate the function with @tool)")
            if item.name in found:
                source = item.source or found[item.name].source
                hint = f" (one from {source}: give the MCP server a prefix)" if source else ""
                raise UserError(f"two tools are named {item.name!r}{hint}")
            found[item.name] = item
        self.tools: dict[str, Tool] = found
        self.tool_specs = tuple(t.spec for t in found.values())
        self.tool_names = tuple(found)
        self.terminal_tools = frozenset(n for n, t in found.items() if t.terminal)
        self.read_only_tools = {n: t.read_only for n, t in found.items()}
        self.tool_effects = {n: t.effect for n, t in found.items()}

    async def _start_servers(self) -> None:
        """Start the MCP servers (unless they run) and offer their tools."""
        if self._toolset is not None:
            try:
                self._install_tools(await self._toolset.acquire())
            except BaseException:
                await self._stop_servers()
                raise

    async def _stop_servers(self) -> None:
        """Let go of the MCP servers; the last user stops them and their tools go."""
        if self._toolset is not None:
            await self._toolset.release()
            if not self._toolset.running:
                self._install_tools(())

    @property
    def mcp_toolset(self) -> MCPToolset | None:
        """The toolset that runs the agent's MCP servers (None without servers)."""
        return self._toolset

    def as_tool(
        self,
        name: str,
        description: str,
        *,
        timeout: float | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> Tool:
        """This agent as a tool another agent can call: each call is a child run.

        The tool's arguments are a ``task`` and an optional ``context``. The child runs
        within what is left of the calling run's budgets (cycles, tokens, cost,
        seconds: each at most this agent's own ``limits``), and what it spends (its
        usage, its cycles and its own children's) counts as the caller's, also when it
        does not end. A child that ends ``completed`` gives its answer as the result;
        any other stop is a failed call whose text names the stop reason and holds the
        child's final answer. A stored caller stores the child as its own run, linked to
        the caller's run and call (see ``docs/agents-as-tools.md``).

        Args:
            name: The tool's name.
            description: What the agent does, for the calling model.
            timeout: Seconds a call may take; None (the default): the child's own
                ``max_seconds`` and the caller's remaining time bound it.
            max_depth: A call from a run nested this many agent-tool calls deep fails
                without running (5: five levels of agents below the top-level run).

        Raises:
            ToolDefinitionError: If ``name`` is not a valid tool name.
            UserError: If ``max_depth`` is negative.
        """
        return agent_tool(self, name, description, timeout=timeout, max_depth=max_depth)

    @property
    def models(self) -> dict[str, Model]:
        """The models a run of this agent requests, by role (``model``, ``scorer``...)."""
        found: dict[str, Model] = {"model": self.model}
        for role, owner in (("scorer", self.gate), ("summary", self.context_policy)):
            candidate = getattr(owner, f"{role}_model", None) or getattr(owner, role, None)
            if isinstance(candidate, Model) and candidate is not self.model:
                found[role] = candidate
        return found

    def check_cost_limit(self) -> None:
        """Refuse a cost limit that cannot hold: one of the models has no known price.

        `run` calls it first, and `convergent.builder.build_agent` as soon as the agent is
        built, so that a run from an agent spec is refused before it is announced.

        Raises:
            UserError: If ``limits.max_cost`` is set and a model's price is unknown.
        """
        if self.limits.max_cost is None:
            return
        for model in self.models.values():
            if model.price is None:
                raise UserError(
                    f"max_cost needs a price for {model.name}, and none is known: give one "
                    "with --price IN,OUT or price=(IN, OUT), in US dollars per million input "
                    "and output tokens"
                )

    async def aclose(self) -> None:
        """Release what the agent holds: its MCP servers, its models' connections."""
        while self._entered > 0:
            self._entered -= 1
            await self._stop_servers()
        for model in self.models.values():
            await model.aclose()

    async def __aenter__(self) -> Agent:
        """Start the MCP servers now, so that they serve every run until the exit."""
        await self._start_servers()
        self._entered += 1
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def new_state(self, task: str, *, run_id: str | None = None) -> RunState:
        """The initial state of a run of ``task``."""
        messages: list[Message] = []
        if self.system_prompt:
            messages.append(SystemMessage(content=self.system_prompt))
        messages.append(UserMessage(content=task))
        clock = current_clock()
        return RunState(
            run_id=run_id or clock.new_id(),
            task=task,
            model=self.model.name,
            messages=messages,
            started_at=clock.now(),
        )

    def run_sync(self, task: str, **kwargs: Any) -> RunResult:
        """Run `run` to completion from synchronous code."""
        return asyncio.run(self.run(task, **kwargs))

    def stream(self, task: str, **kwargs: Any) -> RunStream:
        """Run in the background and iterate over its events as they happen."""
        return RunStream(self, task, kwargs)

    async def run(
        self,
        task: str | None = None,
        *,
        run_id: str | None = None,
        state: RunState | None = None,
        steering: SteeringQueue | None = None,
        answers: Mapping[str, str] | None = None,
        on_event: EventHandler | None = None,
        store: Durability | None = None,
    ) -> RunResult:
        """Run the loop until an objective stop condition holds.

        The steps, in order, each cycle:

        1. Take steering: a stop request ends the run (``stopped``); a message is
           delivered as a redirect; a pause waits here.
        2. Check the limits (cycles, tokens, time, cost) before the model request.
        3. Let the context policy compact the conversation if it is near the window.
        4. Request the model (a backend failure ends the run with ``model_error``).
        5. No tool calls: a stop or message that arrived meanwhile comes first (the
           run stops, or the message is delivered and the run goes on); else the
           answer is validated against the output type, if any, then the verifier
           runs, if any; if both pass (or there are none) the run ends ``completed``,
           otherwise the validation errors or the verifier's feedback go back to the
           model.
        6. Let the gate review the proposed calls (it may replace them with ``ask_user``).
        7. Review the calls for repeats without progress: the ``max_repeated_calls``-th
           identical call with the same results while nothing changed (or a short
           cycle of calls repeating) gets a note instead of running, once; if the
           pattern goes on, the run ends ``stalled`` before it runs again.
        8. Journal the calls (durable runs), then run the batch concurrently, results in
           call order, each journaled as it finishes.
        9. Apply the outcomes: a successful terminal tool ends the run ``handed_off``;
           tool failures end it ``tool_error`` per the tool-error policy (a persisting
           streak is nudged once first); a question no channel can answer ends it
           ``needs_user``.
        10. Let a `FollowUpGate` see the results; if the run goes on and a result calls
            for it (an ambiguity, repeated invalid arguments) run the ``ask_user`` call it
            returns.

        Each decision is `convergent.stop.decide`'s, from the facts of that step. After
        a stop for ``max_cycles``, ``stalled``, ``budget_exhausted`` or ``tool_error``,
        one last request without tools asks for the best answer so far (unless
        ``final_answer=False``); it is not a cycle.

        Args:
            task: The task; required unless ``state`` is given.
            run_id: Id for a new run (default: a fresh id from the clock).
            state: A checkpointed state to continue instead of starting afresh.
            steering: Queue of messages / stop / pause requests for this run (default
                with a ``store``: the commands other processes store for the run).
            answers: Results for pending calls when resuming (e.g. the user's reply to
                an ``ask_user`` call that ended the run with ``needs_user``).
            on_event: Called with every event, in order.
            store: Persist the run as it goes (e.g. a `convergent.durability.sqlite.RunStore`), so
                that it can be resumed after a crash or a resumable stop (default: the
                agent's ``store``).

        Raises:
            UserError: On misuse (no task, exhausted `ScriptedModel`, a cost limit with
                a model whose price is unknown...), or an MCP server that cannot be started.
            StorageError: If the store cannot be written.
            RolledOver: When ``steering`` asked to continue the run in a fresh process
                (a Temporal workflow's continue-as-new): the run did not stop.
        """
        if task is None and state is None:
            raise UserError("run() needs a task or a state to resume")
        self.check_cost_limit()
        await self._start_servers()
        try:
            run, outcome = await self._start(
                task, run_id, state, steering, answers, on_event, store
            )
            try:
                while True:
                    match outcome:
                        case Continue():
                            pass
                        case Interrupted(message=message):
                            await run.deliver(message)
                        case Nudge():
                            run.nudge(outcome)
                        case Paused():
                            await run.wait_while_paused()
                        case Stop():
                            return await run.finish(outcome)
                        case RollOver():
                            break
                        case _:
                            assert_never(outcome)
                    outcome = run.boundary()
                    if outcome is CONTINUE:
                        outcome = await run.cycle()
            except BaseException as exc:
                run.failed(exc)
                raise
            raise run.rolled_over()
        finally:
            # also on cancellation (Ctrl-C): no server process outlives its run
            await self._stop_servers()

    async def _start(
        self,
        task: str | None,
        run_id: str | None,
        state: RunState | None,
        steering: SteeringQueue | None,
        answers: Mapping[str, str] | None,
        on_event: EventHandler | None,
        store: Durability | None,
    ) -> tuple[Run, Decision]:
        """Set up a run (fresh or resumed) and finish calls a resumed run left pending.

        Its frame is gone before the loop begins, so a run in flight holds one frame.
        """
        resumed = state is not None
        if state is None:
            assert task is not None
            state = self.new_state(task, run_id=run_id)
        fresh_errors = state.stop_reason is StopReason.TOOL_ERROR
        state.stop_reason, state.stop_detail, state.stop_rule = None, "", ""
        journal = None
        store = store if store is not None else self.store
        if store is not None:
            journal = store.journal(
                JournaledRun(
                    run_id=state.run_id,
                    tools=tuple(self.tools.values()),
                    workspace=self.workspace,
                    spec=self.spec,
                    models=self.models,
                )
            )
            if steering is None:
                steering = journal.steering
        telemetry = run_tracer(self.instrument, self.observers)
        run = Run(self, state, steering, on_event, journal, telemetry, store)
        if fresh_errors:
            # resuming after tool_error is a fresh chance: count failures from here
            run.driver.monitor.reset_errors()
        try:
            await run.start(resumed)
            outcome: Decision = CONTINUE
            if resumed and state.pending_calls():
                outcome = await run.finish_pending(answers or {})
            return run, outcome
        except BaseException as exc:
            run.failed(exc)
            raise


def _output_spec(output_type: Any, output_schema: Mapping[str, Any] | None) -> OutputSpec | None:
    if output_type is not None and output_schema is not None:
        raise UserError("give output_type or output_schema, not both")
    if output_type is not None:
        return OutputSpec.of_type(output_type)
    if output_schema is not None:
        return OutputSpec.of_schema(output_schema)
    return None


@dataclass
class RunStream:
    """Iterate over a run's events while it runs; `result` is set once it ends."""

    agent: Agent
    task: str
    options: dict[str, Any]
    result: RunResult | None = field(default=None, init=False)

    async def __aiter__(self) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def runner() -> RunResult:
            try:
                return await self.agent.run(self.task, on_event=queue.put_nowait, **self.options)
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(runner())
        try:
            while (event := await queue.get()) is not None:
                yield event
            self.result = await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
