"""Plain message lists: what most logs, LangChain and LangGraph hold.

A run is a list of messages in one of three shapes, mixed freely:

- OpenAI chat: ``role`` ``user``/``assistant``/``tool``, ``tool_calls`` with
  ``function.name`` and ``function.arguments``, tool messages with ``tool_call_id``;
- Anthropic: ``content`` blocks ``tool_use`` (``id``, ``name``, ``input``) and
  ``tool_result`` (``tool_use_id``, ``content``, ``is_error``) in a user message;
- LangChain: ``type`` ``human``/``ai``/``tool`` with ``tool_calls`` (``name``, ``args``,
  ``id``) and ``status``, or ``messages_to_dict``'s ``{"type", "data"}``.

A file holds one run (a JSON list of messages, or JSON Lines of messages), a run object
``{"messages": [...], "success": true, "id": ...}``, a list of run objects, or JSON
Lines of run objects. A run object's label is its ``success`` (or ``resolved``,
``passed``) flag or its ``reward`` (1 is success); a result is a failure where the
message says so (``is_error``, ``error``, ``status: "error"``). A user message (not one
that only carries tool results) starts a turn.
"""

from __future__ import annotations

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
from convergent.replay._recording import Malformed, Trajectory

__all__ = ["MESSAGES"]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_LANGCHAIN = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_FLAGS = ("success", "succeeded", "resolved", "passed")


def _message(found: Any) -> Mapping[str, Any] | None:
    """The message in OpenAI/Anthropic terms, or None if ``found`` is not one."""
    if not isinstance(found, dict):
        return None
    raw: dict[str, Any] = found
    if "data" in raw and raw.get("type") in _LANGCHAIN and isinstance(raw["data"], dict):
        raw = {**raw["data"], "type": raw["type"]}
    if raw.get("role") in _ROLES:
        return raw
    if raw.get("type") in _LANGCHAIN:
        return {**raw, "role": _LANGCHAIN[str(raw["type"])]}
    return None


def _is_run(raw: Any) -> bool:
    return isinstance(raw, dict) and isinstance(raw.get("messages"), list)


def _claims(path: Path, sample: Sample) -> bool:
    value = sample.value
    if sample.lines:
        return _message(value) is not None or _is_run(value)
    if _is_run(value):
        return True
    return (
        isinstance(value, list)
        and bool(value)
        and (_message(value[0]) is not None or _is_run(value[0]))
    )


def _read(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    value = sample.value
    if sample.lines and _is_run(value):
        for number, line in jsonl_objects(path):
            if isinstance(line, FormatMismatch):
                yield Malformed(f"{path}:{number}", str(line))
            else:
                yield _run(path, f"{path.name}:{number}", line)
    elif sample.lines:
        messages: list[Any] = []
        for number, line in jsonl_objects(path):
            if isinstance(line, FormatMismatch):
                yield Malformed(f"{path}:{number}", f"{line}; the run is skipped")
                return
            messages.append(line)
        yield _run(path, path.name, {"messages": messages})
    elif _is_run(value):
        yield _run(path, path.name, value)
    elif _is_run(value[0]):
        for index, run in enumerate(value):
            yield _run(path, f"{path.name}#{index}", run)
    else:
        yield _run(path, path.name, {"messages": value})


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
        name = str(run.get("id") or run.get("name") or where)
        return Trajectory(
            id=f"{where} {name}" if name != where else where,
            name=name,
            source=str(path),
            model=str(run.get("model") or ""),
            success=_label(run),
            turns=_turns(run["messages"]),
        )
    except READ_ERRORS as exc:
        return Malformed(f"{path} ({where})", f"not a message list ({type(exc).__name__}: {exc})")


def _failed(message: Mapping[str, Any]) -> bool:
    return bool(message.get("is_error") or message.get("error")) or message.get("status") == "error"


def _calls(message: Mapping[str, Any]) -> list[tuple[str | None, str, Mapping[str, Any]]]:
    calls: list[tuple[str | None, str, Mapping[str, Any]]] = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function")
        if isinstance(function, dict):  # OpenAI
            calls.append(
                (raw.get("id"), str(function["name"]), as_arguments(function.get("arguments")))
            )
        else:  # LangChain
            calls.append(
                (
                    raw.get("id"),
                    str(raw["name"]),
                    as_arguments(raw.get("args", raw.get("arguments"))),
                )
            )
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use":  # Anthropic
            calls.append((block.get("id"), str(block["name"]), as_arguments(block.get("input"))))
    return calls


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return as_text(content)


def _turns(raw_messages: Sequence[Any]) -> tuple[Any, ...]:
    builder = TurnBuilder()
    for raw in raw_messages:
        message = _message(raw)
        if message is None:
            raise FormatMismatch(f"not a message: {str(raw)[:80]}")
        role = message["role"]
        content = message.get("content")
        if role == "assistant":
            builder.assistant(_text(content), _calls(message))
        elif role in ("tool", "function"):
            builder.result(message.get("tool_call_id"), as_text(content), _failed(message))
        elif role == "user":
            blocks = content if isinstance(content, list) else []
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            for block in results:
                builder.result(
                    block.get("tool_use_id"), as_text(block.get("content")), _failed(block)
                )
            if not results:
                builder.user()
    return builder.turns()


MESSAGES = Format(
    name="messages",
    expects="a message list (OpenAI, Anthropic or LangChain messages, or runs with 'messages')",
    claims=_claims,
    read=_read,
)
