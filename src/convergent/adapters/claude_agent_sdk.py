"""Convergent's stop decisions as Claude Agent SDK hooks.

`Convergence` gives ``ClaudeAgentOptions`` three kinds of hook, each the SDK's own:

- ``PreToolUse`` reviews each tool call before it runs: a stalled call is denied with
  the nudge as the reason the model reads; past the nudge the call is denied with the
  request for the answer after the stop.
- ``PostToolUse`` and ``PostToolUseFailure`` record each result, so polling that
  changes and reading after a write count as progress; a persisting tool-error streak
  gets a nudge (``additionalContext``), then the request for the answer after the
  stop; a hand-off ends the session.
- ``Stop`` checks the last answer against ``output`` and the verifier: while it fails,
  the stop is blocked and the model told why. Claude Code delivers only so many blocks
  in a row (``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``, 8 by default): the last it delivers
  ends the run ``stalled`` instead and asks for the answer after the stop, so the
  session never ends on a rejected answer reported as done.

After a stop the model answers once more, as after convergent's loop's final request:
its tool calls are denied and any call after that ends the session (``continue:
false``). Claude Code hands the hooks a failure as text only; wrap in-process SDK
tools with `Convergence.tools` and their exceptions reach the model in convergent's
words, and a fatal `ToolError` stops the run at once (its result goes to
``PostToolUse``, where the stop is decided; the model never reads it).

What the hooks cannot see is a model request: the CLI makes them. So ``max_cycles``
becomes the SDK's ``max_turns`` and ``max_cost`` its ``max_budget_usd``, and Claude Code
ends the session itself there, with no answer after the stop; a token or wall-time
budget cannot be expressed (`NotExpressible`). Iterate `Convergence.query`: it passes
each message to `record`, which counts the requests and their usage, and ends
quietly where the SDK would raise ``ResultError`` for a limit the adapter set. Each
hook sees one call, so a step is one call.

Install with ``pip install convergent[claude-agent-sdk]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Unpack, cast

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookContext,
    HookMatcher,
    ResultError,
    ResultMessage,
    SdkMcpTool,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from claude_agent_sdk import query as sdk_query
from claude_agent_sdk.types import HookCallback, Message

from convergent._claude_code import claude_code_block_cap
from convergent.adapters import NotExpressible
from convergent.adapters._policy import settled, told
from convergent.effects import Declared, Effect, annotated_effect
from convergent.limits import Limits
from convergent.loop.driver import CycleDriver, PolicyOptions
from convergent.loop.ending import StopReport
from convergent.loop.executor import failure_result
from convergent.messages import CallOutcome, ToolCall, Usage, reply_end
from convergent.models._prices import PriceLike, TokenPrice, known_price, priced, token_price
from convergent.stop import (
    Decision,
    Facts,
    LimitReached,
    Nudge,
    Stall,
    Stop,
    StopReason,
)

__all__ = ["Convergence"]

_READS = ("Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch", "ToolSearch", "CronList")
_WRITES = ("CronCreate", "CronDelete", "TaskCreate", "TaskStop", "SendMessage", "ScheduleWakeup")

CLAUDE_CODE_TOOLS: Mapping[str, Effect] = {
    **dict.fromkeys(_READS, Effect.READ),
    **dict.fromkeys(("ListAgents", "TaskGet", "TaskList", "BashOutput"), Effect.READ),
    **dict.fromkeys(("Edit", "MultiEdit", "NotebookEdit"), Effect.WRITE),
    **dict.fromkeys(("Write", "TodoWrite", "TaskUpdate"), Effect.IDEMPOTENT),
    **dict.fromkeys(_WRITES, Effect.WRITE),
    **dict.fromkeys(("EnterWorktree", "ExitWorktree"), Effect.WRITE),
}
"""The effect of Claude Code's own tools, as its documentation describes them: reads and
look-ups only read; an edit (a string replaced), scheduling and messages change
something each time; writing a file's whole content, the to-do list or a task's state
again is the same change. A tool not named here (``Bash``, ``Task``, ``Skill``...) may
do either."""

_LIMIT_RESULTS = {"error_max_turns": "max_cycles", "error_max_budget_usd": "max_cost"}
"""Claude Code's results for the limits the adapter sets, by the limit they stand for."""


_SETTLE_SECONDS = 2.0
"""How long a hook waits for the end of the response it follows to be recorded."""


@dataclasses.dataclass(slots=True)
class _Response:
    """One model response of the main agent, as `record` saw it.

    Claude Code sends one message per content block, under the response's id, and
    (with partial messages) the stream's events: its start, then its stop reason and
    final usage.
    """

    usage: Usage
    tool_ids: set[str] = dataclasses.field(default_factory=set)
    text: str = ""
    blocks: set[str] = dataclasses.field(default_factory=set)
    """The text blocks seen, so that a message seen twice adds its text once."""
    calls: dict[str, ToolCall] = dataclasses.field(default_factory=dict)
    """Its tool calls, by id."""
    stop_reason: str | None = None
    """Why the model stopped, once the stream said (``end_turn``, ``max_tokens``...)."""
    judged: Decision | None = None
    """What a reply that was no answer (empty, cut) was judged, when `record` judged it."""


class Convergence:
    """The stop decisions of one Claude Agent SDK session (make one per session).

    Example:
        ```python
        convergence = Convergence(Limits(max_cycles=20), verifier=tests_pass)
        async for message in convergence.query(prompt=task):
            ...
        convergence.report.reason
        ```

    Args:
        limits: Budgets and thresholds (``max_cycles`` and ``max_cost`` only; see the
            module's notes).
        **options: The rest of the stop policy (`convergent.loop.driver.PolicyOptions`).
            Give ``tools`` the ``read_only`` flags you know (Claude Code's ``Read``,
            ``Grep``, ``Glob`` only read; ``Edit``, ``Write``, ``Bash`` may change
            things); ``output`` and the ``verifier`` run when the model stops, and
            their feedback keeps it going.

    Raises:
        NotExpressible: For a token or wall-time budget.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        price: PriceLike | None = None,
        **options: Unpack[PolicyOptions],
    ) -> None:
        limits, options = settled(limits, options)
        if limits.max_total_tokens is not None or limits.max_seconds is not None:
            raise NotExpressible(
                "Claude Agent SDK hooks do not see model requests: a token or wall-time "
                "budget cannot be checked before one (use max_cycles or max_cost)"
            )
        self._given_tools = options.get("tools")
        self._declared: dict[str, Effect] = {}
        """The effects the wrapped SDK tools declare (MCP annotations), by tool name."""
        self.price: TokenPrice | None = token_price(price) if price is not None else None
        """The model's price; None: the price table's for the model Claude Code names."""
        self.driver = CycleDriver(limits, price=self.price, **options)
        self.report: StopReport | None = None
        """How the session ended, once `finish` has seen its result."""
        self.block_cap: int | None = claude_code_block_cap(os.environ)
        """Stop-hook blocks in a row Claude Code delivers (set by `options` from the
        environment the CLI gets); None: no cap."""
        self._calls: dict[str, ToolCall] = {}
        self._last_text = ""
        self._fatal: list[str] = []
        """Texts of fatal failures of wrapped tools, until ``PostToolUse`` sees them."""
        self._responses: dict[str, _Response] = {}
        """The main agent's model responses seen by `record`, by message id, in order."""
        self._blocks = 0
        """Stop-hook blocks given in a row."""
        self._rejected = False
        """The latest answer failed its checks (and the session may end on it)."""
        self._anchor: str | None = None
        """What the stop was decided at: the call's id, or the answer's text."""
        self._asked = False
        """The model was asked for the answer after the stop."""
        self._after: str | None = None
        """The answer after the stop, once the model gave it."""
        self._step: set[str] = set()
        """The ids of the calls of the response whose tools are running."""
        self._done: set[str] = set()
        """Those that are done (a result came, or the review held them back)."""
        self._counted: set[str] = set()
        """Calls whose step has ended: a response recorded after its first call ran must
        not bring that call into a second step."""
        self._pending_note: str | None = None
        """A note decided where no context can be added (a step ended by the next call's
        PreToolUse): it goes with the next call's result."""
        self._hooked: set[str] = set()
        """Calls a ``PreToolUse`` hook saw (Claude Code refuses a call of a tool it does
        not have before any hook runs)."""
        self._streaming: str | None = None
        """The response whose stream has started and not yet ended."""
        self._settled = asyncio.Event()
        """No response is streaming (set when one ends)."""
        self._settled.set()
        self._streamed = False
        """Claude Code sends the stream's events (partial messages)."""
        self._show_events = False
        """The caller asked for the stream's events too: `query` passes them on."""
        self._unheard = False
        """A stop decided from the messages alone, which no hook has delivered yet."""
        self._abandon = False
        """The session goes on past a stop no hook can deliver: `query` ends it."""

    def tools(self, *tools: SdkMcpTool[Any]) -> list[SdkMcpTool[Any]]:
        """Copies of in-process SDK tools whose exceptions the policy can read.

        A tool's exception becomes an error result in convergent's words (instead of the
        SDK's bare message), and a `ToolError(fatal=True)` stops the run when its
        failure reaches ``PostToolUse``. Give the copies to ``create_sdk_mcp_server``.
        """
        for tool in tools:
            self._declared[tool.name] = annotated_effect(tool.annotations)
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
        environment: Mapping[str, str] = {**os.environ, **(base.env or {})}
        self.block_cap = claude_code_block_cap(environment)
        cycles = limits.max_cycles
        # one turn more for the answer after a stop at max_cycles, which the hooks ask for
        turns = cycles + int(self.driver.final_answer) if cycles is not None else base.max_turns
        self._show_events = base.include_partial_messages
        return dataclasses.replace(
            base,
            hooks=hooks,
            max_turns=turns,
            max_budget_usd=limits.max_cost if limits.max_cost is not None else base.max_budget_usd,
            # each response's stop reason and final usage: a cut or empty reply, its cost
            include_partial_messages=True,
        )

    async def query(
        self,
        *,
        prompt: str | AsyncIterable[dict[str, Any]],
        options: ClaudeAgentOptions | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Message]:
        """``claude_agent_sdk.query`` with this session's `options`, each message recorded.

        Where Claude Code ends the session at a limit the adapter set (``max_turns`` for
        ``max_cycles``, ``max_budget_usd`` for ``max_cost``), the SDK raises
        ``ResultError`` after the result: here the iteration simply ends, and `report`
        says ``max_cycles`` or ``budget_exhausted``. Other errors are raised.
        """
        messages = sdk_query(prompt=prompt, options=self.options(options), **kwargs)
        try:
            async for message in messages:
                self.record(message)
                if self._abandon:  # a stop no hook can deliver: the session ends here
                    self.report = self._reported()
                    return
                if not isinstance(message, StreamEvent) or self._show_events:
                    yield message
        except ResultError as error:
            if not self._ended_by_a_limit(error):
                raise
        finally:
            closing = getattr(messages, "aclose", None)
            if closing is not None:
                await closing()

    def _ended_by_a_limit(self, error: ResultError) -> bool:
        report = self.report
        return (
            report is not None
            and error.subtype in _LIMIT_RESULTS
            and report.reason in (StopReason.MAX_CYCLES, StopReason.BUDGET_EXHAUSTED)
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
        self._hooked.add(call.id)
        self._unheard = False  # a stop decided meanwhile is delivered below
        driver = self.driver
        if driver.stop is None and self._step and call.id not in self._step:
            decision = self._end_step()  # a step whose results did not all come back
            if isinstance(decision, Stop):
                prompt = self._stopped(decision, call.id)
                return _deny(prompt) if prompt else _deny(decision.detail, end=decision)
            if isinstance(decision, Nudge):
                self._pending_note = decision.note
        stop = driver.stop
        if stop is not None:  # in the batch the stop came in, denied; after it, the end
            ended = None if self._beside_anchor(call.id) else stop
            return _deny(f"not executed: {stop.detail}", end=ended)
        self._step = self._step or self._batch(call.id)
        review = driver.review([call])
        if not review.skipped:
            return {}
        self._done.add(call.id)
        decision = review.decision
        if isinstance(decision, Stop):
            prompt = self._stopped(decision, call.id)
            return _deny(prompt) if prompt else _deny(review.skipped[0], end=decision)
        text = review.skipped[0]
        if self._step <= self._done:  # the last call of its step: a cap's stop comes now
            await self._settle()
            step = self._end_step()
            if isinstance(step, Stop):
                prompt = self._stopped(step, call.id)
                return _deny(f"{text}\n\n{prompt}") if prompt else _deny(text, end=step)
            if isinstance(step, Nudge):
                text = f"{text}\n\n{step.note}"
        return _deny(text)

    async def _post_tool_use(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        text = _text(data.get("tool_response"))
        if text in self._fatal:
            self._fatal.remove(text)
            return await self._after_call(data, tool_use_id, CallOutcome.FAILED, text, fatal=True)
        return await self._after_call(data, tool_use_id, CallOutcome.OK, text)

    async def _post_tool_use_failure(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        if data.get("is_interrupt"):
            return {}
        error = str(data.get("error", ""))
        return await self._after_call(data, tool_use_id, CallOutcome.FAILED, error)

    async def _after_call(
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
        if driver.stop is not None:
            return {}
        driver.observe(call, outcome, text, fatal=fatal)
        self._done.add(call_id)
        event = str(data.get("hook_event_name") or "PostToolUse")
        pending, self._pending_note = self._pending_note, None
        if self._step <= self._done:
            await self._settle()  # the response's usage and cost, before the limits
            # and its calls: those whose blocks came after this call started are its step's
            self._step |= self._batch(call_id)
        if not self._step <= self._done:  # the step goes on: more calls of the response
            return _context(event, pending) if pending is not None else {}
        decision = self._end_step()
        if isinstance(decision, Stop):
            prompt = self._stopped(decision, call_id)
            return _context(event, prompt) if prompt else _end(decision)
        notes = [pending] if pending is not None else []
        if isinstance(decision, Nudge):
            notes.append(decision.note)
        else:
            budget = driver.budget_note()
            notes += [budget] if budget is not None else []
        return _context(event, "\n\n".join(notes)) if notes else {}

    def _end_step(self) -> Decision:
        """A response's calls are done: the step's decision, then the limits."""
        self._counted |= self._step
        self._step, self._done = set(), set()
        driver = self.driver
        decision = driver.end_step()
        if isinstance(decision, Stop | Nudge):
            return decision
        driver.tally.cycles = len(self._responses)
        return driver.before_request()

    def _batch(self, call_id: str) -> set[str]:
        """The calls of the response ``call_id`` came in (itself alone, if unseen)."""
        for response in self._responses.values():
            if call_id in response.tool_ids:
                return set(response.tool_ids) - self._counted
        return {call_id}

    async def _stop(
        self, data: Any, tool_use_id: str | None, context: HookContext
    ) -> dict[str, Any]:
        text = str(data.get("last_assistant_message") or "")
        if text:
            self._last_text = text
        await self._settle()
        driver = self.driver
        if driver.stop is None and self._step:  # a step whose results did not all come back
            self._end_step()
        if driver.stop is not None:  # the answer after the stop: let the session end
            if (self._asked or self._unheard) and self._after is None:
                self._after = text
                self._asked = True
            return {}
        if not data.get("stop_hook_active"):
            self._blocks = 0
        last = self._latest()
        if last is not None and last.judged is not None:  # no answer: judged when it came
            decision = last.judged
        else:
            stop_reason = last.stop_reason if last is not None else None
            decision = await driver.answered_async(text, stop_reason)
        feedback = told(decision)
        self._rejected = feedback is not None
        if feedback is not None:
            driver.tally.cycles = len(self._responses)
            self._blocks += 1
            if isinstance(driver.before_request(), Stop):
                pass  # a limit: the answer after the stop is asked for below
            elif self.block_cap is None or self._blocks < self.block_cap:
                note = driver.budget_note()
                reason = feedback if note is None else f"{feedback}\n\n{note}"
                return {"decision": "block", "reason": reason}
            else:  # the last block Claude Code delivers: used for the answer
                capped = Stall(
                    what=f"the answer (Claude Code delivers at most {self.block_cap} stop-hook "
                    "blocks in a row)",
                    times=self._blocks,
                    kind="rejected",
                )
                driver.host_stop(Facts(stall=capped))
        stop = driver.stop
        if stop is None or stop.reason is StopReason.COMPLETED:
            return {}
        prompt = self._stopped(stop, text)
        return {"decision": "block", "reason": prompt} if prompt else {}

    def _beside_anchor(self, call_id: str) -> bool:
        """Whether a call came in the same response as the call the stop was decided at."""
        anchor = self._anchor
        return anchor is not None and any(
            anchor in response.tool_ids and call_id in response.tool_ids
            for response in self._responses.values()
        )

    def _stopped(self, stop: Stop, anchor: str) -> str | None:
        """A stop decided at a hook: the request for the answer after it, if one is due."""
        self._anchor = anchor
        final = self.driver.final_request(stop)
        self._asked = final is not None
        return final.prompt if final is not None else None

    # -- the end ------------------------------------------------------------------------

    def record(self, message: object) -> StopReport | None:
        """See one message of the session (pass each, in order; `query` does).

        Counts the main agent's model requests and their usage; at the
        ``ResultMessage``, `finish`es and returns the report.
        """
        if isinstance(message, SystemMessage) and message.subtype == "init":
            self._offered(message.data.get("tools"))
        elif isinstance(message, StreamEvent):
            if message.parent_tool_use_id is None:
                self._streamed = True
                self._stream_event(message.event)
        elif isinstance(message, AssistantMessage) and message.parent_tool_use_id is None:
            key = message.message_id or str(len(self._responses))
            response = self._responses.get(key) or self._response(key, message.usage)
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    response.tool_ids.add(block.id)
                    response.calls[block.id] = ToolCall(
                        id=block.id, name=block.name, arguments=dict(block.input)
                    )
                elif isinstance(block, TextBlock) and block.text not in response.blocks:
                    response.blocks.add(block.text)
                    response.text += block.text
            if response.text.strip():
                self._last_text = response.text
        elif isinstance(message, UserMessage) and message.parent_tool_use_id is None:
            self._refused(message)
        elif isinstance(message, ResultMessage):
            return self.finish(message)
        return None

    def _offered(self, names: Any) -> None:
        """The tools Claude Code lists as the session begins, with their effects.

        Each name's effect is the caller's (``tools``), else what a wrapped SDK tool's
        MCP annotations declare, else Claude Code's own tool's (`CLAUDE_CODE_TOOLS`), else
        undeclared.
        """
        if not isinstance(names, list):
            return
        given = self._given_tools or {}
        effects: dict[str, Declared] = {}
        for name in map(str, names):
            if name in given:
                effects[name] = given[name]
            elif name.startswith("mcp__") and name.rpartition("__")[2] in self._declared:
                effects[name] = self._declared[name.rpartition("__")[2]]
            else:
                effects[name] = CLAUDE_CODE_TOOLS.get(name, Effect.UNDECLARED)
        self.driver.offers(effects)

    def _response(self, key: str, usage: Mapping[str, Any] | None) -> _Response:
        usage = usage or {}
        response = self._responses[key] = _Response(
            Usage(
                input_tokens=usage.get("input_tokens", 0),
                output_tokens=usage.get("output_tokens", 0),
                requests=1,
            )
        )
        return response

    def _stream_event(self, event: Mapping[str, Any]) -> None:
        """A response's start (a request made) and end (its stop reason, its final usage).

        A reply without tool calls that is no answer (empty, cut at the token limit) is
        judged here: Claude Code asks the model to go on by itself, past any hook.
        """
        kind = event.get("type")
        driver = self.driver
        if kind == "message_start":
            started = event.get("message") or {}
            key = str(started.get("id") or len(self._responses))
            if key not in self._responses:
                self._response(key, started.get("usage"))
            self._streaming = key
            self._settled.clear()
            if self.price is None and started.get("model"):
                self.price = known_price(str(started["model"]), "anthropic")
                driver.budget.price = self.price
            driver.start_request()
        elif kind == "message_delta" and self._streaming is not None:
            response = self._responses[self._streaming]
            response.stop_reason = (event.get("delta") or {}).get("stop_reason")
            output = (event.get("usage") or {}).get("output_tokens", 0)
            response.usage = dataclasses.replace(response.usage, output_tokens=output)
            driver.responded(response.usage)
            if not response.tool_ids and reply_end(response.text, response.stop_reason) != "answer":
                response.judged = driver.unfinished(response.text, response.stop_reason)
            self._streaming = None
            self._settled.set()

    def _refused(self, message: UserMessage) -> None:
        """Results of calls Claude Code refused itself (a tool it does not have): mistakes.

        No hook sees such a call: it is counted here, and its step judged when the
        response's calls are all done. A note goes with the next hook's answer; a stop
        no hook delivers before the model goes on ends the session (`query`).
        """
        if not isinstance(message.content, list):
            return
        driver = self.driver
        for block in message.content:
            if not isinstance(block, ToolResultBlock) or block.tool_use_id in self._hooked:
                continue
            if not block.is_error:
                continue
            if driver.stop is not None:
                self._abandon = self._unheard  # the model goes on past a stop it never heard
                return
            call = self._call_of(block.tool_use_id)
            driver.observe(call, CallOutcome.INVALID, _text(block.content))
            self._hooked.add(call.id)
            self._step = self._step or self._batch(call.id)
            self._done.add(call.id)
            if self._step <= self._done:
                decision = self._end_step()
                if isinstance(decision, Nudge):
                    self._pending_note = decision.note
                elif isinstance(decision, Stop):
                    self._unheard = True
                    self._anchor = call.id

    def _call_of(self, call_id: str) -> ToolCall:
        for response in self._responses.values():
            call = response.calls.get(call_id)
            if call is not None:
                return call
        return ToolCall(id=call_id, name="", arguments={})

    def _latest(self) -> _Response | None:
        """The latest response recorded."""
        return next(reversed(self._responses.values()), None)

    async def _settle(self) -> None:
        """Wait (briefly) until the response being streamed has been recorded to its end.

        Hooks and messages travel separately: a hook may come before the messages that
        precede it have been recorded.
        """
        if self._streamed and not self._settled.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._settled.wait(), _SETTLE_SECONDS)

    def finish(self, result: ResultMessage) -> StopReport:
        """How the session ended, from its ``ResultMessage`` and the hooks' decisions."""
        driver = self.driver
        if not self._responses:
            driver.tally.cycles = result.num_turns
        if driver.stop is None:
            limit = _limit_of(result, driver)
            if limit is not None:  # Claude Code's own end at a limit the adapter set
                driver.host_stop(Facts(limit=limit))
            elif self._rejected:  # it ended the turn on a block it would not deliver
                rejected = Stall(
                    what="the answer (the session ended on it: Claude Code delivers only so "
                    "many stop-hook blocks in a row)",
                    times=driver.monitor.state.rejections,
                    kind="rejected",
                )
                driver.host_stop(Facts(stall=rejected))
            elif result.is_error:
                error = f"the session ended with an error ({result.subtype}) before an answer"
                driver.host_stop(Facts(model_error=error))
            else:
                driver.judge_answer(None)
        self.report = self._reported(result.result, result.total_cost_usd)
        return self.report

    def _reported(self, text: str | None = None, cost: float | None = None) -> StopReport:
        """The report of the session so far: its cycles and usage from the responses.

        Args:
            text: Claude Code's last answer, if it gave one.
            cost: What Claude Code reported the session cost, if it did.
        """
        driver = self.driver
        tally = driver.tally
        cycles, before, after = self._split()
        if self._responses:
            tally.cycles = cycles
            usages = (priced(response.usage, self.price) for response in self._responses.values())
            tally.usage = sum(usages, Usage())
        if cost:
            tally.usage = dataclasses.replace(tally.usage, cost=cost)
        if before is None:
            return driver.report(text or self._last_text)
        if not self._asked:  # a reply Claude Code asked for past the end: not the run's
            return driver.report(before)
        return driver.report(before, self._after or after)

    def _split(self) -> tuple[int, str | None, str | None]:
        """The cycles; after a stop, the text before it and what came after it.

        The responses after the one the stop was decided at are not cycles: the answer
        after the stop, or a request Claude Code made although the hook ended the session
        (``continue: false`` after the last call of a response of several).
        """
        anchor = self._anchor
        responses = list(self._responses.values())
        # an answer the stop was decided at is not the answer after it, even word for word
        newest = len(responses) - (2 if self._after is not None else 1)
        for position in range(len(responses) - 1, -1, -1):
            response = responses[position]
            if anchor is not None and (
                anchor in response.tool_ids or (anchor == response.text and position <= newest)
            ):
                said = [r.text for r in responses[: position + 1] if r.text.strip()]
                answer = "".join(r.text for r in responses[position + 1 :])
                return position + 1, said[-1] if said else "", answer
        return len(responses), None, None


def _limit_of(result: ResultMessage, driver: CycleDriver) -> LimitReached | None:
    limits = driver.limits
    if result.subtype == "error_max_turns" and limits.max_cycles is not None:
        return LimitReached(limit="max_cycles", used=result.num_turns, maximum=limits.max_cycles)
    if result.subtype == "error_max_budget_usd" and limits.max_cost is not None:
        return LimitReached(
            limit="max_cost", used=result.total_cost_usd or 0.0, maximum=limits.max_cost
        )
    return None


def _deny(reason: str, *, end: Stop | None = None) -> dict[str, Any]:
    """Deny a call with ``reason`` (what the model reads); with ``end``, end the session."""
    denied = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
    return {**denied, **_end(end)} if end is not None else denied


def _context(event: str, text: str) -> dict[str, Any]:
    """Text for the model after a tool call (a nudge, or the request for the answer)."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


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
