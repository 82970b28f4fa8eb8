"""Convergent's stop decisions as a PydanticAI capability.

PydanticAI offers several seams: a wrapper toolset, `UsageLimits`, output validators,
``Agent.iter``, and capabilities, which its maintainers document as *the* composable
home for cross-cutting agent behaviour (hooks around nodes, model requests and tool
execution, per-run instances). A stop policy touches all of those at once, in one
order, so `Convergence` is one capability rather than four pieces the user must wire
in step:

- ``after_node_run`` sees each model request before it is made (the finished tool batch
  is judged, notes are added, the limits are checked), each response before its tools
  run (the calls are reviewed for a stall), and each answer once PydanticAI has judged
  it against the agent's output type: a value it accepted goes to ``output`` and the
  verifier, whose feedback redirects the run to a new request; one it sent back counts
  as a rejected answer, and its own retry goes ahead. A stop ends the run by returning
  ``End`` with the final output, asked for once without tools. PydanticAI calls this
  hook for every node of every run, where ``wrap_node_run`` would add a wrapper around
  each node that costs the host more than the adapter's own work.
- ``on_node_run_error`` ends a run whose output retries ran out ``stalled``, with the
  answer after the stop, instead of `UnexpectedModelBehavior`.
- ``wrap_tool_execute`` gives a stalled call the nudge as its result instead of
  running it, and turns a tool's exception into an error result for the model.
- ``before_model_request`` learns the output's shape, and sends the final request
  without tools and without an output type.

`UsageLimits` raise `UsageLimitExceeded` and lose the answer; an output validator's
retries are capped by the output retry budget and end in an error; ``Agent.iter`` puts
the loop in the caller's hands. Each would reach only part of the policy.

Install with ``pip install convergent[pydantic-ai]``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Unpack

from pydantic_ai import CallToolsNode, ModelRequestNode, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolRetryError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.result import FinalResult
from pydantic_ai.run import AgentRunResult
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import DeferredToolRequests, ToolDefinition
from pydantic_graph import End

from convergent.adapters._policy import settled, told
from convergent.effects import Effect, annotated_effect
from convergent.exceptions import UserError
from convergent.limits import Limits
from convergent.loop.driver import CycleDriver, PolicyOptions
from convergent.loop.ending import FinalRequest, StopReport
from convergent.loop.executor import failure_result
from convergent.messages import CallOutcome, ToolCall, Usage
from convergent.models._prices import PriceLike, priced_for_limit
from convergent.stop import Facts, Nudge, Stall, Stop, StopReason

__all__ = ["Convergence"]


class Convergence(AbstractCapability[Any]):
    """Stops a PydanticAI agent's runs for convergent's objective reasons.

    Example:
        ```python
        convergence = Convergence(Limits(max_cycles=8))
        agent = Agent(model, tools=[...], capabilities=[convergence])
        result = await agent.run("...")
        convergence.report_for(result).reason
        ```

    Args:
        limits: Budgets and thresholds; ``max_cycles`` counts model requests.
        price: The model's price (`TokenPrice` or ``(input, output)`` in US dollars per
            million tokens): the host reports tokens, not cost, so each response is
            costed at it. Required with ``max_cost``.
        **options: The rest of the stop policy (`convergent.loop.driver.PolicyOptions`): the
            verifier's feedback goes back to the model as a new request; the final
            answer's request gets ``max_tokens`` set to what a token or cost budget
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
        self.limits, self._options = settled(limits, options)
        self.price = priced_for_limit(price, self.limits.max_cost, "Convergence")
        """The model's price, which responses are costed at."""
        self.reports: dict[str, StopReport] = {}
        """How each run ended, by run id."""
        self.last_report: StopReport | None = None
        """How the latest run ended."""

    def report_for(self, result: AgentRunResult[Any]) -> StopReport:
        """How the run behind ``result`` ended.

        Raises:
            UserError: For a run this capability did not take part in.
        """
        report = self.reports.get(result.run_id)
        if report is None:
            raise UserError(f"no report for run {result.run_id}: it ran without this capability")
        return report

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        """A fresh instance with its own driver: runs never share counters."""
        return _RunConvergence(self, CycleDriver(self.limits, price=self.price, **self._options))


class _RunConvergence(Convergence):
    """The capability's instance for one run."""

    def __init__(self, parent: Convergence, driver: CycleDriver) -> None:
        self.parent = parent
        self.driver = driver
        self.calls: list[ToolCall] = []
        self.skipped: dict[str, str] = {}
        self.outcomes: dict[str, tuple[CallOutcome, str, bool]] = {}
        self.final: FinalRequest | None = None
        self.last_text = ""
        self.answer: str | None = None
        """The latest response's answer, until the host has judged it."""
        self.reply = ""
        """The latest answer's own text (without the earlier parts of a reply cut short)."""
        self.output_tools: frozenset[str] = frozenset()
        """The names of the host's output tools (a typed answer comes as a call of one)."""
        self.words = True
        """Whether an answer in words is a valid output of the agent (its type allows text)."""
        self.offered: tuple[str, ...] = ()
        """The names of the tools the driver was last told of."""

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        return self

    async def after_node_run(self, ctx: RunContext[Any], *, node: Any, result: Any) -> Any:
        """Decide on each response, and on each request, before the host runs what comes next.

        A response (the `CallToolsNode` a request produced) is judged before its tools
        run; an answer once the host has judged it (it ends the run, or the host asks
        again); a request (a `ModelRequestNode`, after the prompt, a tool batch or
        feedback) before it is made. PydanticAI runs this hook for every node anyway,
        so deciding here costs the host no seam of its own.
        """
        if isinstance(node, CallToolsNode) and self.answer is not None:
            result = await self._after_answer(result)
        elif isinstance(result, End) and self.driver.stop is None:
            self._handed_back(result)
        if isinstance(result, CallToolsNode):
            decided = self._after_response(ctx, result)
            if decided is None:
                return result
            result = decided
        if isinstance(result, ModelRequestNode):
            return self._before_request(ctx, result)
        return result

    async def on_node_run_error(self, ctx: RunContext[Any], *, node: Any, error: Exception) -> Any:
        """The host's own caps on rejected answers and on mistaken calls end the run typed.

        PydanticAI raises `UnexpectedModelBehavior` once its output retries are used
        up, or a tool's retries (a call of a tool it does not have, arguments that do
        not validate: ``retries``, 1 by default, counted per tool name); the run then
        ends as a streak of rejected answers, or of mistakes, does in convergent's loop:
        ``stalled``, with the answer after the stop.
        """
        if isinstance(error, UnexpectedModelBehavior) and self.calls:
            return self._gave_up_on_calls(error)
        answer = self.answer
        if not (isinstance(error, UnexpectedModelBehavior) and answer is not None):
            raise error
        self.answer = None
        driver = self.driver
        decision = driver.judge_answer(None, output_errors=str(error))
        if not isinstance(decision, Stop):  # the host's cap came before convergent's
            rejected = Stall(
                what=f"the answer ({error}; PydanticAI gave up)",
                times=driver.monitor.state.rejections,
                kind="rejected",
            )
            driver.host_stop(Facts(stall=rejected))
        return ModelRequestNode(ModelRequest(parts=[]))

    def _gave_up_on_calls(self, error: UnexpectedModelBehavior) -> ModelRequestNode[Any, Any]:
        """PydanticAI gave up on a tool's mistaken calls: ``stalled``, then the final request.

        Each call of the response gets a result (none of them ran to its end), so that the
        final request is one a provider accepts.
        """
        driver = self.driver
        calls, self.calls, self.skipped, self.outcomes = self.calls, [], {}, {}
        if driver.stop is None:
            mistakes = Stall(
                what=f"calls the run cannot make ({error}; PydanticAI gave up)",
                times=driver.monitor.state.mistakes + 1,
                kind="mistakes",
            )
            driver.host_stop(Facts(stall=mistakes))
        assert driver.stop is not None
        results = [
            ToolReturnPart(
                tool_name=call.name,
                content=f"not executed: {driver.stop.detail}",
                tool_call_id=call.id,
                outcome="denied",
            )
            for call in calls
        ]
        return ModelRequestNode(ModelRequest(parts=results))

    async def _after_answer(self, result: Any) -> Any:
        """The host's verdict on an answer: the run's end (then the checks), or a retry."""
        answer, self.answer = self.answer, None
        assert answer is not None
        driver = self.driver
        if isinstance(result, End):
            decision = await driver.answered_async(answer)
            feedback = told(decision)
            if feedback is not None:
                return ModelRequestNode(ModelRequest(parts=[UserPromptPart(feedback)]))
            if isinstance(decision, Stop) and decision.reason is StopReason.COMPLETED:
                joined = driver.answer or answer
                self._remember(driver.report(joined))
                if joined != self.reply and result.data.output == self.reply:
                    # the host's output is the last part of a reply cut short: all of it
                    return End(dataclasses.replace(result.data, output=joined))
                return result
            return ModelRequestNode(ModelRequest(parts=[]))  # a stop: the final request
        if isinstance(result, ModelRequestNode):  # the host asks again, with its own why
            errors = _feedback(result.request) or "rejected by PydanticAI"
            decision = driver.judge_answer(None, output_errors=errors)
            if isinstance(decision, Nudge):  # the host's why, then the note
                request: ModelRequest = result.request
                parts = [*request.parts, UserPromptPart(decision.note)]
                return dataclasses.replace(
                    result, request=dataclasses.replace(request, parts=parts)
                )
        return result

    def _handed_back(self, result: End[Any]) -> None:
        """The host ended the run itself: calls that wait for someone's approval or result."""
        output = getattr(result.data, "output", None)
        if isinstance(output, DeferredToolRequests):
            names = ", ".join(call.tool_name for call in [*output.calls, *output.approvals])
            waiting = f"calls wait for their result or approval: {names}"
            self.driver.host_stop(Facts(needs_user=waiting))
            self._remember(self.driver.report(self.last_text))

    def _before_request(self, ctx: RunContext[Any], node: Any) -> Any:
        driver = self.driver
        notes: list[str] = []
        if self.calls and driver.stop is None:
            decision = self._record_batch()
            if isinstance(decision, Nudge):
                notes.append(decision.note)
        if driver.stop is None:
            driver.before_request()
        if driver.stop is not None:
            self.final = driver.final_request(wanted_tokens=_max_tokens(ctx))
            if self.final is None:
                return self._end(driver.report(self.last_text))
            notes.append(self.final.prompt)
        else:
            note = driver.budget_note()
            if note is not None:
                notes.append(note)
        if notes:
            request: ModelRequest = node.request
            parts = [*request.parts, *(UserPromptPart(text) for text in notes)]
            node = dataclasses.replace(node, request=dataclasses.replace(request, parts=parts))
        return node

    def _record_batch(self) -> Any:
        driver = self.driver
        for call in self.calls:
            if call.id in self.skipped:
                continue
            outcome, text, fatal = self.outcomes.get(call.id, _REJECTED)
            driver.observe(call, outcome, text, fatal=fatal)
        self.calls, self.skipped, self.outcomes = [], {}, {}
        return driver.end_step()

    def _after_response(self, ctx: RunContext[Any], node: Any) -> Any:
        response: ModelResponse = node.model_response
        driver = self.driver
        text = response.text or ""
        if self.final is not None:
            driver.add_usage(_usage(response))
            return self._end(driver.report(self.last_text, text))
        driver.responded(_usage(response))
        if text.strip():
            self.last_text = text
        calls = [part for part in response.tool_calls if part.tool_name not in self.output_tools]
        if not calls:  # an answer: the host judges it first (its type, its retries)
            typed = [part for part in response.tool_calls if part.tool_name in self.output_tools]
            if typed:
                self.answer = typed[0].args_as_json_str()
                return None
            self.reply = text
            unfinished = driver.unfinished(text, response.finish_reason)
            if unfinished is None:
                self.answer = driver.answer or text  # the parts of a reply cut short, joined
                return None
            if isinstance(unfinished, Stop):  # asked to go on often enough
                return self._end(driver.report(self.last_text))
            told_to = told(unfinished) or ""  # empty, cut or refused: the model goes on
            return ModelRequestNode(ModelRequest(parts=[UserPromptPart(told_to)]))
        self.calls = [_tool_call(part) for part in calls]
        review = driver.review(self.calls)
        self.skipped = {self.calls[position].id: note for position, note in review.skipped.items()}
        return None

    def _end(self, report: StopReport) -> End[FinalResult[Any]]:
        """End the run with the report's output, or None where the type takes no words.

        After a stop, the output is the answer in words where the agent's output type
        allows text; otherwise None, and the words are in the report.
        """
        self._remember(report)
        return End(FinalResult(report.output if self.words else None))

    def _remember(self, report: StopReport) -> None:
        parent = self.parent
        parent.last_report = report
        run_id = getattr(self, "_run_id", None)
        if run_id is not None:
            parent.reports[run_id] = report

    async def before_run(self, ctx: RunContext[Any]) -> None:
        """Remember the run's id, to file its report under."""
        self._run_id = ctx.run_id

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Learn the output's shape; send the final request after a stop in words.

        The final request goes without tools and without an output type, its
        ``max_tokens`` within the token and cost budgets.
        """
        parameters = request_context.model_request_parameters
        final = self.final
        if final is None:
            self._offer(parameters.function_tools)
            self.driver.start_request()
            self.output_tools = frozenset(tool.name for tool in parameters.output_tools)
            self.words = parameters.output_mode == "text" or (
                parameters.output_mode == "tool" and parameters.allow_text_output
            )
            return request_context
        parameters = dataclasses.replace(
            parameters,
            function_tools=[],
            output_tools=[],
            output_mode="text",
            output_object=None,
            allow_text_output=True,
        )
        settings = request_context.model_settings
        if final.max_tokens is not None:
            settings = ModelSettings(**(settings or {}), max_tokens=final.max_tokens)
        return dataclasses.replace(
            request_context, model_request_parameters=parameters, model_settings=settings
        )

    def _offer(self, tools: list[ToolDefinition]) -> None:
        """Tell the driver the agent's tools, with their effects, when they change.

        A tool's effect is the caller's (``tools``), else what its MCP annotations declare
        (an MCP server's tools carry them in their metadata), else undeclared.
        """
        names = tuple(tool.name for tool in tools)
        if names == self.offered:
            return
        self.offered = names
        given = self.parent._options.get("tools") or {}
        self.driver.offers(
            {
                tool.name: given[tool.name] if tool.name in given else _effect(tool.metadata)
                for tool in tools
            }
        )

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: Any,
    ) -> Any:
        """Skip a call the review held back; record how the others end."""
        note = self.skipped.get(call.tool_call_id)
        if note is not None:
            return note
        try:
            result = await handler(args)
        except ToolRetryError as exc:
            self.outcomes[call.tool_call_id] = (CallOutcome.INVALID, str(exc), False)
            raise
        except Exception as exc:  # the model sees the failure, as in convergent's loop
            text, fatal = failure_result(call.tool_name, exc)
            self.outcomes[call.tool_call_id] = (CallOutcome.FAILED, text, fatal)
            return text
        self.outcomes[call.tool_call_id] = (CallOutcome.OK, str(result), False)
        return result


_REJECTED: tuple[CallOutcome, str, bool] = (CallOutcome.INVALID, "", False)
"""How a call ended that no tool wrapper saw: the host rejected it before it ran."""


def _effect(metadata: dict[str, Any] | None) -> Effect:
    """A tool's effect from the MCP annotations in its metadata (undeclared without them)."""
    return annotated_effect((metadata or {}).get("annotations"))


def _feedback(request: ModelRequest) -> str:
    """What the host tells the model of an answer it rejected."""
    texts: list[str] = []
    for part in request.parts:
        if isinstance(part, RetryFeedbackPart | RetryPromptPart):
            texts.append(part.model_response())
        elif isinstance(part, ToolReturnPart):
            texts.append(part.model_response_str())
    return "; ".join(texts)


def _tool_call(part: ToolCallPart) -> ToolCall:
    try:
        arguments = part.args_as_dict()
    except ValueError as exc:
        return ToolCall(id=part.tool_call_id, name=part.tool_name, parse_error=str(exc))
    return ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=arguments)


def _max_tokens(ctx: RunContext[Any]) -> int | None:
    """The agent's own output cap, if it has one."""
    settings = ctx.agent.model_settings if ctx.agent is not None else None
    return settings.get("max_tokens") if isinstance(settings, dict) else None


def _usage(response: ModelResponse) -> Usage:
    usage = response.usage
    return Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, requests=1)
