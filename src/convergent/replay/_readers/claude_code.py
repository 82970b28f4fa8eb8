"""Claude Code session transcripts: the JSON Lines file Claude Code writes per session.

Claude Code keeps each session in ``~/.claude/projects/<project>/<session id>.jsonl``
(under ``CLAUDE_CONFIG_DIR`` when set): one line per event. ``user`` lines hold the
user's prompts, and tool results as ``tool_result`` blocks (``is_error`` on a failure);
``assistant`` lines hold one content block each (text, ``tool_use``), several lines for
one API message sharing its ``message.id`` and ``usage``. Lines of other types
(attachments, queue operations, summaries...), meta messages and sub-agents' side
chains are not the agent's conversation and are left out. A prompt starts a turn; the
session is one run, named by its session id, without a label of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
from convergent.replay._tool_kinds import CLAUDE_CODE_READ_ONLY

__all__ = ["CLAUDE_CODE"]

_TYPES = frozenset({"user", "assistant", "summary", "queue-operation", "file-history-snapshot"})


def _claims(path: Path, sample: Sample) -> bool:
    value = sample.value
    return (
        sample.lines
        and isinstance(value, dict)
        and value.get("type") in _TYPES
        and ("sessionId" in value or "leafUuid" in value or "messageId" in value)
    )


class _Session:
    """Assistant lines of one API message are merged into one reply."""

    def __init__(self) -> None:
        self.builder = TurnBuilder()
        self.open_id: str | None = None
        self.text: list[str] = []
        self.calls: list[tuple[str | None, str, Mapping[str, Any]]] = []
        self.usage: Any = None
        self.model = ""

    def flush(self) -> None:
        if self.open_id is not None:
            self.builder.assistant("\n".join(self.text), self.calls, self.usage)
        self.open_id, self.text, self.calls, self.usage = None, [], [], None

    def assistant(self, message: Mapping[str, Any]) -> None:
        message_id = str(message.get("id") or "")
        if message_id != self.open_id or not message_id:
            self.flush()
            self.open_id = message_id
        self.model = str(message.get("model") or self.model)
        usage = message.get("usage") or {}
        self.usage = usage_of(usage.get("input_tokens"), usage.get("output_tokens"))
        content = message.get("content")
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if block.get("type") == "text" and block.get("text"):
                self.text.append(str(block["text"]))
            elif block.get("type") == "tool_use":
                self.calls.append(
                    (block.get("id"), str(block["name"]), as_arguments(block.get("input")))
                )

    def user(self, message: Mapping[str, Any], meta: bool) -> None:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        results = [block for block in blocks if block.get("type") == "tool_result"]
        if results:
            self.flush()
            for block in results:
                self.builder.result(
                    block.get("tool_use_id"),
                    as_text(block.get("content")),
                    bool(block.get("is_error")),
                )
        elif not meta:
            self.flush()
            self.builder.user()


def _read(path: Path, sample: Sample) -> Iterator[Trajectory | Malformed]:
    session = _Session()
    name = path.stem
    try:
        for number, line in jsonl_objects(path):
            if isinstance(line, FormatMismatch):
                yield Malformed(f"{path}:{number}", str(line))
                continue
            if not isinstance(line, dict) or line.get("isSidechain"):
                continue
            name = str(line.get("sessionId") or name)
            kind = line.get("type")
            message = line.get("message")
            if kind == "assistant" and isinstance(message, dict):
                session.assistant(message)
            elif kind == "user" and isinstance(message, dict):
                session.user(message, bool(line.get("isMeta")))
        session.flush()
        yield Trajectory(
            id=path.name,
            name=name,
            source=str(path),
            model=session.model,
            success=None,
            turns=session.builder.turns(),
            read_only=CLAUDE_CODE_READ_ONLY,
            gaps=dict(session.builder.gaps),
        )
    except READ_ERRORS as exc:
        yield Malformed(str(path), f"not a Claude Code transcript ({type(exc).__name__}: {exc})")


CLAUDE_CODE = Format(
    name="claude-code",
    expects="a Claude Code session transcript (JSON Lines with 'sessionId', 'type', 'message')",
    claims=_claims,
    read=_read,
)
