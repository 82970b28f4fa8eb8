"""Convergent's stop decisions as Claude Agent SDK hooks.

`Convergence` gives ``ClaudeAgentOptions`` three kinds of hook, each the SDK's own:

- ``PreToolUse`` reviews each tool call before it runs: a stalled call is denied with
  the nudge as the reason the model reads; a stall past its nudge denies the call and
  ends the session (``continue: false`` with the stop's detail).
- ``PostToolUse`` and ``PostToolUseFailure`` record each result, so polling that
  changes and reading after a write count as progress; a persisting tool-error streak
  gets a nudge (``additionalContext``), then ends the session; so does a hand-off.
- ``Stop`` runs the verifier on the last answer: while it fails, the stop is blocked
  and its feedback goes to the model.

Claude Code ends a session when ``PostToolUse`` says so, but not ``PostToolUseFailure``
(2.1.x): a stop that a failure calls for ends the session at the next hook that can
end it (the next tool call is denied), one model request later than convergent's loop
would. Claude Code also hands the hooks a failure as text only; wrap in-process SDK
tools with `Convergence.tools` and their exceptions reach the model in convergent's
words, and a fatal `ToolError` ends the session at once, as it ends convergent's loop
(its result goes to ``PostToolUse``, which can end the session; the model never reads
it).

What the hooks cannot see is a model request: the CLI makes them. So ``max_cycles``
becomes the SDK's ``max_turns`` and ``max_cost`` its ``max_budget_usd``; a token or
wall-time budget cannot be expressed (`NotExpressible`). Pass each message of the
session to `record`: it counts the requests and their usage (Claude Code's
``num_turns`` counts a turn a hook ended as one more). Claude Code makes no request
after a hook ends the session, so there is no final answer after a stop (nor an output
cap for one): the output is the last text. Each hook sees one call, so a step is one
call.

Install with ``pip install convergent[claude-agent-sdk]``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Unpack, cast

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookContext,
    HookMatcher,
    ResultMessage,
    SdkMcpTool,
    TextBlock,
)
from claude_agent_sdk.types import HookCallback

from convergent.adapters import NotExpressible
from convergent.driver import CycleDriver, PolicyOptions, StopReport, failure_result
from convergent.limits import Limits
from convergent.messages import CallOutcome, ToolCall, Usage
from convergent.stop import (
    Decision,
    Facts,
    Interrupted,
    LimitReached,
    Nudge,
    Stop,
    StopReason,
    decide,
)

__all__ = ["Convergence"]


class Convergence:
    """The stop decisions of one Claude Agent SDK session (make one per session).

    Example:
        ```python
        convergence = Convergence(Limits(max_cycles=20), verifier=tests_pass)
        async for message in query(prompt=task, options=convergence.options()):
            convergence.record(message)
        convergence.report.reason
        ```

    Args:
        limits: Budgets and thresholds (``max_cycles`` and ``max_cost`` only; see the
            module's notes).
        **options: The rest of the stop policy (`convergent.driver.PolicyOptions`).
            Give ``tools`` the ``read_only`` flags you know (Claude Code's ``Read``,
            ``Grep``, ``Glob`` only read; ``Edit``, ``Write``, ``Bash`` may change
            things); the ``verifier`` runs when the model stops, and its feedback keeps
            it going; a ``final_answer`` is not expressible.

    Raises:
        NotExpressible: For a token or wall-time budget, or a final answer.
    """

    def __init__(self, limits: Limits | None = None, **options: Unpack[PolicyOptions]) -> None:
        limits = limits or Limits()
        if limits.max_total_tokens is not None or limits.max_seconds is not None:
            raise NotExpressible(
                "Claude Agent SDK hooks do not see model requests: a token or wall-time "
                "budget cannot be checked before one (use max_cycles or max_cost)"
            )
        if options.get("final_answer"):
            raise NotExpressible(
                "Claude Code makes no request after a hook ends the session: "
                "there is no final answer after a stop"
            )
        options["final_answer"] = False
        self.driver = CycleDriver(limits, **options)
        self.report: StopReport | None = None
        """How the session ended, once `finish` has seen its result."""
        self._calls: dict[str, ToolCall] = {}
        self._last_text = ""
        self._fatal: list[str] = []
        """Texts of fatal failures of wrapped tools, until ``PostToolUse`` sees them."""
        self._requests: dict[str, Usage] = {}
        """The main agent's model responses seen by `record`, by message id."""

    def tools(self, *tools: SdkMcpTool[Any]) -> list[SdkMcpTool[Any]]:
        """Copies of in-process SDK tools whose exceptions the policy can read.

        A tool's exception becomes an error result in convergent's words (instead of the
        SDK's bare message), and a `ToolError(fatal=True)` ends the session when its
        failure reaches ``PostToolUseFailure``. Give the copies to
        ``create_sdk_mcp_server``.
        """
        return [dataclasses.replace(tool, handler=self._guarded(tool)) for tool in tools]

    def _guarded(self, tool: SdkMcpTool[Any]) -> Any:
        handler = tool.handler

        async def run(arguments: Any) -> dict[str, Any]:
            try:
                return await handler(arguments)
            except Exception as exc:  # the model sees the failure, as in convergent's loop
                text, fatal = failure_result(tool.name, exc)
                if fatal:  # PostToolUse, not PostToolUseFailure, can end the session
                    self._fatal.append(text)
                return {"content": [{"type": "text", "text": text}], "is_error": not fatal}

        return run

    @property
    def hooks(self) -> dict[Any, list[HookMatcher]]:
        """The hooks, by event, for ``ClaudeAgentOptions(hooks=...)``."""
        return {
            "PreToolUse": [HookMatcher(hooks=[cast(HookCallback, self._pre_tool_use)])],
            "PostToolUse": [HookMatcher(hooks=[cast(HookCallback, self._post_tool_use)])],
            "PostToolUseFailure": [
                HookMatcher(hooks=[cast(HookCallback, self._post_tool_use_failure)])
            ],
            "Stop": [HookMatcher(hooks=[cast(HookCallback, self._stop)])],
        }

    def options(self, base: ClaudeAgentOptions | None = None) -> ClaudeAgentOptions:
        """``base`` (or default options) with the hooks added and the limits mapped."""
        base = base or ClaudeAgentOptions()
        hooks: dict[Any, list[HookMatcher]] = {
            event: list(matchers) for event, matchers in (base.hooks or {}).items()
        }
        for event, matchers in self.hooks.items():
            hooks.setdefault(event, []).extend(matchers)
        limits = self.driver.limits
        return dataclasses.replace(
            base,
            hooks=hooks,
            max_turns=limits.max_cycles if limits.max_cycles is not None else base.max_turns,
            max_budget_usd=limits.max_cost if limits.max_cost is not None else base.max_budget_usd,
        )

    # -- hooks --------------------------------------------------------------------------

    async def _pre_tool_use(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        call = ToolCall(
            id=tool_use_id or data.get("tool_use_id", ""),
            name=data["tool_name"],
            arguments=dict(data.get("tool_input") or {}),
        )
        self._calls[call.id] = call
        if self.driver.stop is not None:  # a stop a failure called for: end here
            return self._deny(f"not executed: {self.driver.stop.detail}", self.driver.stop)
        review = self.driver.review([call])
        if not review.skipped:
            return {}
        decision = review.decision
        return self._deny(review.skipped[0], decision if isinstance(decision, Stop) else None)

    def _deny(self, reason: str, stop: Stop | None) -> dict[str, Any]:
        denied = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
        return {**denied, **_end(stop)} if stop is not None else denied

    async def _post_tool_use(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        text = _text(data.get("tool_response"))
        if text in self._fatal:
            self._fatal.remove(text)
            return self._after_call(data, tool_use_id, CallOutcome.FAILED, text, fatal=True)
        return self._after_call(data, tool_use_id, CallOutcome.OK, text)

    async def _post_tool_use_failure(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        if data.get("is_interrupt"):
            return {}
        return self._after_call(data, tool_use_id, CallOutcome.FAILED, str(data.get("error", "")))

    def _after_call(
        self,
        data: Any,
        tool_use_id: str | None,
        outcome: CallOutcome,
        text: str,
        fatal: bool = False,
    ) -> dict[str, Any]:
        call_id = tool_use_id or data.get("tool_use_id", "")
        call = self._calls.pop(call_id, None) or ToolCall(
            id=call_id, name=data["tool_name"], arguments=dict(data.get("tool_input") or {})
        )
        driver = self.driver
        if driver.stop is not None:  # a stop a failure called for: end here
            return _end(driver.stop)
        driver.observe(call, outcome, text, fatal=fatal)
        decision = driver.end_step()
        if isinstance(decision, Stop):
            return _end(decision)
        if isinstance(decision, Nudge):
            event = "PostToolUse" if outcome == CallOutcome.OK else "PostToolUseFailure"
            return {
                "hookSpecificOutput": {"hookEventName": event, "additionalContext": decision.note}
            }
        return {}

    async def _stop(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        text = str(data.get("last_assistant_message") or "")
        if text:
            self._last_text = text
        if self.driver.stop is not None:  # stopped already: let the session end
            return {}
        decision: Decision = await self.driver.answered_async(text)
        if isinstance(decision, Interrupted):
            return {"decision": "block", "reason": decision.message}
        return {}

    # -- the end ------------------------------------------------------------------------

    def record(self, message: object) -> StopReport | None:
        """See one message of the session (pass each, in order).

        Counts the main agent's model requests and their usage; at the
        ``ResultMessage``, `finish`es and returns the report.
        """
        if isinstance(message, AssistantMessage) and message.parent_tool_use_id is None:
            usage = message.usage or {}
            self._requests[message.message_id or str(len(self._requests))] = Usage(
                input_tokens=usage.get("input_tokens", 0),
                output_tokens=usage.get("output_tokens", 0),
                requests=1,
            )
            text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
            if text.strip():
                self._last_text = text
        elif isinstance(message, ResultMessage):
            return self.finish(message)
        return None

    def finish(self, result: ResultMessage) -> StopReport:
        """How the session ended, from its ``ResultMessage`` and the hooks' decisions."""
        driver = self.driver
        requests = self._requests
        tally = driver.tally
        tally.cycles = len(requests) if requests else result.num_turns
        tally.usage = sum(requests.values(), Usage())
        if result.total_cost_usd:
            tally.usage = dataclasses.replace(tally.usage, cost=result.total_cost_usd)
        if driver.stop is None or driver.stop.reason is StopReason.COMPLETED:
            limit = _limit_of(result, driver)
            if limit is not None:
                decision = decide(Facts(limit=limit))
                assert isinstance(decision, Stop)
                driver.stop = decision
            elif driver.stop is None:
                driver.judge_answer(None)
        self.report = driver.report(result.result or self._last_text)
        return self.report


def _limit_of(result: ResultMessage, driver: CycleDriver) -> LimitReached | None:
    limits = driver.limits
    if result.subtype == "error_max_turns" and limits.max_cycles is not None:
        return LimitReached(limit="max_cycles", used=result.num_turns, maximum=limits.max_cycles)
    if result.subtype == "error_max_budget_usd" and limits.max_cost is not None:
        return LimitReached(
            limit="max_cost", used=result.total_cost_usd or 0.0, maximum=limits.max_cost
        )
    return None


def _end(stop: Stop) -> dict[str, Any]:
    """End the session: Claude Code makes no further request."""
    return {"continue_": False, "stopReason": f"{stop.reason.value}: {stop.detail}"}


def _text(response: Any) -> str:
    """A tool's result as text: an MCP tool's text blocks joined, anything else as JSON."""
    if isinstance(response, str):
        return response
    if isinstance(response, list) and all(
        isinstance(block, dict) and block.get("type") == "text" for block in response
    ):
        return "".join(str(block.get("text", "")) for block in response)
    return json.dumps(response, sort_keys=True, default=str)
