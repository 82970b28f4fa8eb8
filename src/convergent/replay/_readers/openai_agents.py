"""The OpenAI Agents SDK's trace export: what its tracing processors receive.

Each trace and span the SDK ends is exported as an object (``trace.export()``,
``span.export()``): ``{"object": "trace"}`` and ``{"object": "trace.span", "trace_id",
"parent_id", "started_at", "span_data", "error"}``. A processor that writes them as JSON
Lines, a JSON list of them, or the SDK's backend payload ``{"data": [...]}`` are read
alike. Each trace is one run, named by its ``group_id``, else its workflow name when the
user gave one, else its agent's name. Every model call is a reply: the ``turn`` spans the
runner opens for each (``span_data.data.sdk_span_type == "turn"``), else the
``generation`` / ``response`` spans; a ``function`` span under it is one of its calls
(its ``input`` the arguments, its ``output`` the result), failed when the span carries
an ``error``. A reply's text is in the model span under it: a ``generation`` span's
``output`` (Chat Completions models), or the ``output`` a ``response`` span holds when
its processor writes the response's output items (the SDK's own export keeps only the
response's id: the processor docs/replay.md shows adds them). Without them a run has
no final answer, and says so.
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
from convergent.replay._recording import Malformed, Skipped, Trajectory

__all__ = ["OPENAI_AGENTS"]

_OBJECTS = frozenset({"trace", "trace.span"})
_MODEL_SPANS = ("generation", "response")
_DEFAULT_WORKFLOW = "Agent workflow"
"""The SDK's workflow name when the user gives none: it names no run."""


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


def _read(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed | Skipped]:
    spans: defaultdict[str, list[Mapping[str, Any]]] = defaultdict(list)
    names: dict[str, str] = {}
    lines = jsonl_objects(path) if sample.lines else iter([(1, sample.value)])
    for number, value in lines:
        if isinstance(value, FormatMismatch):
            yield Malformed(f"{path}:{number}", str(value))
            continue
        found_items = _items(value)
        if found_items is None:
            yield Skipped(f"{path}:{number}", "not a trace or span, passed over")
            continue
        for item in found_items:
            trace = str(item.get("trace_id") or item.get("id") or "")
            if item.get("object") == "trace":
                workflow = str(item.get("workflow_name") or "")
                named = item.get("group_id") or (workflow if workflow != _DEFAULT_WORKFLOW else "")
                if named:
                    names[trace] = str(named)
            else:
                spans[trace].append(item)
    for trace, found in spans.items():
        try:
            run = _run(path, trace, names.get(trace), found)
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
    path: Path, trace: str, name: str | None, spans: Sequence[Mapping[str, Any]]
) -> Trajectory | None:
    ordered = sorted(spans, key=lambda span: str(span.get("started_at") or ""))
    turns = [span for span in ordered if _kind(span) == "turn"]
    model_spans = [span for span in ordered if _kind(span) in _MODEL_SPANS]
    replies = turns or model_spans
    functions = [span for span in ordered if _kind(span) == "function"]
    if not replies and not functions:
        return None
    parents = {str(span.get("id")): span.get("parent_id") for span in ordered}
    reply_ids = [str(span.get("id")) for span in replies]
    owner: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for function in functions:
        owner[_owning(function, parents, reply_ids, replies)].append(function)
    models: dict[str, Mapping[str, Any]] = {}
    for span in model_spans if turns else ():
        models.setdefault(_owning(span, parents, reply_ids, replies), span)
    builder = TurnBuilder()
    model_name = ""
    for span in replies:
        model = models.get(str(span.get("id")), span)
        data = model.get("span_data") or {}
        usage = (
            (span.get("span_data") or {}).get("data", {}).get("usage") or data.get("usage") or {}
        )
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
    agents = [span for span in ordered if _kind(span) == "agent"]
    agent = str((agents[0].get("span_data") or {}).get("name") or "") if agents else ""
    return Trajectory(
        id=f"{path.name} {trace}",
        name=name or agent or trace,
        source=str(path),
        model=model_name,
        success=None,
        turns=builder.turns()[:1],
        gaps=dict(builder.gaps),
    )


def _owning(
    function: Mapping[str, Any],
    parents: Mapping[str, Any],
    model_ids: Sequence[str],
    models: Sequence[Mapping[str, Any]],
) -> str:
    """The model span a function span belongs to: its ancestor, else the latest before it.

    The walk up the parents ends after as many steps as there are spans, so that a file
    whose parents form a cycle cannot hold it.
    """
    parent = function.get("parent_id")
    for _ in range(len(parents) + 1):
        if parent is None:
            break
        if str(parent) in model_ids:
            return str(parent)
        parent = parents.get(str(parent))
    started = str(function.get("started_at") or "")
    before = [span for span in models if str(span.get("started_at") or "") <= started]
    return str((before or models[:1] or [{}])[-1].get("id"))


def _text(output: Any) -> str:
    """The text of a model span's output: messages (Chat Completions) or output items."""
    if isinstance(output, str):
        return output
    if not isinstance(output, list):
        return ""
    texts: list[str] = []
    for item in output:
        if not isinstance(item, dict) or item.get("type") == "function_call":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [
                str(block.get("text") or "")
                for block in content
                if isinstance(block, dict) and block.get("type") in ("text", "output_text")
            ]
    return "\n".join(text for text in texts if text)


OPENAI_AGENTS = Format(
    name="openai-agents",
    expects="an OpenAI Agents SDK trace export (JSON objects with 'object': 'trace.span')",
    claims=_claims,
    read=_read,
)
