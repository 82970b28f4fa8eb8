"""OpenTelemetry traces as OTLP JSON: GenAI spans of an agent's model and tool calls.

A file holds one OTLP ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) or
one per line, as the OpenTelemetry Collector's file exporter writes them. Each trace is
one run (one turn), named by its ``gen_ai.conversation.id`` or ``convergent.run.id``
where a span has one, else by its trace id. Spans are read in the shapes the common
instrumentations write:

- GenAI semantic conventions (convergent's own telemetry, OpenTelemetry's GenAI
  instrumentations): ``gen_ai.operation.name`` ``chat`` and ``execute_tool``,
  ``gen_ai.output.messages``, ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments`` and
  ``gen_ai.tool.call.result``;
- OpenInference (its OpenAI Agents SDK and LangChain/LangGraph instrumentations):
  ``openinference.span.kind`` ``LLM`` and ``TOOL``, ``llm.output_messages.*``,
  ``tool.name``, ``input.value``, ``output.value``;
- OpenLLMetry (Traceloop): ``llm.request.type``, ``gen_ai.completion.*``,
  ``traceloop.span.kind`` ``tool``, ``traceloop.entity.input`` / ``output``.

Each model span is a reply; its calls are the ones its output names, with the results
of the tool spans that follow it (matched by call id, else by name in order), or, when
the output was not recorded, those tool spans themselves. A tool span whose status is
an error is a failed call. Without recorded results a call has none, and no repeat can
be shown to be a loop.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convergent.replay._readers._common import (
    READ_ERRORS,
    FormatMismatch,
    TurnBuilder,
    as_arguments,
    as_text,
    jsonl_objects,
    usage_of,
)
from convergent.replay._readers._format import Format, Sample
from convergent.replay._recording import Malformed, Trajectory

__all__ = ["OTLP"]

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


@dataclass(frozen=True, slots=True)
class _Span:
    trace: str
    name: str
    start: int
    attributes: Mapping[str, Any]
    error: bool
    status_message: str

    def get(self, *keys: str) -> Any:
        for key in keys:
            if key in self.attributes:
                return self.attributes[key]
        return None

    @property
    def kind(self) -> str:
        operation = self.get("gen_ai.operation.name")
        openinference = str(self.get("openinference.span.kind") or "").upper()
        if operation in _LLM_OPERATIONS or openinference == "LLM" or self.get("llm.request.type"):
            return "llm"
        if (
            operation == "execute_tool"
            or openinference == "TOOL"
            or self.get("traceloop.span.kind") == "tool"
        ):
            return "tool"
        return "other"


def _requests(value: Any) -> list[Any]:
    if isinstance(value, dict) and ("resourceSpans" in value or "resource_spans" in value):
        return [value]
    return []


def _claims(path: Path, sample: Sample) -> bool:
    return bool(_requests(sample.value))


def _value(raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    for key, found in raw.items():
        if key in ("arrayValue", "array_value"):
            return [_value(item) for item in (found or {}).get("values", [])]
        if key in ("kvlistValue", "kvlist_value"):
            return {
                item["key"]: _value(item.get("value")) for item in (found or {}).get("values", [])
            }
        if key in ("intValue", "int_value"):
            return int(found)
        return found
    return None


def _spans(request: Mapping[str, Any]) -> Iterator[_Span]:
    for resource in request.get("resourceSpans") or request.get("resource_spans") or []:
        for scope in resource.get("scopeSpans") or resource.get("scope_spans") or []:
            for raw in scope.get("spans") or []:
                status = raw.get("status") or {}
                code = status.get("code")
                yield _Span(
                    trace=str(raw.get("traceId") or raw.get("trace_id") or ""),
                    name=str(raw.get("name") or ""),
                    start=int(raw.get("startTimeUnixNano") or raw.get("start_time_unix_nano") or 0),
                    attributes={
                        item["key"]: _value(item.get("value"))
                        for item in raw.get("attributes") or []
                    },
                    error=code in (2, "STATUS_CODE_ERROR", "ERROR"),
                    status_message=str(status.get("message") or ""),
                )


def _read(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    traces: defaultdict[str, list[_Span]] = defaultdict(list)
    lines = jsonl_objects(path) if sample.lines else iter([(1, sample.value)])
    for number, request in lines:
        if isinstance(request, FormatMismatch):
            yield Malformed(f"{path}:{number}", str(request))
            continue
        try:
            for span in _spans(request):
                traces[span.trace].append(span)
        except READ_ERRORS as exc:
            yield Malformed(
                f"{path}:{number}", f"not OTLP JSON spans ({type(exc).__name__}: {exc})"
            )
    for trace, spans in traces.items():
        try:
            run = _run(path, trace, sorted(spans, key=lambda span: span.start))
        except READ_ERRORS as exc:
            yield Malformed(
                f"{path} trace {trace}", f"unreadable spans ({type(exc).__name__}: {exc})"
            )
            continue
        if run is not None:
            yield run


def _run(path: Path, trace: str, spans: Sequence[_Span]) -> Trajectory | None:
    llm = [span for span in spans if span.kind == "llm"]
    tools = [span for span in spans if span.kind == "tool"]
    if not llm and not tools:
        return None
    builder = TurnBuilder()
    model = ""
    if not llm:  # tool spans alone: each call its own reply
        for tool in tools:
            builder.assistant("", [_tool_call(tool)])
            _tool_result(builder, tool)
    starts = [span.start for span in llm]
    for index, span in enumerate(llm):
        end = starts[index + 1] if index + 1 < len(starts) else None
        following = [t for t in tools if t.start >= span.start and (end is None or t.start < end)]
        model = str(
            span.get("gen_ai.response.model", "gen_ai.request.model", "llm.model_name") or model
        )
        text, calls = _output(span)
        if not calls:
            calls = [_tool_call(tool) for tool in following]
        usage = usage_of(
            span.get(
                "gen_ai.usage.input_tokens", "llm.token_count.prompt", "gen_ai.usage.prompt_tokens"
            ),
            span.get(
                "gen_ai.usage.output_tokens",
                "llm.token_count.completion",
                "gen_ai.usage.completion_tokens",
            ),
            span.get("gen_ai.usage.cost"),
        )
        builder.assistant(text, calls, usage)
        for tool in following:
            _tool_result(builder, tool, calls)
    names = [
        span.get("gen_ai.conversation.id", "convergent.run.id", "session.id") for span in spans
    ]
    name = next((str(found) for found in names if found), trace)
    return Trajectory(
        id=f"{path.name} trace {trace}",
        name=name,
        source=str(path),
        model=model,
        success=None,
        turns=builder.turns()[:1] if llm else builder.turns(),
    )


def _tool_call(span: _Span) -> tuple[str | None, str, Mapping[str, Any]]:
    name = span.get("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
    if name is None:
        name = span.name.removeprefix("execute_tool ").removesuffix(".tool")
    raw = span.get("gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input")
    arguments = as_arguments(raw)
    if "inputs" in arguments and span.get("traceloop.entity.input") is not None:
        arguments = as_arguments(arguments["inputs"])
    call_id = span.get("gen_ai.tool.call.id", "tool_call.id")
    return (None if call_id is None else str(call_id), str(name), arguments)


def _tool_result(
    builder: TurnBuilder,
    span: _Span,
    calls: Sequence[tuple[str | None, str, Mapping[str, Any]]] = (),
) -> None:
    raw = span.get("gen_ai.tool.call.result", "output.value", "traceloop.entity.output")
    if raw is None and not span.error:
        return  # no result recorded: the call keeps none
    text = as_text(raw) if raw is not None else span.status_message
    call_id, name, _ = _tool_call(span)
    ids = [found for found, _, _ in calls]
    if call_id is not None and call_id in ids:
        builder.result(call_id, text, span.error)
    elif calls:
        builder.result_by_name(name, text, span.error)
    else:
        builder.result_of_last_call(text, span.error)


_INDEXED = re.compile(r"^(?:llm\.output_messages|gen_ai\.completion)\.(\d+)\.(.+)$")


def _output(span: _Span) -> tuple[str, list[tuple[str | None, str, Mapping[str, Any]]]]:
    """The reply's text and calls, from whichever convention recorded them."""
    raw = span.get("gen_ai.output.messages")
    if isinstance(raw, str):
        try:
            messages = json.loads(raw)
        except ValueError:
            messages = []
        texts: list[str] = []
        calls: list[tuple[str | None, str, Mapping[str, Any]]] = []
        for message in messages if isinstance(messages, list) else []:
            for part in message.get("parts") or []:
                if part.get("type") == "text":
                    texts.append(str(part.get("content") or ""))
                elif part.get("type") == "tool_call":
                    calls.append(
                        (part.get("id"), str(part["name"]), as_arguments(part.get("arguments")))
                    )
        return "\n".join(texts), calls
    flat: defaultdict[str, dict[str, Any]] = defaultdict(dict)
    for key, value in span.attributes.items():
        match = _INDEXED.match(key)
        if match and match.group(1) == "0":
            flat["0"][match.group(2)] = value
    fields = flat.get("0", {})
    text = as_text(fields.get("message.content", fields.get("content")))
    found: dict[int, dict[str, Any]] = defaultdict(dict)
    for key, value in fields.items():
        call = re.match(
            r"^(?:message\.)?tool_calls\.(\d+)\.(?:tool_call\.)?(?:function\.)?(\w+)$", key
        )
        if call:
            found[int(call.group(1))][call.group(2)] = value
    calls = [
        (
            None if item.get("id") is None else str(item["id"]),
            str(item["name"]),
            as_arguments(item.get("arguments")),
        )
        for _, item in sorted(found.items())
        if "name" in item
    ]
    return text, calls


OTLP = Format(
    name="otlp",
    expects="OTLP JSON traces (an object with 'resourceSpans', or one per line)",
    claims=_claims,
    read=_read,
)
