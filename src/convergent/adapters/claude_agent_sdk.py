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

What the hooks cannot see is a model request: the CLI makes them. So ``max_cycles``
becomes the SDK's ``max_turns`` and ``max_cost`` its ``max_budget_usd``; a token or
wall-time budget cannot be expressed (`NotExpressible`). Claude Code makes no request
after a hook ends the session, so there is no final answer after a stop: the output is
the last text. Each hook sees one call, so a step is one call.

Install with ``pip install convergent[claude-agent-sdk]``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping
from typing import Any, Literal, cast

from claude_agent_sdk import ClaudeAgentOptions, HookContext, HookMatcher, ResultMessage
from claude_agent_sdk.types import HookCallback

from convergent.adapters import NotExpressible
from convergent.driver import CycleDriver, StopReport
from convergent.extensions import Verifier
from convergent.messages import ToolCall
from convergent.stop import (
    Decision,
    Facts,
    Interrupted,
    LimitReached,
    Limits,
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
            if isinstance(message, ResultMessage):
                report = convergence.finish(message)
        ```

    Args:
        limits: Budgets and thresholds (``max_cycles`` and ``max_cost`` only; see the
            module's notes).
        tools: Tool names with their ``read_only`` flag, when known (Claude Code's
            ``Read``, ``Grep``, ``Glob`` are read-only; ``Edit``, ``Write``, ``Bash``
            may change things).
        terminal_tools: Tools whose successful call hands the session off.
        max_consecutive_tool_errors: Failing calls in a row that end the session.
        on_tool_error: ``stop``: any tool failure ends the session.
        verifier: Checks the answer when the model stops; its feedback keeps it going.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        tools: Mapping[str, bool | None] | None = None,
        terminal_tools: Collection[str] = (),
        max_consecutive_tool_errors: int | None = 3,
        on_tool_error: Literal["continue", "stop"] = "continue",
        verifier: Verifier | None = None,
    ) -> None:
        limits = limits or Limits()
        if limits.max_total_tokens is not None or limits.max_seconds is not None:
            raise NotExpressible(
                "Claude Agent SDK hooks do not see model requests: a token or wall-time "
                "budget cannot be checked before one (use max_cycles or max_cost)"
            )
        self.driver = CycleDriver(
            limits,
            tools=tools,
            terminal_tools=terminal_tools,
            max_consecutive_tool_errors=max_consecutive_tool_errors,
            on_tool_error=on_tool_error,
            verifier=verifier,
            final_answer=False,
        )
        self.report: StopReport | None = None
        """How the session ended, once `finish` has seen its result."""
        self._calls: dict[str, ToolCall] = {}
        self._last_text = ""

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
        review = self.driver.review([call])
        if not review.skipped:
            return {}
        denied = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": review.skipped[0],
            }
        }
        if isinstance(review.decision, Stop):
            return {**denied, **_end(review.decision)}
        return denied

    async def _post_tool_use(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        return self._after_call(data, tool_use_id, "ok", _text(data.get("tool_response")))

    async def _post_tool_use_failure(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        if data.get("is_interrupt"):
            return {}
        return self._after_call(data, tool_use_id, "failed", str(data.get("error", "")))

    def _after_call(
        self, data: Any, tool_use_id: str | None, outcome: Literal["ok", "failed"], text: str
    ) -> dict[str, Any]:
        call_id = tool_use_id or data.get("tool_use_id", "")
        call = self._calls.pop(call_id, None) or ToolCall(
            id=call_id, name=data["tool_name"], arguments=dict(data.get("tool_input") or {})
        )
        driver = self.driver
        driver.observe(call, outcome, text)
        decision = driver.end_step()
        if isinstance(decision, Stop):
            return _end(decision)
        if isinstance(decision, Nudge):
            event = "PostToolUse" if outcome == "ok" else "PostToolUseFailure"
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
        decision: Decision = await self.driver.answered_async(text)
        if isinstance(decision, Interrupted):
            return {"decision": "block", "reason": decision.message}
        return {}

    # -- the end ------------------------------------------------------------------------

    def finish(self, result: ResultMessage) -> StopReport:
        """How the session ended, from its ``ResultMessage`` and the hooks' decisions."""
        driver = self.driver
        driver.tally.cycles = result.num_turns
        if driver.stop is None or driver.stop.reason is StopReason.COMPLETED:
            limit = _limit_of(result, driver)
            if limit is not None:
                decision = decide(Facts(limit=limit))
                assert isinstance(decision, Stop)
                driver.stop = decision
            elif driver.stop is None:
                driver.stop = Stop(StopReason.COMPLETED, "the model answered without tool calls")
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
    if isinstance(response, str):
        return response
    return json.dumps(response, sort_keys=True, default=str)
