"""Convergent's stop decisions in the OpenAI Agents SDK.

`Convergence` drives a `CycleDriver` through the SDK's documented seams, in the loop's
order: `RunHooks` count each model request and review its tool calls before they run;
a tool input guardrail gives a stalled call the nudge as its result instead of
running it (``reject_content``); ``RunConfig.tool_error_formatter`` tells a failure
from a result; the agent's ``tool_use_behavior`` callable judges each finished batch
(a hand-off, tool errors) and the limits before the next request, and ends the run
with a final output: the model's best answer, asked for once without tools. The
``max_turns`` error handler turns the SDK's own turn limit into the same kind of end,
so no run ends in `MaxTurnsExceeded`. ``call_model_input_filter`` adds the budget
note and a tool-error nudge to the next request.

The SDK ends its run at the first answer without tool calls, and validates a typed
answer (the agent's ``output_type``) without sending an invalid one back. `run` and
`run_sync` give such an answer the loop's treatment: an answer the SDK validated is
judged by the verifier (and ``output``, if given); one it rejected (the
``invalid_final_output`` error handler) or one that failed a check goes back to the
model, with why, in a continuation of the same conversation (``to_input_list`` and a
new user message, the SDK's own way of continuing a run), until it passes or a stop
ends the run.

Install with ``pip install convergent[openai-agents]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    RunResult,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolsToFinalOutputResult,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.exceptions import AgentsException, MaxTurnsExceeded, ModelBehaviorError
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem
from agents.mcp import MCPServer
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
from agents.run_error_handlers import RunErrorHandlerInput, RunErrorHandlerResult
from agents.tool import FunctionToolResult
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputRefusal,
)

from convergent._json import UnusableJson, load_json
from convergent.adapters import PolicyAdapted
from convergent.adapters._policy import settled, told
from convergent.effects import Declared, Effect, annotated_effect
from convergent.exceptions import ConvergentError, UserError
from convergent.limits import Limits
from convergent.loop.driver import CycleDriver, PolicyOptions
from convergent.loop.ending import FinalRequest, StopReport
from convergent.loop.executor import failure_result
from convergent.messages import CallOutcome, ToolCall, Usage
from convergent.models._prices import PriceLike, priced_for_limit
from convergent.stop import Facts, LimitReached, Nudge, Stop, StopReason

__all__ = ["ConvergedRun", "Convergence", "StoppedBeforeRequest", "run", "run_sync"]


class StoppedBeforeRequest(ConvergentError):  # noqa: N818  (a stop, not a failure)
    """The run stopped before a model request that no hook of the SDK could end it at.

    A batch whose every call names a tool the agent lacks never reaches the agent's
    ``tool_use_behavior``: its step is judged before the next request, and a stop there
    ends `Runner.run` with this. `run` catches it and ends the run as any other stop;
    wired by hand, pass it to `Convergence.finish_stopped`.
    """

    def __init__(self, history: list[TResponseInputItem]) -> None:
        super().__init__("the run stopped before its next model request")
        self.history = history
        """The conversation so far, for the request for the answer after the stop."""


@dataclass(frozen=True, slots=True)
class ConvergedRun:
    """An SDK run that ended for one of convergent's reasons."""

    result: RunResult | None
    """The SDK's own result: of the run's last part (answers sent back continue the run
    in a new part), or of the request for the answer after a stop, when that ended it;
    None when neither came back."""
    report: StopReport
    """How it ended: the typed reason, the cycle, the final answer."""
    final_output: Any
    """The run's final output: a value of the agent's ``output_type`` once ``completed``;
    after another stop, the answer after the stop for a text agent and None for a typed
    one (the answer in words is the report's ``output``)."""


class Convergence:
    """The stop decisions of one SDK run (make one per run: a second run is refused).

    `run` and `run_sync` wire it; to wire it yourself::

        convergence = Convergence(Limits(max_cycles=8))
        result = await Runner.run(
            convergence.agent(agent), task, hooks=convergence.hooks,
            run_config=convergence.run_config(), error_handlers=convergence.error_handlers,
            max_turns=convergence.max_turns,
        )
        report = await convergence.judge(result)  # None: the answer was sent back

    Wired by hand, an answer that a verifier, ``output`` or the SDK's own validation
    rejects ends the SDK's run without a report (the feedback waits in `feedback`, and
    the SDK raises its ``ModelBehaviorError`` for a typed answer it rejected); `run`
    continues the conversation with it.

    Args:
        limits: Budgets and thresholds; ``max_cycles`` counts model requests.
        price: The model's price (`TokenPrice` or ``(input, output)`` in US dollars per
            million tokens): the host reports tokens, not cost, so each response is
            costed at it. Required with ``max_cost``.
        **options: The rest of the stop policy (`convergent.loop.driver.PolicyOptions`); the
            final answer's run gets ``max_tokens`` set to what a token or cost budget
            leaves.

    Raises:
        UserError: For ``max_cost`` without a ``price``.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        price: PriceLike | None = None,
        **options: Unpack[PolicyOptions],
    ) -> None:
        limits, options = settled(limits, options)
        self.driver = CycleDriver(
            limits, price=priced_for_limit(price, limits.max_cost, "Convergence"), **options
        )
        self.hooks: RunHooks[Any] = _Hooks(self)
        """Pass as ``Runner.run(..., hooks=...)``."""
        self.error_handlers: Any = {
            "max_turns": self._on_max_turns,
            "invalid_final_output": self._on_invalid_output,
        }
        """Pass as ``Runner.run(..., error_handlers=...)``."""
        self.guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=self._guard, name="convergence"
        )
        """The tool input guardrail that holds back the calls the review refused (a
        repeated write's note, a call past a cap): `agent` gives it to the agent's own
        tools; `guarding` to its MCP servers' tools, for the run."""
        self._tools = options.get("tools")
        self._offered: set[int] = set()
        """The agents (by id) whose tools the driver was told of."""
        self._known: dict[str, Declared] = {}
        """Their tools, with their effects."""
        self._agent: Agent[Any] | None = None
        self._input: list[TResponseInputItem] = []
        self._response: ModelResponse | None = None
        self._calls: dict[str, ToolCall] = {}
        self._skipped: dict[str, str] = {}
        self._outcomes: dict[str, tuple[CallOutcome, bool]] = {}
        self._invalid: dict[str, str] = {}
        """What the SDK told the model of each call of a tool the agent lacks."""
        self._notes: list[str] = []
        self._base_config: RunConfig | None = None
        self._last_text = ""
        self._context: RunContextWrapper[Any] | None = None
        self._resume: list[TResponseInputItem] | None = None
        self._final: RunResult | None = None
        self.feedback: str | None = None
        """Why the latest answer was rejected, until the model is told."""
        self.report: StopReport | None = None
        """How the run ended, once it has."""

    @property
    def max_turns(self) -> int:
        """The SDK's turn limit: one more than the cycles left, so convergent stops first."""
        cycles = self.driver.limits.max_cycles
        return 10**9 if cycles is None else max(cycles - self.driver.cycles, 0) + 1

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """A copy of ``agent`` whose tools are guarded and whose batches are judged.

        The SDK's Chat Completions model drops the provider's finish reason: for such an
        agent a reply cut at the token limit cannot be told from an answer, which is said
        once with a `PolicyAdapted` warning.
        """
        if isinstance(agent.model, OpenAIChatCompletionsModel):
            warnings.warn(
                "the Agents SDK's Chat Completions model drops the finish reason: a reply "
                "cut at the output token limit is taken for an answer (use the Responses "
                "API's model to have it continued)",
                PolicyAdapted,
                stacklevel=2,
            )
        tools = [
            dataclasses.replace(
                tool, tool_input_guardrails=[*(tool.tool_input_guardrails or ()), self.guardrail]
            )
            if isinstance(tool, FunctionTool)
            else tool
            for tool in agent.tools
        ]
        self._agent = agent.clone(tools=tools, tool_use_behavior=self._tool_use_behavior)
        return self._agent

    @contextlib.contextmanager
    def guarding(self, servers: Sequence[MCPServer]) -> Iterator[None]:
        """The MCP servers' tools hold back the calls the review refused, while inside.

        The SDK makes an MCP server's tools anew at each turn, with the server's
        ``tool_input_guardrails``: the adapter's guardrail is added to them for the run,
        and taken away after it (it lets every call of another run through). `run` does
        this for the agent's servers; wired by hand, wrap `Runner.run` in it.
        """
        added: list[MCPServer] = []
        for server in servers:
            guardrails = server.tool_input_guardrails
            if guardrails is None:
                guardrails = server.tool_input_guardrails = []
            if self.guardrail not in guardrails:
                guardrails.append(self.guardrail)
                added.append(server)
        try:
            yield
        finally:
            for server in added:
                with contextlib.suppress(ValueError):
                    (server.tool_input_guardrails or []).remove(self.guardrail)

    async def _offer(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        """Tell the driver the tools of an agent at its first request, each with its effect.

        A tool's effect is the caller's (``tools``), else what its MCP annotations declare
        (the SDK keeps them on an MCP server's tools: ``FunctionTool.mcp_annotations``),
        else undeclared. The SDK lists the tools of the agent's MCP servers for this.
        """
        if id(agent) in self._offered:
            return
        self._offered.add(id(agent))
        given = self._tools or {}
        effects = self._known
        for tool in await agent.get_all_tools(context):
            name = tool.name
            annotations = tool.mcp_annotations if isinstance(tool, FunctionTool) else None
            effects[name] = given[name] if name in given else annotated_effect(annotations)
        for handoff in agent.handoffs:
            name = (
                handoff.tool_name
                if isinstance(handoff, Handoff)
                else Handoff.default_tool_name(handoff)
            )
            effects[name] = given.get(name, Effect.UNDECLARED)
        self.driver.offers(dict(effects))

    def run_config(self, config: RunConfig | None = None) -> RunConfig:
        """``config`` (or a default one) with the tool-error formatter and the input filter."""
        base = config or RunConfig()
        self._base_config = base
        return dataclasses.replace(
            base,
            tool_error_formatter=self._format_error,
            call_model_input_filter=self._filter_input,
            # a call of a tool the agent lacks is the model's mistake, as in the loop
            tool_not_found_behavior="return_error_to_model",
        )

    # -- model requests -----------------------------------------------------------------

    async def _requesting(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        input_items: list[TResponseInputItem],
    ) -> None:
        await self._offer(context, agent)
        if self._context is None and self.report is None:
            self._context = context
        elif context is not self._context:
            raise UserError(
                "a Convergence serves one run, and this one already serves another: "
                "make one per run (or call convergent.adapters.openai_agents.run)"
            )
        self._input = list(input_items)
        self.feedback = self._resume = None  # the SDK asks again itself (no typed answer)
        self.driver.start_request()

    def _responded(self, response: ModelResponse) -> None:
        driver = self.driver
        driver.responded(_usage(response))
        self._response = response
        calls = [item for item in response.output if isinstance(item, ResponseFunctionToolCall)]
        text = _text_of(response)
        if text.strip():
            self._last_text = text
        if not calls:
            return  # an answer: judged once the SDK has validated it (`run`)
        converted = [_tool_call(item) for item in calls]
        self._calls = {call.id: call for call in converted}
        review = driver.review(converted)
        self._skipped = {converted[position].id: text for position, text in review.skipped.items()}

    async def _filter_input(self, data: CallModelData[Any]) -> ModelInputData:
        if self._calls:  # a batch the SDK judged no result of (every call was unknown)
            if self._close_step({}):
                raise StoppedBeforeRequest(list(data.model_data.input))
        notes, self._notes = self._notes, []
        note = self.driver.budget_note()
        if note is not None:
            notes.append(note)
        if not notes:
            return data.model_data
        extra: list[TResponseInputItem] = [{"role": "user", "content": text} for text in notes]
        return ModelInputData(
            input=[*data.model_data.input, *extra], instructions=data.model_data.instructions
        )

    # -- tools --------------------------------------------------------------------------

    def _guard(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        text = self._skipped.get(data.context.tool_call_id)
        if text is None:
            return ToolGuardrailFunctionOutput.allow()
        return ToolGuardrailFunctionOutput.reject_content(text)

    def _format_error(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        if args.kind == "tool_exception":
            text, fatal = failure_result(args.tool_name, args.error or Exception())
            self._outcomes[args.call_id] = (CallOutcome.FAILED, fatal)
            return text
        if args.kind == "tool_not_found":  # the model's mistake, as in convergent's loop
            self._outcomes[args.call_id] = (CallOutcome.INVALID, False)
            self._invalid[args.call_id] = args.default_message
        return None

    async def _tool_use_behavior(
        self, context: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        outputs: list[TResponseInputItem] = []
        texts: dict[str, str] = {}
        for result in results:
            item = result.run_item
            if item is None:
                continue
            outputs.append(item.to_input_item())
            call_id = str(getattr(item.raw_item, "call_id", None) or _get(item.raw_item, "call_id"))
            texts[call_id] = str(result.output)
        if not self._close_step(texts):
            return ToolsToFinalOutputResult(is_final_output=False)
        response = self._response.to_input_items() if self._response is not None else []
        output = await self._finish([*self._input, *response, *outputs])
        return ToolsToFinalOutputResult(is_final_output=True, final_output=output)

    def _close_step(self, texts: dict[str, str]) -> bool:
        """The batch's calls, in call order, then its step and the limits; whether it stopped.

        ``texts`` are the results of the calls that ran, by call id; a call of a tool the
        agent lacks has none (the SDK answered it itself).
        """
        driver = self.driver
        for call_id, call in self._calls.items():
            if call_id in self._skipped:
                continue
            outcome, fatal = self._outcomes.get(call_id, _RAN)
            text = texts.get(call_id, self._invalid.get(call_id))
            if text is None:
                continue  # no result came back for it: it did not run
            driver.observe(call, outcome, text, fatal=fatal)
        self._calls, self._skipped, self._outcomes, self._invalid = {}, {}, {}, {}
        decision = driver.end_step()
        if isinstance(decision, Nudge):
            self._notes.append(decision.note)
        if driver.stop is None:
            driver.before_request()
        return driver.stop is not None

    # -- answers ------------------------------------------------------------------------

    async def _on_invalid_output(self, data: RunErrorHandlerInput[Any]) -> None:
        """The SDK rejected a typed answer: the run's decision, and the model told why."""
        self.feedback = told(self.driver.judge_answer(None, output_errors=str(data.error)))
        self._resume = data.run_data.history
        # None: the SDK raises its ModelBehaviorError; `run` sends the answer back, or
        # ends the run where the rejected answers stopped it

    async def judge(self, result: RunResult) -> StopReport | None:
        """Judge the answer that ended an SDK run: its report, or None to send it back.

        The answer is the SDK's (validated, for a typed agent): its text goes to the
        ``output`` check and the verifier; a rejection waits in `feedback`.
        """
        if self.report is not None:
            return self.report
        response = self._response
        text = self._last_text if response is None else _text_of(response)
        finish = None if response is None else _finish_of(response)
        decision = await self.driver.answered_async(text, finish)
        feedback = told(decision)
        if feedback is not None:
            self.feedback = feedback
            self._resume = result.to_input_list()
            return None
        if isinstance(decision, Stop) and decision.reason is StopReason.COMPLETED:
            self.report = self.driver.report(self.driver.answer or text)
            return self.report
        await self._finish(result.to_input_list())
        return self.report

    async def finish_stopped(self, stopped: StoppedBeforeRequest) -> StopReport:
        """End a run that `Runner.run` left with `StoppedBeforeRequest`: its report.

        The answer after the stop is asked for as after any other stop.
        """
        await self._finish(stopped.history)
        assert self.report is not None
        return self.report

    def _continuation(self) -> list[TResponseInputItem] | None:
        """The input of the run's next part, once an answer was sent back (else None)."""
        feedback, history = self.feedback, self._resume
        self.feedback = self._resume = None
        if feedback is None or history is None:
            return None
        self._context = None  # the next part is the same run
        return [*history, {"role": "user", "content": feedback}]

    def _converged(self, result: RunResult | None) -> ConvergedRun:
        report = self.report
        assert report is not None
        agent = self._agent
        if report.reason is StopReason.COMPLETED and result is not None:
            # a text agent's answer is the report's: the parts of a reply cut short, joined
            plain = agent is None or _plain(agent)
            output = report.output if plain else result.final_output
        else:
            output = report.output if agent is None or _plain(agent) else None
        return ConvergedRun(result, report, output)

    # -- the end ------------------------------------------------------------------------

    async def _finish(self, history: Sequence[TResponseInputItem]) -> Any:
        """The final output: a hand-off's result, the answer after the stop, or the last text.

        For a typed agent, None unless the run completed: the answer in words is the
        report's ``output``.
        """
        driver, agent = self.driver, self._agent
        final = None
        if agent is not None:
            request = driver.final_request(wanted_tokens=agent.model_settings.max_tokens)
            if request is not None:
                final = await self._final_answer(agent, history, request)
        self.report = driver.report(self._last_text, final)
        return self.report.output if agent is None or _plain(agent) else None

    async def _final_answer(
        self, agent: Agent[Any], history: Sequence[TResponseInputItem], final: FinalRequest
    ) -> str | None:
        """One request without tools, made as a one-turn run of the same agent, in words."""
        settings = agent.model_settings
        if final.max_tokens is not None:
            settings = settings.resolve(ModelSettings(max_tokens=final.max_tokens))
        plain = agent.clone(
            tools=[],
            handoffs=[],
            tool_use_behavior="run_llm_again",
            output_type=None,
            hooks=None,
            model_settings=settings,
        )
        items: list[TResponseInputItem] = [*history, {"role": "user", "content": final.prompt}]
        try:
            result = await Runner.run(plain, items, max_turns=1, run_config=self._base_config)
        except AgentsException:
            return None  # no answer is better than a crash: the run keeps its last text
        self._final = result
        for response in result.raw_responses:
            self.driver.add_usage(_usage(response))
        return str(result.final_output) if result.final_output is not None else None

    async def _on_max_turns(self, data: RunErrorHandlerInput[Any]) -> RunErrorHandlerResult | None:
        driver = self.driver
        if driver.stop is None:  # the SDK's own turn limit, past the cycles convergent allows
            limit = LimitReached(limit="max_cycles", used=driver.cycles, maximum=driver.cycles)
            driver.host_stop(Facts(limit=limit))
        output = await self._finish(data.run_data.history)
        # the SDK holds a handler's output to a typed agent's type: a typed agent keeps the error
        return RunErrorHandlerResult(final_output=output) if output is not None else None


class _Hooks(RunHooks[Any]):
    def __init__(self, convergence: Convergence) -> None:
        self._convergence = convergence

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        await self._convergence._requesting(context, agent, input_items)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        self._convergence._responded(response)


async def run(
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    *,
    limits: Limits | None = None,
    price: PriceLike | None = None,
    run_config: RunConfig | None = None,
    context: Any = None,
    **options: Unpack[PolicyOptions],
) -> ConvergedRun:
    """Run ``agent`` on ``input`` with `Runner.run` until one of convergent's stops.

    The steps, in order: the limits before each request; each batch of tool calls
    reviewed before it runs and judged after; an answer the SDK validated judged by
    ``output`` and the verifier; a rejected answer sent back to the model, with why,
    in a continuation of the conversation; after a stop, one request without tools for
    the best answer so far.

    Args:
        agent: The agent.
        input: The task, or input items.
        limits: Budgets and thresholds.
        price: The model's price (required with ``max_cost``; see `Convergence`).
        run_config: The run's configuration (the adapter adds its own seams to a copy).
        context: The run context, passed through.
        **options: The rest of the stop policy (`convergent.loop.driver.PolicyOptions`).
    """
    convergence = Convergence(limits, price=price, **options)
    guarded = convergence.agent(agent)
    config = convergence.run_config(run_config)
    with convergence.guarding(agent.mcp_servers):
        return await _run(convergence, guarded, config, input, context)


async def _run(
    convergence: Convergence,
    guarded: Agent[Any],
    config: RunConfig,
    input: str | list[TResponseInputItem],
    context: Any,
) -> ConvergedRun:
    """`run`'s parts: the SDK's runs, answers sent back, until a stop."""
    items: str | list[TResponseInputItem] = input
    last: RunResult | None = None
    while True:
        try:
            last = await Runner.run(
                guarded,
                items,
                context=context,
                hooks=convergence.hooks,
                run_config=config,
                error_handlers=convergence.error_handlers,
                max_turns=convergence.max_turns,
            )
        except MaxTurnsExceeded:
            if convergence.report is None:  # the SDK's own limit, not one convergent set
                raise
            return convergence._converged(convergence._final)
        except StoppedBeforeRequest as stopped:
            await convergence.finish_stopped(stopped)
            return convergence._converged(convergence._final or last)
        except ModelBehaviorError:
            if convergence._resume is None:  # not an answer the adapter judged
                raise
            if convergence.driver.stop is not None:  # the rejected answers stopped the run
                await convergence._finish(convergence._resume)
                return convergence._converged(convergence._final or last)
        else:
            if await convergence.judge(last) is not None:
                return convergence._converged(last)
        following = convergence._continuation()
        assert following is not None
        if isinstance(convergence.driver.before_request(), Stop):
            await convergence._finish(following[:-1])
            return convergence._converged(convergence._final or last)
        items = following


def run_sync(
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    **kwargs: Any,
) -> ConvergedRun:
    """`run` for synchronous code, on the thread's default event loop as ``Runner.run_sync``.

    Raises:
        UserError: When called from a running event loop (await `run` there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise UserError("run_sync cannot be called from a running event loop: await run()")
    policy = asyncio.get_event_loop_policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = policy.get_event_loop()
        except RuntimeError:
            loop = policy.new_event_loop()
            policy.set_event_loop(loop)
    if loop.is_closed():
        loop = policy.new_event_loop()
        policy.set_event_loop(loop)
    task = loop.create_task(run(agent, input, **kwargs))
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(task)
        raise


_RAN: tuple[CallOutcome, bool] = (CallOutcome.OK, False)


def _plain(agent: Agent[Any]) -> bool:
    """Whether the agent's output is text (no ``output_type`` but ``str``)."""
    output = agent.output_type
    if output is None or output is str:
        return True
    return isinstance(output, AgentOutputSchemaBase) and output.is_plain_text()


def _tool_call(item: ResponseFunctionToolCall) -> ToolCall:
    try:
        arguments = load_json(item.arguments) if item.arguments else {}
    except UnusableJson as exc:
        return ToolCall(id=item.call_id, name=item.name, parse_error=str(exc))
    if not isinstance(arguments, dict):
        arguments = {"value": arguments}
    return ToolCall(id=item.call_id, name=item.name, arguments=arguments)


def _usage(response: ModelResponse) -> Usage:
    """A response's usage, as convergent counts it (one request at least)."""
    usage = response.usage
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        requests=max(usage.requests, 1),
    )


def _finish_of(response: ModelResponse) -> str | None:
    """Why the model stopped, as far as the response says: cut short, refused, or None.

    The Responses API marks a message cut at the output token limit ``incomplete``; a
    refusal comes as its own content part.
    """
    for item in response.output:
        if isinstance(item, ResponseOutputMessage):
            if item.status == "incomplete":
                return "length"
            if any(isinstance(part, ResponseOutputRefusal) for part in item.content):
                return "refusal"
    return None


def _text_of(response: ModelResponse) -> str:
    parts: list[str] = []
    for item in response.output:
        if isinstance(item, ResponseOutputMessage):
            parts.extend(getattr(part, "text", "") for part in item.content)
    return "".join(parts)


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else None
