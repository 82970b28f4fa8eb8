"""The span tree of real runs driven by ScriptedModel, recorded with the SDK's exporter."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from convergent import (
    Agent,
    ModelError,
    ModelResponse,
    ScriptedModel,
    StopPolicy,
    StopReason,
    ToolError,
    Usage,
    Verification,
    calculator,
    tool,
)
from convergent.builtin_tools import fail
from convergent.exceptions import ScriptExhaustedError
from convergent.steering import SteeringQueue
from convergent.telemetry import CAPTURE_CONTENT_ENV, OpenTelemetryObserver
from convergent.testing import answer, call, scripted, step

from .conftest import tree


@tool
async def fetch(url: str) -> str:
    """Fetch a page (waits, so calls in one batch overlap).

    Args:
        url: Address.
    """
    await asyncio.sleep(0.05)
    return f"page at {url}"


@tool
def read_disk(path: str) -> str:
    """Read from a slow disk in a worker thread.

    Args:
        path: File.
    """
    time.sleep(0.05)
    return f"bytes of {path}"


@tool
def broken(x: int) -> str:
    """A tool with a bug.

    Args:
        x: Anything.
    """
    raise ValueError("bad value")


@tool(timeout=0.01)
async def hangs() -> str:
    """Never answers in time."""
    await asyncio.sleep(1)
    return "late"


def tokens(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, requests=1)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def within(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.start_time and child.end_time and parent.start_time and parent.end_time
    return parent.start_time <= child.start_time <= child.end_time <= parent.end_time


async def test_a_parallel_batch_gives_overlapping_tool_spans_under_one_run_span(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(
        [
            step(
                call("fetch", "fetch-0", url="a"),
                call("read_disk", "read_disk-1", path="b"),
                usage=tokens(100, 20),
            ),
            answer("both read", usage=tokens(150, 5)),
        ],
        name="openai:gpt-test",
    )
    agent = Agent(model, [fetch, read_disk], observers=[observer])
    result = await agent.run("read a and b", run_id="run-1")
    assert result.stop_reason is StopReason.COMPLETED

    spans = tree(exporter)
    run = spans.root()
    assert run.name == "invoke_agent run-1"
    assert run.parent is None and run.kind is SpanKind.INTERNAL
    assert attributes(run) == {
        "gen_ai.operation.name": "invoke_agent",
        "openinference.span.kind": "AGENT",
        "gen_ai.agent.name": "convergent",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.conversation.id": "run-1",
        "convergent.run.id": "run-1",
        "convergent.resumed": False,
        "convergent.tools": ("fetch", "read_disk"),
        "convergent.stop_reason": "completed",
        "convergent.stop_detail": "the model answered without tool calls",
        "convergent.cycles": 2,
        "gen_ai.usage.input_tokens": 250,
        "gen_ai.usage.output_tokens": 25,
    }
    children = spans.children(run)
    assert [s.name for s in children] == [
        "chat gpt-test",
        "execute_tool fetch",
        "execute_tool read_disk",
        "chat gpt-test",
    ]
    assert len(spans.spans) == 5 and all(within(s, run) for s in children)
    first, tool_a, tool_b, second = children
    assert first.kind is SpanKind.CLIENT and tool_a.kind is SpanKind.INTERNAL
    assert attributes(first) == {
        "gen_ai.operation.name": "chat",
        "openinference.span.kind": "LLM",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "convergent.cycle": 1,
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "convergent.tool_calls": 2,
    }
    assert attributes(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes(tool_a) == {
        "gen_ai.operation.name": "execute_tool",
        "openinference.span.kind": "TOOL",
        "gen_ai.tool.name": "fetch",
        "gen_ai.tool.call.id": "fetch-0",
        "gen_ai.tool.type": "function",
        "convergent.cycle": 1,
        "convergent.tool.outcome": "ok",
    }
    assert attributes(tool_b)["gen_ai.tool.call.id"] == "read_disk-1"
    # the two calls ran at the same time, after the first request and before the second
    assert tool_a.start_time < tool_b.end_time and tool_b.start_time < tool_a.end_time  # type: ignore[operator]
    for span in (tool_a, tool_b):
        assert first.end_time <= span.start_time and span.end_time <= second.start_time  # type: ignore[operator]
        assert span.end_time - span.start_time >= 40_000_000  # type: ignore[operator]
        assert span.status.status_code is StatusCode.UNSET
    assert {s.context.trace_id for s in spans.spans} == {run.context.trace_id}


async def test_sequential_batch_gives_tool_spans_one_after_another(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel([step(call("fetch", url="a"), call("fetch", url="b")), "ok"])
    agent = Agent(model, [fetch], observers=[observer], parallel_tool_calls=False)
    await agent.run("read")
    first, second = tree(exporter).named("execute_tool")
    assert first.end_time <= second.start_time  # type: ignore[operator]


async def test_failed_tool_calls_are_error_spans_named_by_their_exception(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(
        [
            step(
                call("fail", "fail-0", message="disk full"),
                call("broken", "broken-1", x=1),
                call("hangs", "hangs-2"),
                call("calculator", "calculator-3", expression="2+"),
                call("calculator", "calculator-4", expression="2+2"),
            ),
            "gave up on some",
        ]
    )
    tools = [fail, broken, hangs, calculator]
    agent = Agent(model, tools, observers=[observer], policy=StopPolicy(max_repeated_failures=5))
    result = await agent.run("try tools")
    assert result.stop_reason is StopReason.COMPLETED
    spans = tree(exporter)
    by_id = {attributes(s)["gen_ai.tool.call.id"]: s for s in spans.named("execute_tool")}
    expected = {
        "fail-0": ("failed", "ToolError"),
        "broken-1": ("failed", "ValueError"),
        "hangs-2": ("failed", "timeout"),
        "calculator-3": ("invalid", "invalid"),
    }
    for call_id, (outcome, error_type) in expected.items():
        span = by_id[call_id]
        assert span.status.status_code is StatusCode.ERROR, call_id
        assert attributes(span)["error.type"] == error_type
        assert attributes(span)["convergent.tool.outcome"] == outcome
    assert by_id["fail-0"].status.description == "fail failed: disk full"
    ok = by_id["calculator-4"]
    assert ok.status.status_code is StatusCode.UNSET and "error.type" not in attributes(ok)
    run = spans.root()
    assert run.status.status_code is StatusCode.UNSET


async def test_a_tool_error_stop_marks_the_run_span_as_an_error(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel([step(call("fail", message="no"))])
    agent = Agent(model, [fail], observers=[observer], policy=StopPolicy(on_tool_error="stop"))
    result = await agent.run("fail")
    assert result.stop_reason is StopReason.TOOL_ERROR
    run = tree(exporter).root()
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description == "fail failed: no"
    assert attributes(run)["error.type"] == "tool_error"
    assert attributes(run)["convergent.stop_reason"] == "tool_error"


@tool(read_only=False)
def charge(amount: int) -> str:
    """Charge the card (a write: a repeat is judged before it runs).

    Args:
        amount: Amount.
    """
    return "charged"


async def test_a_stall_stops_the_run_with_a_stall_event_and_no_span_for_the_unrun_call(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    same = step(call("charge", amount=5))
    # a nudge instead of the third identical write, the stop at the fourth, then the answer
    model = ScriptedModel([same, same, same, same, "2"])
    agent = Agent(model, [charge], observers=[observer], policy=StopPolicy(max_repeated_calls=3))
    result = await agent.run("loop")
    assert result.stop_reason is StopReason.STALLED
    spans = tree(exporter)
    run = spans.root()
    assert attributes(run)["convergent.stop_reason"] == "stalled"
    assert attributes(run)["convergent.cycles"] == 4
    # its output is the answer asked for after the stop, marked as the --json output is
    assert result.output == "2" and result.output_after_stop
    assert attributes(run)["convergent.output_after_stop"] is True
    assert [e.name for e in run.events].count("convergent.nudged") == 1
    assert run.status.status_code is StatusCode.UNSET
    (stall,) = [e for e in run.events if e.name == "convergent.stall"]
    assert stall.attributes is not None
    assert stall.attributes["convergent.stall.detail"] == result.stop_detail
    assert stall.timestamp == run.end_time
    assert len(spans.named("chat")) == 4 and len(spans.named("execute_tool")) == 2


async def test_a_model_error_is_an_error_chat_span_and_an_error_run(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    def backend(messages: object, tools: object) -> ModelResponse:
        raise ModelError("provider returned 503")

    agent = Agent(ScriptedModel(backend), [], observers=[observer])
    result = await agent.run("hello")
    assert result.stop_reason is StopReason.MODEL_ERROR
    spans = tree(exporter)
    run = spans.root()
    (chat,) = spans.children(run)
    for span in (chat, run):
        assert span.status.status_code is StatusCode.ERROR
        assert attributes(span)["error.type"] == "model_error"
        assert "503" in (span.status.description or "")
    assert chat.end_time == run.end_time


async def test_an_exception_ends_the_open_spans_and_restores_the_context(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    model = ScriptedModel([step(call("calculator", expression="1"))])
    agent = Agent(model, [calculator], observers=[observer])
    outer = provider.get_tracer("app")
    with outer.start_as_current_span("request handler") as handler:
        with pytest.raises(ScriptExhaustedError):
            await agent.run("run out of script")
        assert trace.get_current_span() is handler
    spans = tree(exporter)
    run = spans.root()
    assert run.parent is not None and run.parent.span_id == handler.get_span_context().span_id
    assert run.status.status_code is StatusCode.ERROR
    assert attributes(run)["error.type"] == "ScriptExhaustedError"
    assert [e.name for e in run.events] == ["exception"]
    chats = spans.named("chat")
    assert len(chats) == 2 and chats[1].status.status_code is StatusCode.ERROR
    assert all(span.end_time is not None for span in spans.spans)


async def test_spans_made_inside_a_tool_are_children_of_its_span(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    tracer = provider.get_tracer("app")

    @tool
    async def query(sql: str) -> str:
        """Query a database (instrumented).

        Args:
            sql: Statement.
        """
        with tracer.start_as_current_span("db query"):
            await asyncio.sleep(0)
        return "1 row"

    @tool
    def lookup(key: str) -> str:
        """Look up a key in a worker thread (instrumented).

        Args:
            key: Key.
        """
        with tracer.start_as_current_span("cache lookup"):
            return "hit"

    model = ScriptedModel([step(call("query", sql="x"), call("lookup", key="k")), "done"])
    await Agent(model, [query, lookup], observers=[observer]).run("query")
    spans = tree(exporter)
    for inner, tool_name in (("db query", "query"), ("cache lookup", "lookup")):
        (span,) = spans.named(inner)
        (parent,) = spans.named(f"execute_tool {tool_name}")
        assert span.parent is not None and span.parent.span_id == parent.context.span_id
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_verdicts_and_redirects_are_span_events(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    steering = SteeringQueue()
    verdicts = iter([Verification(False, "missing the unit"), Verification(True)])

    def sent_during_first_answer(messages: object, tools: object) -> ModelResponse:
        if not steering_sent:
            steering_sent.append(True)
            steering.send("also say hello")
            return answer("42")
        return answer("42 metres, hello")

    steering_sent: list[bool] = []
    agent = Agent(
        ScriptedModel(sent_during_first_answer),
        [],
        observers=[observer],
        verifier=lambda text: next(verdicts),
    )
    result = await agent.run("how tall?", steering=steering)
    assert result.stop_reason is StopReason.COMPLETED
    run = tree(exporter).root()
    names = [e.name for e in run.events]
    assert names == ["convergent.redirect", "convergent.verification", "convergent.verification"]
    redirect, failed, passed = (dict(e.attributes or {}) for e in run.events)
    assert redirect == {"convergent.cycle": 1}
    assert failed == {"convergent.cycle": 2, "convergent.verification.passed": False}
    assert passed == {"convergent.cycle": 3, "convergent.verification.passed": True}
    assert [e.timestamp for e in run.events] == sorted(e.timestamp for e in run.events)


async def test_a_stop_request_is_a_steering_event(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    steering = SteeringQueue()
    steering.stop("enough")
    await Agent(ScriptedModel([]), [], observers=[observer]).run("task", steering=steering)
    run = tree(exporter).root()
    assert attributes(run)["convergent.stop_reason"] == "stopped"
    assert [e.name for e in run.events] == ["convergent.steering.stop"]
    assert "convergent.stop_detail" not in attributes(run)


SECRET_TASK = "the launch code is 0000"
SECRET_ARGUMENT = "2+40"
SECRET_ANSWER = "forty-two is the answer"


def secret_run(observer: OpenTelemetryObserver) -> Agent:
    model = scripted(
        step(
            call("calculator", expression=SECRET_ARGUMENT),
            content="thinking",
            metadata={"confidence": 0.9},
        ),
        SECRET_ANSWER,
    )
    return Agent(model, [calculator], system_prompt="be brief", observers=[observer])


def every_value(exporter: InMemorySpanExporter) -> str:
    values: list[str] = []
    for span in exporter.get_finished_spans():
        values += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
        for event in span.events:
            values += [f"{k}={v}" for k, v in (event.attributes or {}).items()]
        values.append(span.status.description or "")
    return "\n".join(values)


async def test_message_content_is_not_recorded_by_default(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    assert observer.record_content is False
    # a chosen run id: a random one could hold "42" and look like recorded content
    await secret_run(observer).run(SECRET_TASK, run_id="secret-run")
    recorded = every_value(exporter)
    assert "gen_ai.usage.input_tokens" in recorded
    for secret in (SECRET_TASK, SECRET_ARGUMENT, SECRET_ANSWER, "42", "be brief", "0.9"):
        assert secret not in recorded
    for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call"):
        assert f"{key}" not in recorded.replace("gen_ai.tool.call.id", "")


@pytest.mark.parametrize("opt_in", ["argument", "environment"])
async def test_message_content_is_recorded_when_opted_in(
    opt_in: str,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if opt_in == "argument":
        observer = OpenTelemetryObserver(tracer_provider=provider, record_content=True)
    else:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
        observer = OpenTelemetryObserver(tracer_provider=provider)
    await secret_run(observer).run(SECRET_TASK)
    spans = tree(exporter)
    run = spans.root()
    first, second = spans.named("chat")
    (calc,) = spans.named("execute_tool")
    assert json.loads(attributes(run)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": SECRET_TASK}]}
    ]
    assert json.loads(attributes(run)["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "be brief"}
    ]
    assert json.loads(attributes(run)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": SECRET_ANSWER}],
            "finish_reason": "completed",
        }
    ]
    # where OpenInference trace UIs (Phoenix) read a span's input and output for their lists
    assert {k: v for k, v in attributes(run).items() if k.startswith(("input.", "output."))} == {
        "input.value": SECRET_TASK,
        "input.mime_type": "text/plain",
        "output.value": SECRET_ANSWER,
        "output.mime_type": "text/plain",
    }
    sent = json.loads(attributes(first)["gen_ai.input.messages"])
    assert sent == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "user", "parts": [{"type": "text", "content": SECRET_TASK}]},
    ]
    (reply,) = json.loads(attributes(first)["gen_ai.output.messages"])
    assert reply["role"] == "assistant" and reply["finish_reason"] == "tool_calls"
    assert reply["parts"][0] == {"type": "text", "content": "thinking"}
    assert reply["parts"][1]["type"] == "tool_call"
    assert reply["parts"][1]["arguments"] == {"expression": SECRET_ARGUMENT}
    assert json.loads(attributes(first)["convergent.response.metadata"]) == {"confidence": 0.9}
    history = json.loads(attributes(second)["gen_ai.input.messages"])
    assert history[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": reply["parts"][1]["id"], "response": "42"}],
    }
    assert json.loads(attributes(calc)["gen_ai.tool.call.arguments"]) == {
        "expression": SECRET_ARGUMENT
    }
    assert attributes(calc)["gen_ai.tool.call.result"] == "42"


@pytest.mark.parametrize(
    ("model_name", "request_model"),
    [
        ("local", "SmolLM2-135M-Instruct.Q4_1"),
        ("local:/models/qwen2.5-0.5b-instruct-q4_k_m.gguf", "qwen2.5-0.5b-instruct-q4_k_m"),
    ],
)
async def test_the_run_span_is_named_after_the_agent_and_a_local_model_after_its_file(
    provider: TracerProvider, exporter: InMemorySpanExporter, model_name: str, request_model: str
) -> None:
    observer = OpenTelemetryObserver(tracer_provider=provider, agent_name="arithmetic")
    model = ScriptedModel([answer("391")], name=model_name)
    await Agent(model, observers=[observer]).run("17*23?")
    spans = tree(exporter)
    run = spans.root()
    (chat,) = spans.named("chat")
    assert (run.name, chat.name) == ("invoke_agent arithmetic", f"chat {request_model}")
    assert attributes(run)["gen_ai.agent.name"] == "arithmetic"
    assert (attributes(run)["gen_ai.provider.name"], attributes(run)["gen_ai.request.model"]) == (
        "local",
        request_model,
    )


async def test_one_observer_traces_concurrent_runs_apart(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    def agent() -> Agent:
        model = ScriptedModel([step(call("fetch", url="x")), "done"])
        return Agent(model, [fetch], observers=[observer])

    await asyncio.gather(*(agent().run("go", run_id=f"r{n}") for n in range(3)))
    spans = tree(exporter)
    runs = spans.named("invoke_agent")
    assert len(runs) == 3
    for run in runs:
        children = spans.children(run)
        names = [s.name for s in children]
        assert names == ["chat scripted", "execute_tool fetch", "chat scripted"]
        assert {s.context.trace_id for s in children} == {run.context.trace_id}


async def test_a_fatal_tool_error_stops_with_the_tool_span_failed(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    @tool
    def explode() -> str:
        """Fail for good."""
        raise ToolError("unrecoverable", fatal=True)

    await Agent(ScriptedModel([step(call("explode"))]), [explode], observers=[observer]).run("x")
    spans = tree(exporter)
    (span,) = spans.named("execute_tool")
    assert attributes(span)["error.type"] == "ToolError"
    assert spans.root().status.status_code is StatusCode.ERROR


async def test_each_request_and_the_run_carry_their_cost(
    observer: OpenTelemetryObserver, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(
        [
            step(call("calculator", expression="1+1"), usage=tokens(1000, 100)),
            answer("2", usage=tokens(1200, 10)),
        ],
        price=(1.0, 4.0),
    )
    result = await Agent(model, [calculator], observers=[observer]).run("x")
    spans = tree(exporter)
    first, second = (attributes(span) for span in spans.named("chat"))
    assert first["gen_ai.usage.cost"] == pytest.approx((1000 + 400) / 1e6)
    assert second["gen_ai.usage.cost"] == pytest.approx((1200 + 40) / 1e6)
    run = attributes(spans.root())
    assert run["gen_ai.usage.cost"] == pytest.approx(result.usage.cost) == pytest.approx(2640 / 1e6)
    assert "convergent.usage.cost" not in first
    # a run that cost nothing carries no cost
    exporter.clear()
    await Agent(ScriptedModel([answer("2", usage=tokens(1200, 10))]), observers=[observer]).run("x")
    assert all("gen_ai.usage.cost" not in attributes(span) for span in tree(exporter).spans)
