"""Plain message lists: what most logs, LangChain and LangGraph hold.

A run is a list of messages in one of these shapes, mixed freely:

- OpenAI chat: ``role`` ``user``/``assistant``/``tool``, ``tool_calls`` with
  ``function.name`` and ``function.arguments``, tool messages with ``tool_call_id``;
  and the older ``function_call`` with ``role: "function"`` results named by the tool;
- Anthropic: ``content`` blocks ``tool_use`` (``id``, ``name``, ``input``) and
  ``tool_result`` (``tool_use_id``, ``content``, ``is_error``) in a user message;
- LangChain: ``type`` ``human``/``ai``/``tool`` with ``tool_calls`` (``name``, ``args``,
  ``id``), ``invalid_tool_calls`` (the model's mistakes) and ``status``, or
  ``messages_to_dict``'s ``{"type", "data"}``.

A file holds one run (a JSON list of messages, or JSON Lines of messages), a run object
``{"messages": [...], "success": true, "id": ...}``, a list of run objects, or JSON
Lines of run objects. A JSON Lines file may start with a header line (benchmark
metadata): a header of a file of messages gives the run its id, model and label where
it has them; any other line that is not a run is passed over and reported. A run
object's label is its ``success`` (or ``resolved``, ``passed``) flag or its ``reward``
(1 is success); a result is a failure where the message says so (``is_error``,
``error``, ``status: "error"``). A user message (not one that only carries tool
results) starts a turn. A result without a call id is matched to its call by order
(counted), and a message that cannot be read is skipped (counted): neither costs the
run.
"""

from __future__ import annotations

import dataclasses
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
    reward_label,
)
from convergent.replay._readers._format import Format, Sample
from convergent.replay._recording import Malformed, Skipped, Trajectory

__all__ = ["MESSAGES"]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_LANGCHAIN = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_FLAGS = ("success", "succeeded", "resolved", "passed")
_NAMES = ("id", "run_id", "name", "task_id", "instance_id")

Call = tuple[str | None, str, Mapping[str, Any]]


def _message(found: Any) -> Mapping[str, Any] | None:
    """The message in OpenAI/Anthropic terms, or None if ``found`` is not one."""
    if not isinstance(found, dict):
        return None
    raw: dict[str, Any] = found
    kind, role = raw.get("type"), raw.get("role")
    if "data" in raw and isinstance(kind, str) and kind in _LANGCHAIN:
        if isinstance(raw["data"], dict):
            raw = {**raw["data"], "type": kind}
            role = raw.get("role")
    if isinstance(role, str) and role in _ROLES:
        return raw
    if isinstance(kind, str) and kind in _LANGCHAIN:
        return {**raw, "role": _LANGCHAIN[kind]}
    return None


def _is_run(raw: Any) -> bool:
    return isinstance(raw, dict) and isinstance(raw.get("messages"), list)


def _claims(path: Path, sample: Sample) -> bool:
    value = sample.value
    if sample.lines:
        return any(_message(line) is not None or _is_run(line) for line in sample.head)
    if _is_run(value):
        return True
    return (
        isinstance(value, list)
        and bool(value)
        and (_message(value[0]) is not None or _is_run(value[0]))
    )


def _runs_per_line(sample: Sample) -> bool:
    """Whether a JSON Lines file holds a run per line (else a message per line)."""
    return any(_is_run(line) for line in sample.head)


def _read(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed | Skipped]:
    value = sample.value
    if sample.lines and _runs_per_line(sample):
        for number, line in jsonl_objects(path):
            if isinstance(line, FormatMismatch):
                yield Malformed(f"{path}:{number}", str(line))
            elif _is_run(line):
                yield _run(path, f"{path.name}:{number}", line)
            else:
                yield Skipped(f"{path}:{number}", f"not a run ({_what(line)}), passed over")
    elif sample.lines:
        yield _message_lines(path)
    elif _is_run(value):
        yield _run(path, path.name, value)
    elif _is_run(value[0]):
        for index, run in enumerate(value):
            yield _run(path, f"{path.name}#{index}", run)
    else:
        yield _run(path, path.name, {"messages": value})


def _what(line: Any) -> str:
    if isinstance(line, dict):
        keys = ", ".join(sorted(map(str, line))[:4])
        return f"an object with {keys}" if keys else "an empty object"
    return f"a JSON {type(line).__name__}"


def _message_lines(path: Path) -> Trajectory | Malformed:
    """A file of one message per line; a header line before them describes the run."""
    messages: list[Any] = []
    header: dict[str, Any] = {}
    unread = 0
    for _, line in jsonl_objects(path):
        if isinstance(line, FormatMismatch):
            unread += 1
        elif _message(line) is None and not messages and isinstance(line, dict) and not header:
            header = line
        else:
            messages.append(line)
    run = _run(path, path.name, {**header, "messages": messages})
    if unread and isinstance(run, Trajectory):
        gaps = {**run.gaps, "messages_skipped": run.gaps.get("messages_skipped", 0) + unread}
        return dataclasses.replace(run, gaps=gaps)
    return run


def _label(run: Mapping[str, Any]) -> bool | None:
    for key in _FLAGS:
        if isinstance(run.get(key), bool):
            return bool(run[key])
    if run.get("reward") is not None:
        return reward_label(run["reward"])
    return None


def _run(path: Path, where: str, run: Any) -> Trajectory | Malformed:
    try:
        if not _is_run(run):
            raise FormatMismatch("a run is an object with a 'messages' list")
        name = str(next((run[key] for key in _NAMES if run.get(key)), where))
        builder = TurnBuilder()
        _turns(builder, run["messages"])
        turns = builder.turns()
        return Trajectory(
            id=f"{where} {name}" if name != where else where,
            name=name,
            source=str(path),
            model=str(run.get("model") or ""),
            success=_label(run),
            turns=turns,
            gaps=dict(builder.gaps),
        )
    except READ_ERRORS as exc:
        return Malformed(f"{path} ({where})", f"not a message list ({type(exc).__name__}: {exc})")


def _failed(message: Mapping[str, Any]) -> bool:
    return bool(message.get("is_error") or message.get("error")) or message.get("status") == "error"


def _calls(message: Mapping[str, Any]) -> tuple[list[Call], list[Call]]:
    """The message's calls, and the calls it made that its harness could not read."""
    calls: list[Call] = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function")
        if isinstance(function, dict):  # OpenAI
            calls.append(
                (raw.get("id"), str(function["name"]), as_arguments(function.get("arguments")))
            )
        else:  # LangChain
            arguments = raw.get("args", raw.get("arguments"))
            calls.append((raw.get("id"), str(raw["name"]), as_arguments(arguments)))
    legacy = message.get("function_call")
    if isinstance(legacy, dict) and legacy.get("name"):  # OpenAI before tool calls
        calls.append((None, str(legacy["name"]), as_arguments(legacy.get("arguments"))))
    ids = {call_id for call_id, _, _ in calls if call_id is not None}
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use":  # Anthropic
            if block.get("id") is None or block.get("id") not in ids:  # not in tool_calls too
                calls.append(
                    (block.get("id"), str(block["name"]), as_arguments(block.get("input")))
                )
    invalid: list[Call] = [
        (raw.get("id"), str(raw.get("name") or "(no name)"), {"arguments": str(raw.get("args"))})
        for raw in message.get("invalid_tool_calls") or []
        if isinstance(raw, dict)
    ]
    return calls, invalid


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return as_text(content)


def _turns(builder: TurnBuilder, raw_messages: Sequence[Any]) -> None:
    mistakes: set[str] = set()
    for raw in raw_messages:
        message = _message(raw)
        if message is None:
            builder.gaps["messages_skipped"] += 1
            continue
        try:
            _one(builder, message, mistakes)
        except READ_ERRORS:
            builder.gaps["messages_skipped"] += 1


def _one(builder: TurnBuilder, message: Mapping[str, Any], mistakes: set[str]) -> None:
    role = message["role"]
    content = message.get("content")
    if role == "assistant":
        calls, invalid = _calls(message)
        mistakes.update(str(call_id) for call_id, _, _ in invalid if call_id is not None)
        builder.assistant(_text(content), calls + invalid)
        for position, (call_id, _, _) in enumerate(invalid, len(calls)):
            if call_id is None:  # no answer can find it: it was the model's mistake
                builder.own_result(position, "(a call its harness could not read)", mistake=True)
    elif role in ("tool", "function"):
        call_id = message.get("tool_call_id")
        builder.result(
            None if call_id is None else str(call_id),
            as_text(content),
            _failed(message),
            name=None if message.get("name") is None else str(message["name"]),
            mistake=call_id is not None and str(call_id) in mistakes,
        )
    elif role == "user":
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for block in results:
            call_id = block.get("tool_use_id")
            builder.result(
                None if call_id is None else str(call_id),
                as_text(block.get("content")),
                _failed(block),
            )
        if not results:
            builder.user()


MESSAGES = Format(
    name="messages",
    expects="a message list (OpenAI, Anthropic or LangChain messages, or runs with 'messages')",
    claims=_claims,
    read=_read,
)
