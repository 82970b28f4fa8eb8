"""Stored events as the run page shows them: a card each, with a title and a sentence.

Gate decisions, verdicts, steering, notes to the model, compaction, answers, pauses and
resumptions each get words of their own; any other event (one a component defines) is
shown field by field, never as raw JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["EventView", "describe_event"]


@dataclass(frozen=True, slots=True)
class EventView:
    """A stored event (gate decision, verdict, steering, compaction, answer)."""

    type: str
    """The event's type (``gate_decided``, ``verified``...)."""
    title: str
    """A short label."""
    detail: str
    """What happened, in words."""
    tone: str = "info"
    """``info``, ``good``, ``warn`` or ``bad``: how the page colours it."""


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "n/a"


def _gate(data: dict[str, Any]) -> EventView:
    asked = data.get("decision") == "asked"
    detail = (
        f"{data.get('decision')} ({data.get('trigger')}): score {_score(data.get('score'))}"
        f" against threshold {_score(data.get('threshold'))}; clarity "
        f"{_score(data.get('clarity'))}, certainty {_score(data.get('certainty'))}"
    )
    if data.get("reason"):
        detail += f". {data['reason']}"
    if data.get("question"):
        detail += f" Asked: {data['question']}"
    return EventView("gate_decided", "gate", detail, "bad" if asked else "good")


def _verified(data: dict[str, Any]) -> EventView:
    passed = bool(data.get("passed"))
    detail = "passed" if passed else f"failed: {data.get('feedback', '')}"
    return EventView("verified", "verifier", detail, "good" if passed else "bad")


def _redirected(data: dict[str, Any]) -> EventView:
    return EventView("redirected", "steering", f"message delivered: {data.get('message', '')}")


def _compacted(data: dict[str, Any]) -> EventView:
    detail = (
        f"{data.get('method')}: {data.get('messages_before')} -> "
        f"{data.get('messages_after')} messages, {data.get('tokens_before')} -> "
        f"{data.get('tokens_after')} tokens (window {data.get('window')})"
    )
    if data.get("error"):
        detail += f"; summary failed: {data['error']}"
    return EventView("context_compacted", "compaction", detail)


def _answered(data: dict[str, Any]) -> EventView:
    status = data.get("status")
    answer = data.get("answer")
    detail = f"{data.get('question', '')} -> " + (
        f"{answer}" if answer is not None else f"({status})"
    )
    tone = "good" if status == "answered" else "bad"
    return EventView("user_answered", f"asked via {data.get('channel', '?')}", detail, tone)


def _nudged(data: dict[str, Any]) -> EventView:
    about = str(data.get("about", ""))
    title = "budget note" if about == "budget" else f"note instead of stopping {about}"
    return EventView("nudged", title, f"the model was told: {data.get('note', '')}", "warn")


def _started(data: dict[str, Any]) -> EventView:
    tools = ", ".join(str(name) for name in data.get("tools") or ()) or "none"
    if data.get("resumed"):
        detail = f"a new process went on from cycle {data.get('cycle')} (tools: {tools})"
        return EventView("run_started", "resumed", detail, "warn")
    return EventView("run_started", "started", f"model {data.get('model', '?')}, tools: {tools}")


def _paused(data: dict[str, Any]) -> EventView:
    return EventView("run_paused", "paused", "a pause held the run before its next cycle", "warn")


def _unpaused(data: dict[str, Any]) -> EventView:
    return EventView("run_unpaused", "pause ended", "the run went on")


_CARDS: dict[str, Callable[[dict[str, Any]], EventView]] = {
    "gate_decided": _gate,
    "verified": _verified,
    "redirected": _redirected,
    "context_compacted": _compacted,
    "user_answered": _answered,
    "nudged": _nudged,
    "run_started": _started,
    "run_paused": _paused,
    "run_unpaused": _unpaused,
}


def describe_event(data: dict[str, Any]) -> EventView:
    """A stored event as a title, a sentence and a tone."""
    kind = str(data.get("type", "event"))
    card = _CARDS.get(kind)
    if card is not None:
        return card(data)
    return EventView(kind, kind.replace("_", " "), _readable(data))


def _readable(data: dict[str, Any]) -> str:
    """An event's fields in words, ``name: value; ...`` (text as it is, data as JSON)."""
    parts = []
    for key, value in data.items():
        if key in ("type", "run_id", "cycle", "time"):
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key.replace('_', ' ')}: {shown}")
    return "; ".join(parts)
