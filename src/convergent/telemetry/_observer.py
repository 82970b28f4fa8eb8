"""`OpenTelemetryObserver`: a run's events as spans of the OpenTelemetry GenAI conventions.

One ``invoke_agent`` span per `Agent.run` call, with a ``chat`` span per model request
and an ``execute_tool`` span per tool call as its children. Every span starts and ends
at the ``time`` of the events that bound it, so calls that ran concurrently overlap in
the trace as they did in the run. Decisions that are not operations (gate decisions,
verifier verdicts, redirects, stalls, compaction) are span events on the run span.

While a span is open its context is the current one, so spans made by code it runs (an
instrumented HTTP client inside a model backend or a tool) become its children.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from convergent.clock import now
from convergent.events import (
    CycleStarted,
    Event,
    ModelResponded,
    Redirected,
    RunStarted,
    RunStopped,
    ToolFinished,
    ToolStarted,
    Verified,
)
from convergent.messages import CallOutcome, SystemMessage, UserMessage
from convergent.state import RunState
from convergent.stop import StopReason
from convergent.telemetry._content import content_from_env, dumps, input_messages, output_messages

if TYPE_CHECKING:
    from convergent.compaction import ContextCompacted
    from convergent.gate.events import GateDecided, UserAnswered

__all__ = ["OpenTelemetryObserver"]

_LOG = logging.getLogger("convergent.telemetry")

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
COST = "gen_ai.usage.cost"
"""Cost in US dollars: not in the GenAI conventions; the name OpenLIT's spans use."""
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
STREAM = "gen_ai.request.stream"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
SPAN_KIND = "openinference.span.kind"
"""The span's kind as OpenInference readers (Arize Phoenix) sort spans: AGENT, LLM, TOOL."""
INPUT_VALUE = "input.value"
"""The task, where OpenInference readers show a span's input in their lists."""
OUTPUT_VALUE = "output.value"
"""The answer, where they show its output."""
ERROR_TYPE = "error.type"

_CONTENT_DETAILS = frozenset({StopReason.HANDED_OFF, StopReason.NEEDS_USER, StopReason.STOPPED})
"""Stops whose detail is what a tool, the model or the user said, not the loop's words."""
_ERROR_STOPS = frozenset({StopReason.TOOL_ERROR, StopReason.MODEL_ERROR})
_OK_OUTCOMES = frozenset({CallOutcome.OK, CallOutcome.NEEDS_USER})

Attributes = dict[str, Any]


def _plain(key: str, text: str) -> dict[str, str]:
    """An OpenInference value and its MIME type (``input.value``, ``input.mime_type``)."""
    return {key: text, key.replace(".value", ".mime_type"): "text/plain"}


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _current_task() -> object:
    try:
        return asyncio.current_task()
    except RuntimeError:  # driven outside an event loop
        return None


def _provider_and_model(name: str) -> tuple[str, str]:
    """``openai:gpt-4o`` -> (``openai``, ``gpt-4o``); a name without a provider is both.

    A local GGUF model is named by its file (``local:/m/qwen.gguf`` -> ``qwen``), and
    the embedded one by its own (``SmolLM2-135M-Instruct.Q4_1``), not ``local``.
    """
    provider, sep, model = name.partition(":")
    if provider == "local":
        from convergent.models._llama_server import EMBEDDED_GGUF_NAME

        return provider, PurePath(model or EMBEDDED_GGUF_NAME).name.removesuffix(".gguf")
    return (provider, model) if sep and model else (name, name)


def tool_error_type(name: str, outcome: CallOutcome, result: str) -> str | None:
    """``error.type`` of a call that did not succeed (None when it did).

    A failure is named by the exception the tool raised, read from the result text the
    executor writes (``NAME raised TYPE: ...``, ``NAME failed: ...``, ``NAME timed out
    after ...``); the model's mistakes and calls that never ran are named by outcome.
    """
    if outcome in _OK_OUTCOMES:
        return None
    if outcome != CallOutcome.FAILED:
        return outcome.value
    rest = result.removeprefix(f"{name} ")
    if rest.startswith("timed out after"):
        return "timeout"
    if rest.startswith("raised "):
        return rest.removeprefix("raised ").partition(":")[0] or "_OTHER"
    return "ToolError"


@dataclass(slots=True, eq=False)
class _OpenRun:
    """What the observer holds for one run in progress."""

    span: Span
    context: Context
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    task: object
    token: object
    chat: Span | None = None
    chat_token: object = None
    cost: float = 0.0
    """The run's cost when this call of `Agent.run` started."""
    tools: dict[str, tuple[Span, object, object]] = field(default_factory=dict)
    """Open tool spans by call id, each with the task and context token of its call."""


class OpenTelemetryObserver:
    """Traces runs as OpenTelemetry spans following the GenAI semantic conventions.

    Pass it to ``Agent(observers=[...])``; an agent also adds one by itself when an
    OpenTelemetry SDK tracer provider is configured globally (see ``Agent(instrument=)``).
    One observer may serve many runs at once. It never raises into a run: a failure to
    record is logged on the ``convergent.telemetry`` logger.

    Args:
        tracer_provider: Where spans go (default: the global tracer provider).
        record_content: Record message content: the prompt, the model's text, tool
            arguments and results, questions and answers. Default: off, unless the
            environment variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
            is ``true``.
        agent_name: ``gen_ai.agent.name`` (default ``convergent``), and the run span's
            name after ``invoke_agent``; without it the span is named after the run id,
            so that a trace UI's list tells runs apart.
    """

    receives_deltas = False
    """Spans need only each request's end and its time to first delta."""

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        record_content: bool | None = None,
        agent_name: str | None = None,
    ) -> None:
        from convergent._version import __version__

        self.record_content = content_from_env() if record_content is None else record_content
        self.agent_name = agent_name
        self._tracer = trace.get_tracer("convergent", __version__, tracer_provider=tracer_provider)
        self._runs: dict[str, _OpenRun] = {}
        self._handlers: dict[str, Callable[[Any, RunState], None]] = {
            RunStarted.type: self._run_started,
            CycleStarted.type: self._cycle_started,
            ModelResponded.type: self._responded,
            ToolStarted.type: self._tool_started,
            ToolFinished.type: self._tool_finished,
            RunStopped.type: self._run_stopped,
            Redirected.type: self._redirected,
            Verified.type: self._verified,
            "gate_decided": self._gate_decided,
            "user_answered": self._user_answered,
            "context_compacted": self._compacted,
        }

    def on_event(self, event: Event, state: RunState) -> None:
        """Open, close or annotate the spans the event concerns."""
        try:
            handler = self._handlers.get(event.type)
            if handler is not None:
                handler(event, state)
            else:
                self._other(event)
        except Exception:  # tracing must never break the run it traces
            _LOG.warning("could not record %s as telemetry", event.type, exc_info=True)

    def on_run_error(self, error: BaseException, state: RunState) -> None:
        """End a run's open spans when an exception ends it without a `RunStopped`."""
        run = self._runs.pop(state.run_id, None)
        if run is None:
            return
        try:
            when = _ns(now())
            error_type = type(error).__qualname__
            status = Status(StatusCode.ERROR, str(error) or error_type)
            current = _current_task()
            for span, task, token in reversed(run.tools.values()):
                if task is current:
                    otel_context.detach(cast(Any, token))
                span.set_attribute(ERROR_TYPE, error_type)
                span.set_status(status)
                span.end(when)
            if run.chat is not None:
                self._end_chat(run, when, error_type, status)
            run.span.record_exception(error, timestamp=when)
            run.span.set_attribute(ERROR_TYPE, error_type)
            run.span.set_status(status)
            if run.task is current:
                otel_context.detach(cast(Any, run.token))
            run.span.end(when)
        except Exception:  # tracing must never hide the run's own error
            _LOG.warning("could not record a run's error as telemetry", exc_info=True)

    # --- operations -------------------------------------------------------------

    def _run_started(self, event: RunStarted, state: RunState) -> None:
        provider, model = _provider_and_model(event.model)
        attributes: Attributes = {
            OPERATION: "invoke_agent",
            SPAN_KIND: "AGENT",
            "gen_ai.agent.name": self.agent_name or "convergent",
            PROVIDER: provider,
            REQUEST_MODEL: model,
            "gen_ai.conversation.id": event.run_id,
            "convergent.run.id": event.run_id,
            "convergent.resumed": event.resumed,
            "convergent.tools": list(event.tools),
        }
        if self.record_content:
            attributes[INPUT_MESSAGES] = input_messages([UserMessage(content=event.task)])
            attributes.update(_plain(INPUT_VALUE, event.task))
            system = [m.content for m in state.messages if isinstance(m, SystemMessage)]
            if system:
                parts = [{"type": "text", "content": text} for text in system]
                attributes["gen_ai.system_instructions"] = dumps(parts)
        span = self._tracer.start_span(
            f"invoke_agent {self.agent_name or event.run_id}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(event.time),
        )
        context = trace.set_span_in_context(span)
        self._runs[event.run_id] = _OpenRun(
            span=span,
            context=context,
            provider=provider,
            model=model,
            input_tokens=state.usage.input_tokens,
            output_tokens=state.usage.output_tokens,
            cost=state.usage.cost,
            task=_current_task(),
            token=otel_context.attach(context),
        )

    def _cycle_started(self, event: CycleStarted, state: RunState) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        attributes: Attributes = {
            OPERATION: "chat",
            SPAN_KIND: "LLM",
            PROVIDER: run.provider,
            REQUEST_MODEL: run.model,
            "convergent.cycle": event.cycle,
        }
        if self.record_content:
            attributes[INPUT_MESSAGES] = input_messages(state.messages)
        span = self._tracer.start_span(
            f"chat {run.model}",
            context=run.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=_ns(event.time),
        )
        run.chat = span
        run.chat_token = otel_context.attach(trace.set_span_in_context(span, run.context))

    def _responded(self, event: ModelResponded, state: RunState) -> None:
        run = self._runs.get(event.run_id)
        if run is None or run.chat is None:
            return
        span = run.chat
        usage = event.usage
        attributes: Attributes = {
            INPUT_TOKENS: usage.input_tokens,
            OUTPUT_TOKENS: usage.output_tokens,
            "convergent.tool_calls": len(event.tool_calls),
        }
        if event.first_delta is not None:
            # the conventions set the stream flag only on streamed requests
            attributes[STREAM] = True
            attributes[TIME_TO_FIRST_CHUNK] = event.first_delta
        if event.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [event.finish_reason]
        if usage.cost:
            attributes[COST] = usage.cost
        if self.record_content:
            finish = event.finish_reason or ("tool_call" if event.tool_calls else "stop")
            attributes[OUTPUT_MESSAGES] = output_messages(event.content, event.tool_calls, finish)
            if event.metadata:
                attributes["convergent.response.metadata"] = dumps(event.metadata)
        span.set_attributes(attributes)
        self._end_chat(run, _ns(event.time))

    def _end_chat(
        self, run: _OpenRun, when: int, error_type: str | None = None, status: Status | None = None
    ) -> None:
        span, token = run.chat, run.chat_token
        assert span is not None
        run.chat = run.chat_token = None
        otel_context.detach(cast(Any, token))
        if error_type is not None:
            span.set_attribute(ERROR_TYPE, error_type)
        if status is not None:
            span.set_status(status)
        span.end(when)

    def _tool_attributes(self, name: str, call_id: str, cycle: int) -> Attributes:
        return {
            OPERATION: "execute_tool",
            SPAN_KIND: "TOOL",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "convergent.cycle": cycle,
        }

    def _tool_started(self, event: ToolStarted, state: RunState) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        attributes = self._tool_attributes(event.name, event.call_id, event.cycle)
        if self.record_content:
            attributes["gen_ai.tool.call.arguments"] = dumps(event.arguments)
        span = self._tracer.start_span(
            f"execute_tool {event.name}",
            context=run.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(event.time),
        )
        token = otel_context.attach(trace.set_span_in_context(span, run.context))
        run.tools[event.call_id] = (span, _current_task(), token)

    def _tool_finished(self, event: ToolFinished, state: RunState) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        opened = run.tools.pop(event.call_id, None)
        if opened is None:
            # a call an earlier process started, settled on resume without running here
            span = self._tracer.start_span(
                f"execute_tool {event.name}",
                context=run.context,
                kind=SpanKind.INTERNAL,
                attributes=self._tool_attributes(event.name, event.call_id, event.cycle),
                start_time=_ns(event.time - event.duration),
            )
        else:
            span, _, token = opened
            otel_context.detach(cast(Any, token))
        span.set_attribute("convergent.tool.outcome", event.outcome.value)
        if self.record_content:
            span.set_attribute("gen_ai.tool.call.result", event.result)
        error_type = tool_error_type(event.name, event.outcome, event.result)
        if error_type is not None:
            span.set_attribute(ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, event.result))
        span.end(_ns(event.time))

    def _run_stopped(self, event: RunStopped, state: RunState) -> None:
        run = self._runs.pop(event.run_id, None)
        if run is None:
            return
        when = _ns(event.time)
        reason = event.reason
        failed = Status(StatusCode.ERROR, event.detail) if reason in _ERROR_STOPS else None
        current = _current_task()
        for span, task, token in reversed(run.tools.values()):
            if task is current:
                otel_context.detach(cast(Any, token))
            span.end(when)
        if run.chat is not None:
            # the request never answered: the backend failed
            error = reason.value if failed is not None else None
            self._end_chat(run, when, error, failed)
        span = run.span
        attributes = _stop_attributes(event, run)
        detail = self.record_content or reason not in _CONTENT_DETAILS
        if detail:
            attributes["convergent.stop_detail"] = event.detail
        if self.record_content:
            attributes[OUTPUT_MESSAGES] = output_messages(event.output, (), reason.value)
            if event.output is not None:
                attributes.update(_plain(OUTPUT_VALUE, event.output))
        span.set_attributes(attributes)
        if reason is StopReason.STALLED:
            span.add_event("convergent.stall", {"convergent.stall.detail": event.detail}, when)
        elif reason is StopReason.STOPPED:
            stop = {"convergent.steering.detail": event.detail} if detail else {}
            span.add_event("convergent.steering.stop", stop, when)
        if failed is not None:
            span.set_attribute(ERROR_TYPE, reason.value)
            span.set_status(failed)
        otel_context.detach(cast(Any, run.token))
        span.end(when)

    # --- decisions: span events on the run span ----------------------------------

    def _add_event(self, event: Event, name: str, attributes: Mapping[str, Any]) -> None:
        run = self._runs.get(event.run_id)
        if run is not None:
            values = {"convergent.cycle": event.cycle, **attributes}
            run.span.add_event(name, values, _ns(event.time))

    def _redirected(self, event: Redirected, state: RunState) -> None:
        content = {"convergent.message": event.message} if self.record_content else {}
        self._add_event(event, "convergent.redirect", content)

    def _verified(self, event: Verified, state: RunState) -> None:
        attributes: Attributes = {"convergent.verification.passed": event.passed}
        if self.record_content and event.feedback:
            attributes["convergent.verification.feedback"] = event.feedback
        self._add_event(event, "convergent.verification", attributes)

    def _gate_decided(self, event: GateDecided, state: RunState) -> None:
        attributes: Attributes = {
            "convergent.gate.decision": event.decision,
            "convergent.gate.trigger": event.trigger,
            "convergent.gate.threshold": event.threshold,
            "convergent.gate.proposed": [call.name for call in event.proposed],
            INPUT_TOKENS: event.usage.input_tokens,
            OUTPUT_TOKENS: event.usage.output_tokens,
            "convergent.gate.duration": event.duration,
        }
        for key in ("score", "clarity", "certainty"):
            value = getattr(event, key)
            if value is not None:
                attributes[f"convergent.gate.{key}"] = value
        if self.record_content:
            attributes["convergent.gate.question"] = event.question
            attributes["convergent.gate.reason"] = event.reason
        self._add_event(event, "convergent.gate.decision", attributes)

    def _user_answered(self, event: UserAnswered, state: RunState) -> None:
        attributes: Attributes = {
            "gen_ai.tool.call.id": event.call_id,
            "convergent.ask.status": event.status,
            "convergent.ask.channel": event.channel,
            "convergent.ask.waited": event.waited,
        }
        if self.record_content:
            attributes["convergent.ask.question"] = event.question
            if event.answer is not None:
                attributes["convergent.ask.answer"] = event.answer
        self._add_event(event, "convergent.user.answer", attributes)

    def _compacted(self, event: ContextCompacted, state: RunState) -> None:
        attributes: Attributes = {
            "convergent.compaction.method": event.method,
            "convergent.compaction.tokens_before": event.tokens_before,
            "convergent.compaction.tokens_after": event.tokens_after,
            "convergent.compaction.messages_before": event.messages_before,
            "convergent.compaction.messages_after": event.messages_after,
            "convergent.compaction.window": event.window,
            "convergent.compaction.counted_from": event.counted_from,
        }
        if event.error:
            attributes["convergent.compaction.error"] = event.error
        self._add_event(event, "convergent.context.compacted", attributes)

    def _other(self, event: Event) -> None:
        """An event of a part this observer does not know: its name, as a span event."""
        self._add_event(event, f"convergent.{event.type}", {})


def _stop_attributes(event: RunStopped, run: _OpenRun) -> Attributes:
    """The run span's attributes at its stop: reason, cycles, this call's usage."""
    usage = event.usage
    attributes: Attributes = {
        "convergent.stop_reason": event.reason.value,
        "convergent.cycles": event.cycle,
        INPUT_TOKENS: usage.input_tokens - run.input_tokens,
        OUTPUT_TOKENS: usage.output_tokens - run.output_tokens,
    }
    if usage.cost > run.cost:
        attributes[COST] = usage.cost - run.cost
    if event.output_after_stop:
        # the output is the answer asked for after the stop, not a completed answer
        attributes["convergent.output_after_stop"] = True
    return attributes
