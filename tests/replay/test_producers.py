"""Readers on files their real producers wrote here: the OpenTelemetry SDK exporting
convergent's own spans, and the OpenAI Agents SDK's tracing processors; plus the span
shapes of the OpenInference and OpenLLMetry instrumentations, as they document them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from convergent import Agent, ScriptedModel, ToolError, tool
from convergent.replay import detect_format, judge, replay, replay_run
from convergent.telemetry import CAPTURE_CONTENT_ENV, OpenTelemetryObserver
from convergent.testing import answer, call, step, write_script

from .conftest import runs_of, write_json, write_lines


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key == "bad":
        raise ToolError("no such key")
    return f"value of {key}"


async def _traced_run(record_content: bool) -> dict[str, Any]:
    """One convergent run, its spans exported as an OTLP JSON request."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    script = ScriptedModel(
        [
            step(call("lookup", key="a")),
            step(call("lookup", key="a")),
            step(call("lookup", key="bad"), call("lookup", key="b")),
            "a is known",
        ]
    )
    observer = OpenTelemetryObserver(tracer_provider=provider, record_content=record_content)
    agent = Agent(script, [lookup], observers=[observer], instrument=False)
    result = await agent.run("find a")
    provider.shutdown()
    request = MessageToDict(encode_spans(exporter.get_finished_spans()))
    return {"run_id": result.run_id, "request": request}


async def test_convergent_spans_exported_by_the_sdk_are_a_run(tmp_path: Path) -> None:
    traced = await _traced_run(record_content=True)
    path = write_json(tmp_path / "trace.json", traced["request"])
    assert detect_format(path) == "otlp"
    (run,) = runs_of(path)
    assert run.name == traced["run_id"]
    (turn,) = run.turns
    calls = [
        [(c.name, dict(c.arguments), c.result, c.failed) for c in reply.calls] for reply in turn
    ]
    assert calls == [
        [("lookup", {"key": "a"}, "value of a", False)],
        [("lookup", {"key": "a"}, "value of a", False)],
        [
            ("lookup", {"key": "bad"}, "lookup failed: no such key", True),
            ("lookup", {"key": "b"}, "value of b", False),
        ],
        [],
    ]
    assert turn[-1].content == "a is known"
    verdict = judge(run, await replay_run(run))
    assert verdict.stops == () and verdict.loop is None


async def test_one_request_per_line_as_the_collector_writes_them(tmp_path: Path) -> None:
    first, second = await _traced_run(True), await _traced_run(True)
    path = write_lines(tmp_path / "traces.jsonl", [first["request"], second["request"]])
    runs = runs_of(path)
    assert [run.name for run in runs] == [first["run_id"], second["run_id"]]


async def test_without_recorded_content_the_calls_have_no_results(tmp_path: Path) -> None:
    traced = await _traced_run(record_content=False)
    (run,) = runs_of(write_json(tmp_path / "trace.json", traced["request"]))
    names = [[call.name for call in reply.calls] for reply in run.turns[0]]
    assert names == [["lookup"], ["lookup"], ["lookup", "lookup"], []]
    results = [call.result for reply in run.turns[0] for call in reply.calls]
    assert results == [None, None, "lookup failed: no such key", None]  # the status message


def _attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(name: str, start: int, attributes: dict[str, Any], error: bool = False) -> dict[str, Any]:
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": f"{start:016x}",
        "name": name,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 5),
        "attributes": [_attribute(key, value) for key, value in attributes.items()],
        "status": {"code": 2, "message": "failed"} if error else {},
    }


def _request(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}


def test_openinference_spans_of_a_langgraph_or_agents_sdk_run(tmp_path: Path) -> None:
    def llm(start: int, name: str | None, arguments: str = "{}") -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 50,
            "llm.token_count.completion": 7,
        }
        prefix = "llm.output_messages.0.message"
        if name is None:
            attributes[f"{prefix}.content"] = "done"
        else:
            attributes[f"{prefix}.tool_calls.0.tool_call.function.name"] = name
            attributes[f"{prefix}.tool_calls.0.tool_call.function.arguments"] = arguments
        return _span("ChatOpenAI", start, attributes)

    def tool_span(start: int, output: str, error: bool = False) -> dict[str, Any]:
        attributes = {
            "openinference.span.kind": "TOOL",
            "tool.name": "search",
            "input.value": '{"q": "x"}',
            "output.value": output,
        }
        return _span("search", start, attributes, error)

    spans = [
        _span("LangGraph", 1, {"openinference.span.kind": "CHAIN"}),
        llm(10, "search", '{"q": "x"}'),
        tool_span(20, "nothing", error=True),
        llm(30, "search", '{"q": "x"}'),
        tool_span(40, "nothing", error=True),
        llm(50, None),
    ]
    (run,) = runs_of(write_json(tmp_path / "oi.json", _request(spans)))
    (turn,) = run.turns
    assert [[(c.name, dict(c.arguments), c.result, c.failed) for c in r.calls] for r in turn] == [
        [("search", {"q": "x"}, "nothing", True)],
        [("search", {"q": "x"}, "nothing", True)],
        [],
    ]
    assert (run.model, turn[-1].content, turn[0].usage.total_tokens) == ("gpt-4o-mini", "done", 57)


def test_openllmetry_spans_of_a_langchain_run(tmp_path: Path) -> None:
    llm = _span(
        "ChatOpenAI.chat",
        10,
        {
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.completion.0.tool_calls.0.name": "multiply",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"a": 2, "b": 3}',
            "gen_ai.completion.0.tool_calls.0.id": "call_1",
        },
    )
    tool_span = _span(
        "multiply.tool",
        20,
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "multiply",
            "traceloop.entity.input": '{"inputs": {"a": 2, "b": 3}}',
            "traceloop.entity.output": "6",
        },
    )
    answer = _span(
        "ChatOpenAI.chat", 30, {"llm.request.type": "chat", "gen_ai.completion.0.content": "6"}
    )
    (run,) = runs_of(write_json(tmp_path / "tl.json", _request([llm, tool_span, answer])))
    (turn,) = run.turns
    ((only,),) = [reply.calls for reply in turn if reply.calls]
    assert (only.name, dict(only.arguments), only.result) == ("multiply", {"a": 2, "b": 3}, "6")
    assert turn[-1].content == "6"


# -- the OpenAI Agents SDK's own trace export ------------------------------------------------


@pytest.fixture
def agents_traces() -> Iterator[list[dict[str, Any]]]:
    """Every trace and span the SDK ends, exported by a processor of its own kind."""
    from agents import set_trace_processors, set_tracing_disabled
    from agents.tracing import TracingProcessor

    exported: list[dict[str, Any]] = []

    class Collect(TracingProcessor):
        def on_trace_start(self, trace: Any) -> None:
            pass

        def on_trace_end(self, trace: Any) -> None:
            exported.append(trace.export())

        def on_span_start(self, span: Any) -> None:
            pass

        def on_span_end(self, span: Any) -> None:
            exported.append(span.export())

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    set_trace_processors([Collect()])
    set_tracing_disabled(False)
    try:
        yield exported
    finally:
        set_trace_processors([])
        set_tracing_disabled(True)


async def test_the_agents_sdk_trace_export_is_a_run(
    agents_traces: list[dict[str, Any]], tmp_path: Path
) -> None:
    from agents import Agent as SdkAgent
    from agents import Runner, function_tool
    from agents.testing import (
        ModelStep,
        assistant_message,
        function_call,
    )
    from agents.testing import (
        ScriptedModel as SdkScripted,
    )
    from agents.usage import Usage as SdkUsage

    @function_tool
    def find(key: str) -> str:
        """Find a key."""
        if key == "bad":
            raise ValueError("no such key")
        return f"value of {key}"

    usage = SdkUsage(requests=1, input_tokens=10, output_tokens=3)
    model = SdkScripted(
        [
            ModelStep(output=[function_call("find", {"key": "a"}, call_id="c1")], usage=usage),
            ModelStep(
                output=[
                    function_call("find", {"key": "bad"}, call_id="c2"),
                    function_call("find", {"key": "a"}, call_id="c3"),
                ],
                usage=usage,
            ),
            ModelStep(output=[assistant_message("done")], usage=usage),
        ]
    )
    await Runner.run(SdkAgent(name="helper", model=model, tools=[find]), "find a")
    lines = write_lines(tmp_path / "traces.jsonl", agents_traces)
    payload = write_json(tmp_path / "payload.json", {"data": agents_traces})
    assert detect_format(lines) == detect_format(payload) == "openai-agents"
    (run,) = runs_of(lines)
    assert [r.turns for r in runs_of(payload)] == [run.turns]
    (turn,) = run.turns
    assert [[(c.name, dict(c.arguments), c.failed) for c in reply.calls] for reply in turn] == [
        [("find", {"key": "a"}, False)],
        [("find", {"key": "bad"}, True), ("find", {"key": "a"}, False)],
        [],
    ]
    assert turn[0].calls[0].result == "value of a"
    assert turn[0].usage is not None and turn[0].usage.total_tokens == 13
    assert json.dumps(agents_traces)  # the export is plain JSON, as a processor writes it


def _documented_processor() -> str:
    """The tracing processor docs/replay.md gives, as written there."""
    page = (Path(__file__).parents[2] / "docs" / "replay.md").read_text(encoding="utf-8")
    (code,) = [
        block.split("```", 1)[0]
        for block in page.split("```python\n")[1:]
        if "class JsonLines(TracingProcessor)" in block
    ]
    return code


def _chat_completion(number: int, body: dict[str, Any]) -> bytes:
    usage = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    if number <= 2:
        call = {"id": f"c{number}", "type": "function"}
        call["function"] = {"name": "find", "arguments": '{"key": "build"}'}
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        message = {"role": "assistant", "content": "The build is done."}
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    reply = {"id": "x", "object": "chat.completion", "created": 1, "model": "gpt-chat"}
    return json.dumps({**reply, "choices": [choice], "usage": usage}).encode()


def _response(number: int, body: dict[str, Any]) -> bytes:
    usage = {
        "input_tokens": 20,
        "output_tokens": 5,
        "total_tokens": 25,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    if number <= 1:
        output: list[dict[str, Any]] = [
            {
                "type": "function_call",
                "id": "fc1",
                "call_id": "c1",
                "name": "find",
                "arguments": '{"key": "paris"}',
                "status": "completed",
            }
        ]
    else:
        text = {"type": "output_text", "text": "Paris has 2.1 million inhabitants."}
        output = [
            {
                "type": "message",
                "id": "m1",
                "status": "completed",
                "role": "assistant",
                "content": [{**text, "annotations": []}],
            }
        ]
    reply = {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 1,
        "model": "gpt-responses",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    return json.dumps({**reply, "output": output, "usage": usage}).encode()


async def test_the_documented_processor_gives_every_run_its_answer_and_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents import Agent as SdkAgent
    from agents import (
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
        function_tool,
        set_trace_processors,
        set_tracing_disabled,
    )
    from agents.tracing import get_trace_provider
    from openai import AsyncOpenAI

    from convergent.testing.chat_server import ChatServer

    @function_tool
    def find(key: str) -> str:
        """Find a key."""
        return f"{key}: found"

    monkeypatch.chdir(tmp_path)
    set_trace_processors([])
    set_tracing_disabled(False)
    try:
        exec(_documented_processor(), {})  # registers JsonLines("agents-traces.jsonl")
        with ChatServer(_chat_completion) as server:
            client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test")
            model = OpenAIChatCompletionsModel("gpt-chat", client)
            await Runner.run(SdkAgent(name="Builder", model=model, tools=[find]), "build")
        with ChatServer(_response) as server:
            client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test")
            model = OpenAIResponsesModel("gpt-responses", client)
            agent = SdkAgent(name="Geographer", model=model, tools=[find])
            await Runner.run(agent, "Paris?", run_config=RunConfig(workflow_name="census"))
    finally:
        get_trace_provider().shutdown()  # the processor closes its file
        set_trace_processors([])
        set_tracing_disabled(True)
    path = tmp_path / "agents-traces.jsonl"
    builder, geographer = runs_of(path)
    assert (builder.name, builder.model, builder.final_answer) == (
        "Builder",
        "gpt-chat",
        "The build is done.",
    )
    assert (geographer.name, geographer.model, geographer.final_answer) == (
        "census",
        "gpt-responses",
        "Paris has 2.1 million inhabitants.",
    )
    assert [[call.name for call in reply.calls] for reply in builder.turns[0]] == [
        ["find"],
        ["find"],
        [],
    ]
    report = await asyncio.to_thread(replay, [path], success_if="done|Paris")
    assert report.total.runs["successful"] == 2
    assert report.headline().startswith("None of your 2 successful runs would be cut")


@pytest.mark.slow
def test_convergent_run_writes_a_file_replay_reads_without_a_collector(tmp_path: Path) -> None:
    looping = write_script(
        tmp_path / "loop.json",
        *[step(call("calculator", expression="6*7")) for _ in range(5)],
        answer("42"),
    )
    answering = write_script(
        tmp_path / "answer.json", step(call("calculator", expression="6*7")), answer("42")
    )
    traces = tmp_path / "traces.jsonl"
    for run_id, script, stop in (
        ("otel-loop8", looping, "stalled"),
        ("otel-other", answering, "completed"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "convergent", "run", "what is 6*7?", "--model", script]
            + ["--run-id", run_id, "--otlp-file", str(traces), "--no-checkpoint", "--json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, CAPTURE_CONTENT_ENV: "true"},
        )
        assert json.loads(done.stdout)["stop_reason"] == stop, done.stderr
    assert detect_format(traces) == "otlp"
    loop, other = runs_of(traces)
    assert (loop.name, other.name) == ("otel-loop8", "otel-other")
    results = [call.result for reply in loop.turns[0] for call in reply.calls]
    assert results[:2] == ["42", "42"]  # content recorded: the repeats can be proven
    first = json.loads(traces.read_text(encoding="utf-8").splitlines()[0])
    span = first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and int(span["traceId"], 16) >= 0  # hex, as OTLP JSON
