"""The OpenAI Agents SDK's trace export: what its tracing processors receive.

Each trace and span the SDK ends is exported as an object (``trace.export()``,
``span.export()``): ``{"object": "trace"}`` and ``{"object": "trace.span", "trace_id",
"parent_id", "started_at", "span_data", "error"}``. A processor that writes them as JSON
Lines, a JSON list of them, or the SDK's backend payload ``{"data": [...]}`` are read
alike. Each trace is one run (one turn). Every model call is a reply: the ``turn`` spans
the runner opens for each (``span_data.data.sdk_span_type == "turn"``), else the
``generation`` / ``response`` spans; a ``function`` span under it is one of its calls
(its ``input`` the arguments, its ``output`` the result), failed when the span carries
an ``error``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
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

__all__ = ["OPENAI_AGENTS"]

_OBJECTS = frozenset({"trace", "trace.span"})


def _items(value: Any) -> list[Any] | None:
    if isinstance(value, dict) and value.get("object") in _OBJECTS:
        return [value]
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        value = value["data"]
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        if value[0].get("object") in _OBJECTS:
            return value
    return None


def _claims(path: Path, sample: Sample) -> bool:
    return _items(sample.value) is not None


def _read(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    spans: defaultdict[str, list[Mapping[str, Any]]] = defaultdict(list)
    names: dict[str, str] = {}
    lines = jsonl_objects(path) if sample.lines else iter([(1, sample.value)])
    for number, value in lines:
        if isinstance(value, FormatMismatch):
            yield Malformed(f"{path}:{number}", str(value))
            continue
        for item in _items(value) or []:
            trace = str(item.get("trace_id") or item.get("id") or "")
            if item.get("object") == "trace":
                names[trace] = str(item.get("group_id") or item.get("workflow_name") or trace)
            else:
                spans[trace].append(item)
    for trace, found in spans.items():
        try:
            run = _run(path, trace, names.get(trace, trace), found)
        except READ_ERRORS as exc:
            yield Malformed(f"{path} {trace}", f"unreadable spans ({type(exc).__name__}: {exc})")
            continue
        if run is not None:
            yield run


def _kind(span: Mapping[str, Any]) -> str:
    data = span.get("span_data") or {}
    if data.get("type") == "custom":
        return str((data.get("data") or {}).get("sdk_span_type") or "custom")
    return str(data.get("type") or "")


def _run(
    path: Path, trace: str, name: str, spans: Sequence[Mapping[str, Any]]
) -> Trajectory | None:
    ordered = sorted(spans, key=lambda span: str(span.get("started_at") or ""))
    turns = [span for span in ordered if _kind(span) == "turn"]
    models = turns or [span for span in ordered if _kind(span) in ("generation", "response")]
    functions = [span for span in ordered if _kind(span) == "function"]
    if not models and not functions:
        return None
    parents = {str(span.get("id")): span.get("parent_id") for span in ordered}
    owner: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    model_ids = [str(span.get("id")) for span in models]
    for function in functions:
        owner[_owning(function, parents, model_ids, models)].append(function)
    builder = TurnBuilder()
    model_name = ""
    for span in models:
        data = span.get("span_data") or {}
        extra = data.get("data") or {}
        usage = extra.get("usage") or data.get("usage") or {}
        model_name = str(data.get("model") or model_name)
        calls = owner.get(str(span.get("id")), [])
        builder.assistant(
            _text(data.get("output")),
            [
                (None, str(c["span_data"]["name"]), as_arguments(c["span_data"].get("input")))
                for c in calls
            ],
            usage_of(usage.get("input_tokens"), usage.get("output_tokens")),
        )
        for call in calls:
            builder.result_by_name(
                str(call["span_data"]["name"]),
                as_text(call["span_data"].get("output")),
                call.get("error") is not None,
            )
    return Trajectory(
        id=f"{path.name} {trace}",
        name=name,
        source=str(path),
        model=model_name,
        success=None,
        turns=builder.turns()[:1],
    )


def _owning(
    function: Mapping[str, Any],
    parents: Mapping[str, Any],
    model_ids: Sequence[str],
    models: Sequence[Mapping[str, Any]],
) -> str:
    """The model span a function span belongs to: its ancestor, else the latest before it."""
    parent = function.get("parent_id")
    while parent is not None:
        if str(parent) in model_ids:
            return str(parent)
        parent = parents.get(str(parent))
    started = str(function.get("started_at") or "")
    before = [span for span in models if str(span.get("started_at") or "") <= started]
    return str((before or models[:1] or [{}])[-1].get("id"))


def _text(output: Any) -> str:
    if isinstance(output, list):
        return "\n".join(
            as_text(message.get("content")) for message in output if isinstance(message, dict)
        )
    return as_text(output) if output is not None else ""


OPENAI_AGENTS = Format(
    name="openai-agents",
    expects="an OpenAI Agents SDK trace export (JSON objects with 'object': 'trace.span')",
    claims=_claims,
    read=_read,
)
