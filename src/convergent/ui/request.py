"""What one model request of a run was sent: its system prompt, messages and tools.

A cycle's request carried the conversation as it stood when the cycle started: the
checkpoint before the cycle says how many messages that was (and in which epoch of
the conversation: a compaction since replaced them, and then they are gone). The
tools come from the stored ``run_started`` event of the process that made the request
(each one's name, description and the JSON schema of its arguments). Long values are
cut to `CLIP` characters by SQLite itself, as everywhere in the console.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from convergent.durability.sqlite import RunStore
from convergent.ui.timeline import CLIP

__all__ = ["MessageView", "RequestView", "load_request"]


@dataclass(frozen=True, slots=True)
class MessageView:
    """One message as the model was sent it."""

    role: str
    """``system``, ``user``, ``assistant`` or ``tool``."""
    content: str
    """Its text (at most `CLIP` characters)."""
    cut: int = 0
    """Characters of the text not shown."""
    calls: str = ""
    """An assistant message's tool calls, as indented JSON."""
    name: str = ""
    """A tool result's tool name."""
    error: bool = False
    """A tool result that is an error."""


@dataclass(slots=True)
class RequestView:
    """The request of one cycle."""

    run_id: str
    """The run."""
    cycle: int
    """The cycle whose request it is."""
    messages: list[MessageView] = field(default_factory=list)
    """The conversation sent, system prompt first."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The tools offered: ``name``, ``description``, ``parameters`` (pretty JSON)."""
    note: str = ""
    """Why the messages cannot be shown in full (compacted since, not stored yet)."""
    tools_known: bool = True
    """Whether the run recorded its tools' descriptions (older runs did not)."""
    skipped: int = 0
    """Messages sent but not shown: those before the previous request's reply, when only
    what is new since then was asked for."""


OPENING = 2
"""Messages of the conversation's start shown with what is new (system prompt, task)."""


def load_request(
    store: RunStore, run_id: str, cycle: int, *, recent: bool = False, after_stop: bool = False
) -> RequestView:
    """The request ``run_id`` made in ``cycle``.

    Args:
        store: The run database.
        run_id: The run.
        cycle: The cycle whose request it is.
        recent: Read only the opening messages (`OPENING`) and what came after the
            previous request's reply (its calls' results, notes, steering), not every
            message before.
        after_stop: The request made after the stop (``cycle``: one past the last):
            the conversation it was sent, without the prompt that followed it.

    Raises:
        UserError: If no run has this id.
        ValueError: If the run has no such cycle.
    """
    run = store.get_run(run_id, clip=1)
    if not 1 <= cycle <= max(run.cycles, 1) + (1 if run.running or after_stop else 0):
        raise ValueError(f"run {run_id!r} has no cycle {cycle}")
    view = RequestView(run_id, cycle)
    ((epoch, count),) = store.query(
        "SELECT epoch, message_count FROM runs WHERE run_id = ?", [run_id]
    )
    point = store.query(
        "SELECT epoch, message_count FROM checkpoints WHERE run_id = ? AND cycle = ?",
        [run_id, cycle - 1],
    )
    if point and point[0][0] != epoch:
        view.note = (
            "The conversation was compacted after this cycle: the messages it was sent "
            "are no longer stored (its summary took their place)."
        )
        sent = 0
    elif point:
        sent = int(point[0][1])
    else:
        view.note = "This request's checkpoint is not stored yet: the conversation so far."
        sent = count
    since = _previous_reply(store, run_id, epoch, cycle) if recent else -1
    if since >= OPENING:
        view.skipped = since + 1 - OPENING
    rows = store.query(
        "SELECT json_extract(data, '$.role'), substr(json_extract(data, '$.content'), 1, ?), "
        "length(json_extract(data, '$.content')), json_extract(data, '$.tool_calls'), "
        "json_extract(data, '$.name'), json_extract(data, '$.is_error') FROM messages "
        "WHERE run_id = ? AND epoch = ? AND seq < ? AND (seq < ? OR seq > ?) ORDER BY seq",
        [CLIP, run_id, epoch, sent, OPENING, since],
    )
    for role, content, length, calls, name, error in rows:
        text = str(content or "")
        shown = ""
        if calls and calls != "[]":
            made = [{"name": c["name"], "arguments": c["arguments"]} for c in json.loads(calls)]
            shown = json.dumps(made, indent=2, ensure_ascii=False)
        view.messages.append(
            MessageView(str(role), text, (length or 0) - len(text), shown, name or "", bool(error))
        )
    started = store.query(
        "SELECT json_extract(data, '$.tool_specs') FROM events WHERE run_id = ? "
        "AND type = 'run_started' AND cycle < ? ORDER BY seq DESC LIMIT 1",
        [run_id, cycle],
    )
    specs = json.loads(started[0][0]) if started and started[0][0] else None
    if specs is None:
        view.tools_known = False
    else:
        view.tools = [
            {
                "name": spec.get("name", ""),
                "description": spec.get("description", ""),
                "parameters": json.dumps(spec.get("parameters"), indent=2, ensure_ascii=False),
            }
            for spec in specs
        ]
    return view


def _previous_reply(store: RunStore, run_id: str, epoch: int, cycle: int) -> int:
    """Where the reply of the request before ``cycle``'s is among the messages (-1: none).

    The checkpoint before that request counts the messages it was sent; its reply came
    next. A checkpoint of an older epoch (compacted since) says nothing: -1.
    """
    if cycle < 2:
        return -1
    point = store.query(
        "SELECT epoch, message_count FROM checkpoints WHERE run_id = ? AND cycle = ?",
        [run_id, cycle - 2],
    )
    return int(point[0][1]) if point and point[0][0] == epoch else -1
