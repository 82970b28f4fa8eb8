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

What the SDK cannot express: a verifier (the SDK ends its run at the first answer
without tool calls; an output guardrail can only raise), so `Convergence` refuses one
with `NotExpressible`.

Install with ``pip install convergent[openai-agents]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
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
from agents.exceptions import AgentsException
from agents.items import ModelResponse, TResponseInputItem
from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
from agents.run_error_handlers import RunErrorHandlerInput, RunErrorHandlerResult
from agents.tool import FunctionToolResult
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

from convergent._json import UnusableJson, load_json
from convergent.adapters import NotExpressible
from convergent.driver import (
    CycleDriver,
    FinalRequest,
    PolicyOptions,
    StopReport,
    failure_result,
)
from convergent.limits import Limits
from convergent.messages import CallOutcome, ToolCall, Usage
from convergent.models._prices import PriceLike, priced_for_limit
from convergent.stop import Facts, LimitReached, Nudge, Stop, decide

__all__ = ["Convergence", "ConvergedRun", "run"]


@dataclass(frozen=True, slots=True)
class ConvergedRun:
    """An SDK run that ended for one of convergent's reasons."""

    result: RunResult
    """The SDK's own result."""
    report: StopReport
    """How it ended: the typed reason, the cycle, the final answer."""

    @property
    def final_output(self) -> Any:
        """The run's final output (the SDK's)."""
        return self.result.final_output


class Convergence:
    """The stop decisions of one SDK run (make one per run).

    Wire it yourself, or let `run` do it::

        convergence = Convergence(Limits(max_cycles=8))
        result = await Runner.run(
            convergence.agent(agent), task, hooks=convergence.hooks,
            run_config=convergence.run_config(), error_handlers=convergence.error_handlers,
            max_turns=convergence.max_turns,
        )
        convergence.report.reason

    Args:
        limits: Budgets and thresholds; ``max_cycles`` counts model requests.
        price: The model's price (`TokenPrice` or ``(input, output)`` in US dollars per
            million tokens): the host reports tokens, not cost, so each response is
            costed at it. Required with ``max_cost``.
        **options: The rest of the stop policy (`convergent.driver.PolicyOptions`); the
            final answer's run gets ``max_tokens`` set to what a token or cost budget
            leaves. A ``verifier`` is not expressible in this SDK.

    Raises:
        NotExpressible: For a verifier.
        UserError: For ``max_cost`` without a ``price``.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        price: PriceLike | None = None,
        **options: Unpack[PolicyOptions],
    ) -> None:
        if options.get("verifier") is not None:
            raise NotExpressible(
                "the OpenAI Agents SDK ends a run at the first answer without tool calls: "
                "a verifier's feedback cannot reach the model"
            )
        cost_limit = limits.max_cost if limits is not None else None
        self.driver = CycleDriver(
            limits, price=priced_for_limit(price, cost_limit, "Convergence"), **options
        )
        self.hooks: RunHooks[Any] = _Hooks(self)
        """Pass as ``Runner.run(..., hooks=...)``."""
        self.error_handlers: Any = {"max_turns": self._on_max_turns}
        """Pass as ``Runner.run(..., error_handlers=...)``."""
        self._guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=self._guard, name="convergence"
        )
        self._agent: Agent[Any] | None = None
        self._input: list[TResponseInputItem] = []
        self._response: ModelResponse | None = None
        self._calls: dict[str, ToolCall] = {}
        self._skipped: dict[str, str] = {}
        self._outcomes: dict[str, tuple[CallOutcome, bool]] = {}
        self._notes: list[str] = []
        self._base_config: RunConfig | None = None
        self._last_text = ""
        self.report: StopReport | None = None
        """How the run ended, once it has."""

    @property
    def max_turns(self) -> int:
        """The SDK's turn limit: one more than ``max_cycles``, so convergent stops first."""
        cycles = self.driver.limits.max_cycles
        return 10**9 if cycles is None else cycles + 1

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """A copy of ``agent`` whose tools are guarded and whose batches are judged."""
        tools = [
            dataclasses.replace(
                tool, tool_input_guardrails=[*(tool.tool_input_guardrails or ()), self._guardrail]
            )
            if isinstance(tool, FunctionTool)
            else tool
            for tool in agent.tools
        ]
        self._agent = agent.clone(tools=tools, tool_use_behavior=self._tool_use_behavior)
        return self._agent

    def run_config(self, config: RunConfig | None = None) -> RunConfig:
        """``config`` (or a default one) with the tool-error formatter and the input filter."""
        base = config or RunConfig()
        self._base_config = base
        return dataclasses.replace(
            base,
            tool_error_formatter=self._format_error,
            call_model_input_filter=self._filter_input,
        )

    # -- model requests -----------------------------------------------------------------

    def _requesting(self, input_items: list[TResponseInputItem]) -> None:
        self._input = list(input_items)

    def _responded(self, response: ModelResponse) -> None:
        driver = self.driver
        usage = response.usage
        driver.requested(
            Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                requests=max(usage.requests, 1),
            )
        )
        self._response = response
        calls = [item for item in response.output if isinstance(item, ResponseFunctionToolCall)]
        text = _text_of(response)
        if text.strip():
            self._last_text = text
        if not calls:
            driver.answered(text)
            return
        converted = [_tool_call(item) for item in calls]
        self._calls = {call.id: call for call in converted}
        review = driver.review(converted)
        self._skipped = {converted[position].id: text for position, text in review.skipped.items()}

    async def _filter_input(self, data: CallModelData[Any]) -> ModelInputData:
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
        return None

    async def _tool_use_behavior(
        self, context: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        driver = self.driver
        outputs: list[TResponseInputItem] = []
        for result in results:
            item = result.run_item
            if item is None:
                continue
            outputs.append(item.to_input_item())
            call_id = str(getattr(item.raw_item, "call_id", None) or _get(item.raw_item, "call_id"))
            call = self._calls.get(call_id)
            if call is None or call_id in self._skipped:
                continue
            outcome, fatal = self._outcomes.get(call_id, _RAN)
            driver.observe(call, outcome, str(result.output), fatal=fatal)
        self._skipped, self._outcomes = {}, {}
        decision = driver.end_step()
        if isinstance(decision, Nudge):
            self._notes.append(decision.note)
        if driver.stop is None:
            driver.before_request()
        if driver.stop is None:
            return ToolsToFinalOutputResult(is_final_output=False)
        response = self._response.to_input_items() if self._response is not None else []
        output = await self._finish([*self._input, *response, *outputs])
        return ToolsToFinalOutputResult(is_final_output=True, final_output=output)

    async def _finish(self, history: Sequence[TResponseInputItem]) -> str:
        """The final output: a hand-off's result, the answer after the stop, or the last text."""
        driver, agent = self.driver, self._agent
        final = None
        if agent is not None:
            request = driver.final_request(wanted_tokens=agent.model_settings.max_tokens)
            if request is not None:
                final = await self._final_answer(agent, history, request)
        self.report = driver.report(self._last_text, final)
        return self.report.output

    async def _final_answer(
        self, agent: Agent[Any], history: Sequence[TResponseInputItem], final: FinalRequest
    ) -> str | None:
        """One request without tools, made as a one-turn run of the same agent."""
        settings = agent.model_settings
        if final.max_tokens is not None:
            settings = settings.resolve(ModelSettings(max_tokens=final.max_tokens))
        plain = agent.clone(
            tools=[],
            handoffs=[],
            tool_use_behavior="run_llm_again",
            hooks=None,
            model_settings=settings,
        )
        items: list[TResponseInputItem] = [*history, {"role": "user", "content": final.prompt}]
        try:
            result = await Runner.run(plain, items, max_turns=1, run_config=self._base_config)
        except AgentsException:
            return None  # no answer is better than a crash: the run keeps its last text
        for response in result.raw_responses:
            usage = response.usage
            self.driver.add_usage(
                Usage(
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    requests=max(usage.requests, 1),
                )
            )
        return str(result.final_output) if result.final_output is not None else None

    async def _on_max_turns(self, data: RunErrorHandlerInput[Any]) -> RunErrorHandlerResult:
        driver = self.driver
        if driver.stop is None:
            maximum = data.error.args[0] if data.error.args else ""
            limit = LimitReached(limit="max_cycles", used=driver.cycles, maximum=driver.cycles)
            decision = decide(Facts(limit=limit))
            assert isinstance(decision, Stop)
            driver.stop = Stop(decision.reason, f"the SDK's turn limit: {maximum}")
        output = await self._finish(data.run_data.history)
        return RunErrorHandlerResult(final_output=output)

    def _completed(self, result: RunResult) -> StopReport:
        if self.report is None:
            self.report = self.driver.report(self._last_text)
        return self.report


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
        self._convergence._requesting(input_items)

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

    Args:
        agent: The agent.
        input: The task, or input items.
        limits: Budgets and thresholds.
        price: The model's price (required with ``max_cost``; see `Convergence`).
        run_config: The run's configuration (the adapter adds its own seams to a copy).
        context: The run context, passed through.
        **options: The rest of the stop policy (`convergent.driver.PolicyOptions`).
    """
    convergence = Convergence(limits, price=price, **options)
    result = await Runner.run(
        convergence.agent(agent),
        input,
        context=context,
        hooks=convergence.hooks,
        run_config=convergence.run_config(run_config),
        error_handlers=convergence.error_handlers,
        max_turns=convergence.max_turns,
    )
    return ConvergedRun(result, convergence._completed(result))


_RAN: tuple[CallOutcome, bool] = (CallOutcome.OK, False)


def _tool_call(item: ResponseFunctionToolCall) -> ToolCall:
    try:
        arguments = load_json(item.arguments) if item.arguments else {}
    except UnusableJson as exc:
        return ToolCall(id=item.call_id, name=item.name, parse_error=str(exc))
    if not isinstance(arguments, dict):
        arguments = {"value": arguments}
    return ToolCall(id=item.call_id, name=item.name, arguments=arguments)


def _text_of(response: ModelResponse) -> str:
    parts: list[str] = []
    for item in response.output:
        if isinstance(item, ResponseOutputMessage):
            parts.extend(getattr(part, "text", "") for part in item.content)
    return "".join(parts)


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else None
