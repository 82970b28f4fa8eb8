"""The side effects of a run, as Temporal activities on a worker.

A worker builds each spec's agent once (its models and tools, with
`convergent.builder.build_agent`; its MCP servers started when first needed, and again
by the next call that needs one that has ended) and runs,
for the workflows that drive it: the description of the agent, one model request, one
tool call, and the wait for the result of a child run an earlier attempt started. A
tool call is classified exactly as in a local run (`convergent.loop.executor.invoke`), and
reports a heartbeat while it runs, so that a worker that dies is noticed within seconds
instead of at the tool's timeout.

A caller's mistake (a spec this worker cannot build) fails an activity for good:
retrying cannot mend it. Anything else (a worker that dies, a store that is busy) is
retried by Temporal.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from convergent.agent import Agent
from convergent.builder import build_agent
from convergent.exceptions import ModelError, ModelHTTPError, UserError
from convergent.loop.executor import invoke
from convergent.messages import CallOutcome
from convergent.models._deadline import RequestTimedOut
from convergent.models._prices import dump_price
from convergent.models.base import Model
from convergent.models.scripted import ScriptedModel
from convergent.models.structured import StructuredToolCalling
from convergent.spec import AgentSpec
from convergent.temporal._children import CHILD_RESULT
from convergent.temporal._conversation import ConversationLog
from convergent.temporal._payloads import (
    TOO_LARGE,
    USER_ERROR,
    Blueprint,
    DescribeRun,
    ModelAnswer,
    ModelCall,
    ToolBlueprint,
    ToolRun,
    dump_response,
    item_too_large,
    load_call,
    load_settings,
    load_specs,
)
from convergent.temporal._store import read_probe

__all__ = ["HEARTBEAT_SECONDS", "AgentCache", "Activities"]

HEARTBEAT_SECONDS = 1.0
"""How often a running tool call reports that its worker is alive."""

T = TypeVar("T")


class AgentCache:
    """One agent per distinct spec, built on first use and closed with the worker.

    A spec's MCP servers are started by the first activity that needs its tools, once
    per worker, and serve every run of that spec on the worker until it shuts down. A
    server that has ended meanwhile (crashed, killed) is started afresh by the next call
    of one of its tools, what was left of it stopped first.
    """

    def __init__(self) -> None:
        self._agents: dict[str, Agent] = {}
        self._serving: dict[str, asyncio.Lock] = {}
        self._started: set[str] = set()

    @staticmethod
    def _key(spec: dict[str, Any]) -> str:
        # no activity reads an agent's limits, and each call of an agent tool cuts them
        # to what its caller has left: one agent (and one set of servers) for all of them
        return json.dumps({k: v for k, v in spec.items() if k != "limits"}, sort_keys=True)

    def agent(self, spec: dict[str, Any]) -> Agent:
        """The agent ``spec`` (an `AgentSpec` as JSON) describes."""
        key = self._key(spec)
        agent = self._agents.get(key)
        if agent is None:
            agent = self._agents[key] = _build(spec)
            if agent.mcp_toolset is not None:
                agent.mcp_toolset.restart = True
        return agent

    async def with_servers(self, spec: dict[str, Any]) -> Agent:
        """The agent ``spec`` describes, its MCP servers started and their tools offered.

        Raises:
            UserError: If a server cannot be started (the next activity tries again).
        """
        agent = self.agent(spec)
        key = self._key(spec)
        if not agent.mcp_servers or key in self._started:
            return agent
        async with self._serving.setdefault(key, asyncio.Lock()):
            if key not in self._started:
                await agent.__aenter__()
                self._started.add(key)
        return agent

    def model(self, spec: dict[str, Any], role: str) -> Model:
        """The model of ``role``; a scripted one is fresh for each request.

        A script must give the reply the workflow is at, whichever worker runs the
        request and however often it is retried: a fresh one finds its place in the
        conversation it is sent (see `convergent.models.scripted`).
        """
        model = _role(self.agent(spec), role)
        if not _scripted(model):
            return model
        return _role(_build(spec), role)

    async def aclose(self) -> None:
        """Close every agent's models and stop their MCP servers."""
        agents, self._agents = list(self._agents.values()), {}
        self._started.clear()
        for agent in agents:
            with suppress(Exception):
                await agent.aclose()


def _role(agent: Agent, role: str) -> Model:
    """The model of ``role`` (a gate without a model of its own scores with the agent's).

    An agent lists a role apart only when its model is not the agent's own.
    """
    return agent.models.get(role, agent.model)


def _scripted(model: Model) -> bool:
    """Whether ``model`` plays a script (itself, or under the structured protocol)."""
    inner = model.inner if isinstance(model, StructuredToolCalling) else model
    return isinstance(inner, ScriptedModel)


def _build(spec: dict[str, Any]) -> Agent:
    # questions to the user are asked by the workflow (answered by signal), never here
    return build_agent(AgentSpec.from_json(spec).model_copy(update={"ask_via": "none"}))


@contextmanager
def _final_user_errors() -> Iterator[None]:
    """A `UserError` fails the activity for good: the same spec fails again anywhere."""
    try:
        yield
    except UserError as exc:
        raise ApplicationError(str(exc), type=USER_ERROR, non_retryable=True) from None


async def _heartbeating(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work``, heartbeating meanwhile; cancelling the activity cancels it."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            activity.heartbeat()
            await asyncio.wait({task}, timeout=HEARTBEAT_SECONDS)
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return task.result()


def _clip(text: str, limit: int = 4000) -> str:
    """An error text short enough to travel in a failure (which has no payload store)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _retryable(exc: ModelError) -> bool:
    """Whether Temporal retries a failed request: a transient failure, yes.

    A request the provider refuses is not retried, nor one that had its whole time (the
    run's time left, or the backend's timeout).
    """
    if isinstance(exc, RequestTimedOut):
        return False
    if isinstance(exc, ModelHTTPError):
        return exc.status_code == 429 or exc.status_code >= 500
    return True


class Activities:
    """The activities of one worker, sharing its agents and the payload store.

    Args:
        log: The conversations, in the payload store the workers share.
        cache: The worker's agents.
    """

    def __init__(self, log: ConversationLog, cache: AgentCache | None = None) -> None:
        self.log = log
        self.cache = cache or AgentCache()

    @activity.defn(name="convergent.describe")
    async def describe(self, start: DescribeRun) -> Blueprint:
        """What the workflow needs to drive the spec's agent: prompt, model, tools.

        It first reads the client's probe back, so that a worker whose payload store is
        not the client's fails the run at once, saying so.
        """
        if start.probe is not None:
            await read_probe(self.log.driver, start.probe)
        with _final_user_errors():
            agent = await self.cache.with_servers(start.recipe)
        scorer = agent.models.get("scorer")
        return Blueprint(
            model_name=agent.model.name,
            context_window=agent.model.context_window,
            system_prompt=agent.system_prompt,
            tools=[
                ToolBlueprint(
                    name=tool.name,
                    description=tool.description,
                    parameters=tool.parameters,
                    timeout=tool.timeout,
                    idempotent=tool.idempotent,
                    modifies_files=tool.modifies_files,
                    terminal=tool.terminal,
                    read_only=tool.read_only,
                )
                for tool in agent.tools.values()
            ],
            scorer_name=scorer.name if scorer is not None else None,
            model_price=dump_price(agent.model.price),
            scorer_price=dump_price(scorer.price) if scorer is not None else None,
        )

    @activity.defn(name="convergent.model_request")
    async def model_request(self, call: ModelCall) -> ModelAnswer:
        """One model request; a failure after the backend's retries is retried here.

        The conversation is the stored one (``call.history``) followed by the new
        messages, which are stored after it for the next request to extend. It
        heartbeats while the model works, so that a worker that dies mid-request is
        noticed in seconds and the request is retried on another worker.
        """
        with _final_user_errors():
            model = self.cache.model(call.recipe, call.role)
            history, messages = await _heartbeating(self.log.extend(call.history, call.messages))
            try:
                response = await _heartbeating(
                    model.request(messages, load_specs(call.tools), load_settings(call.settings))
                )
            except ModelError as exc:
                raise ApplicationError(
                    _clip(str(exc)), type="ModelError", non_retryable=not _retryable(exc)
                ) from None
        dumped = dump_response(response)
        refused = item_too_large("the model's reply", json.dumps(dumped, ensure_ascii=False))
        if refused is not None:
            raise ApplicationError(refused, type=TOO_LARGE, non_retryable=True)
        answer = ModelAnswer(response=dumped, history=history)
        output = self.cache.agent(call.recipe).output if call.role == "model" else None
        if output is not None and not response.tool_calls:
            # here, not in the workflow: the check is bounded in seconds, and its verdict
            # travels in the history, so that a replay reads it instead of checking again
            verdict = await asyncio.to_thread(output.check, response.content)
            answer.output_checked, answer.output_errors = True, verdict.errors
        return answer

    @activity.defn(name="convergent.tool_call")
    async def tool_call(self, run: ToolRun) -> list[Any]:
        """One tool call, classified as in a local run: ``[outcome, text, fatal]``.

        A result over the limit on one item is not returned: the call fails, fatally,
        with a text that names the limit.
        """
        with _final_user_errors():
            tools = (await self.cache.with_servers(run.recipe)).tools
        call = load_call(run.call)
        kind, text, fatal = await _heartbeating(invoke(call, tools))
        refused = item_too_large(f"the result of {call.name}", text)
        if refused is not None:
            return [CallOutcome.FAILED.value, f"{refused}; it was dropped", True]
        return [kind.value, text, fatal]

    @activity.defn(name=CHILD_RESULT)
    async def child_result(self, run_id: str) -> dict[str, Any]:
        """The result of the child run ``run_id``, started earlier, once it has one."""
        handle = activity.client().get_workflow_handle(run_id)
        try:
            done: dict[str, Any] = await _heartbeating(handle.result())
        except WorkflowFailureError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError):  # its details: what the child spent
                raise ApplicationError(
                    _clip(cause.message), *cause.details, non_retryable=True
                ) from None
            raise ApplicationError(_clip(str(cause)), non_retryable=True) from None
        return done

    def all(self) -> list[Any]:
        """The activity callables to register with a worker."""
        return [self.describe, self.model_request, self.tool_call, self.child_result]
