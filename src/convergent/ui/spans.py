"""One span of a run in one place: a model request, a tool call, or the answer after a stop.

The span panel (a bar of the run's timeline or a card, clicked) shows what one request
or call was given and gave back, its tokens, time, cost and the model settings it was
sent with. It gathers what the run page spreads over the cycle's card, the request page
and the stored events:

- a model request: the messages new since the previous request (and the opening ones),
  the reply and the calls it asked for, and the stored facts of its reply
  (``model_responded``: usage, duration, finish reason, settings); a run stored before
  those were kept shows the tokens its checkpoints counted instead;
- a tool call: its arguments, result, outcome, duration and server, and for an agent
  called as a tool, its child run with what that spent;
- the answer after the stop: its stored ``answered_after_stop`` event (prompt, reply,
  usage, duration, settings, or why it failed) and the conversation it was sent.

Long values are cut to `CLIP` characters, as everywhere in the console.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from convergent.durability.sqlite import RunStore, RunSummary
from convergent.durability.sqlite._codec import parse_usage
from convergent.messages import Usage
from convergent.models._prices import format_cost
from convergent.models.registry import costs_nothing
from convergent.ui.request import RequestView, load_request
from convergent.ui.timeline import CLIP, load_run_view

__all__ = ["SpanView", "load_after_stop_span", "load_call_span", "load_model_span"]


@dataclass(slots=True)
class SpanView:
    """What the span panel shows of one request or call."""

    run_id: str
    """The run."""
    kind: str
    """``model``, ``tool`` or ``after_stop``."""
    title: str
    """What it is, in a few words."""
    cycle: int
    """The cycle it belongs to."""
    facts: list[tuple[str, str]] = field(default_factory=list)
    """Label and value of each fact (model, tokens, time, cost...), in order."""
    settings: dict[str, Any] | None = None
    """The model settings the request was sent with (a model request's)."""
    settings_note: str = ""
    """Why there are no settings to show."""
    request: RequestView | None = None
    """The messages sent (a model request's; only those new since the previous one)."""
    prompt: str = ""
    """The prompt of the answer after the stop, sent after the conversation."""
    arguments: str = ""
    """A tool call's arguments (indented JSON)."""
    output: str = ""
    """The model's text, or a tool call's result."""
    output_cut: int = 0
    """Characters of ``output`` not shown."""
    calls: str = ""
    """The tool calls a model request asked for (indented JSON)."""
    error: str = ""
    """Why a request has no reply."""
    child: RunSummary | None = None
    """The child run of an agent called as a tool."""
    live: bool = False
    """Still going on (a running call, a request without a reply yet)."""
    key: str = ""
    """What names it in its address: the cycle of a model request, a call's id."""


def _cost(usage: Usage, run: RunSummary) -> str:
    return format_cost(usage.cost, free=costs_nothing(run.spec))


def _tokens(usage: Usage) -> str:
    if not usage.total_tokens:
        return "not reported by the model"
    return f"{usage.total_tokens:,} ({usage.input_tokens:,} in, {usage.output_tokens:,} out)"


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _clock(timestamp: float) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))
    return f"{stamp}.{int(timestamp % 1 * 1000):03d}"


def _stored_event(store: RunStore, run_id: str, kind: str, cycle: int | None) -> dict[str, Any]:
    """The last stored event of ``kind`` (in ``cycle``, if given), or an empty dict."""
    where = "" if cycle is None else " AND cycle = ?"
    rows = store.query(
        f"SELECT data FROM events WHERE run_id = ? AND type = ?{where} ORDER BY seq DESC LIMIT 1",
        [run_id, kind, *([] if cycle is None else [cycle])],
    )
    found: dict[str, Any] = json.loads(rows[0][0]) if rows else {}
    return found


def _checkpoint_usage(store: RunStore, run_id: str, cycle: int) -> Usage | None:
    """What cycle ``cycle`` spent, from the checkpoints around it (None: not stored)."""
    rows = dict(
        store.query(
            "SELECT cycle, usage FROM checkpoints WHERE run_id = ? AND cycle IN (?, ?)",
            [run_id, cycle - 1, cycle],
        )
    )
    if cycle not in rows:
        return None
    after = parse_usage(rows[cycle])
    before = parse_usage(rows[cycle - 1]) if cycle - 1 in rows else Usage()
    return Usage(
        input_tokens=after.input_tokens - before.input_tokens,
        output_tokens=after.output_tokens - before.output_tokens,
        requests=after.requests - before.requests,
        cost=max(0.0, after.cost - before.cost),
    )


def _usage_of(data: dict[str, Any]) -> Usage:
    usage = data.get("usage") or {}
    return Usage(
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
        requests=int(usage.get("requests", 0)),
        cost=float(usage.get("cost", 0.0)),
    )


def _request_facts(view: SpanView, run: RunSummary, reply: dict[str, Any]) -> None:
    """Tokens, time, cost, finish reason and settings from a stored reply's facts."""
    usage = _usage_of(reply)
    duration = float(reply.get("duration", 0.0))
    view.facts += [
        ("tokens", _tokens(usage)),
        ("cost", _cost(usage, run)),
        ("latency", _seconds(duration)),
        ("started", _clock(float(reply.get("time", 0.0)) - duration)),
    ]
    if reply.get("first_delta") is not None:
        view.facts.append(("first token after", _seconds(float(reply["first_delta"]))))
    view.facts.append(("finish reason", str(reply.get("finish_reason") or "not reported")))
    metadata = reply.get("metadata")
    if metadata:
        view.facts.append(("reply metadata (recorded only)", json.dumps(metadata)))
    view.settings = reply.get("settings") or {}
    if not view.settings:
        view.settings_note = "None were set: the model's own defaults."


def load_model_span(store: RunStore, run_id: str, cycle: int) -> SpanView:
    """The model request of ``cycle``.

    Raises:
        UserError: If no run has this id.
        ValueError: If the run has no such cycle.
    """
    run = store.get_run(run_id, clip=1, data=False)
    if not 1 <= cycle <= run.cycles + (1 if run.running else 0):
        raise ValueError(f"run {run_id!r} has no cycle {cycle}")
    view = SpanView(run_id, "model", f"Cycle {cycle}: model request", cycle, key=str(cycle))
    view.facts.append(("model", run.model))
    view.request = load_request(store, run_id, cycle, recent=True)
    shown = load_run_view(store, run_id, upto=cycle, count=1)
    this = next((c for c in shown.cycles if c.number == cycle), None)
    if this is not None:
        view.output, view.output_cut = this.text, this.text_cut
        asked = [{"name": c.name, "arguments": _parsed(c.arguments)} for c in this.calls]
        view.calls = json.dumps(asked, indent=2, ensure_ascii=False) if asked else ""
    reply = _stored_event(store, run_id, "model_responded", cycle)
    if reply:
        _request_facts(view, run, reply)
        return view
    if run.running and cycle > run.cycles:
        view.live = True
        view.facts.append(("state", "the model is working on it"))
        view.settings_note = "Known once the model has replied."
        return view
    usage = _checkpoint_usage(store, run_id, cycle)
    if usage is not None:
        view.facts += [("tokens", _tokens(usage)), ("cost", _cost(usage, run))]
    view.settings_note = (
        "Not recorded: the run was stored by an older convergent, which kept neither the "
        "settings nor the latency of each request."
    )
    return view


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # cut: the start of its JSON text


def load_call_span(store: RunStore, run_id: str, call_id: str) -> SpanView:
    """The tool call ``call_id`` of a run (finished, or still running).

    Raises:
        UserError: If no run has this id.
        ValueError: If the run has no such call.
    """
    run = store.get_run(run_id, clip=1, data=False)
    rows = store.query(
        "SELECT cycle, name, substr(arguments, 1, ?1), length(arguments), outcome, "
        "substr(result, 1, ?1), length(result), duration, finished_at, source "
        "FROM finished_calls WHERE run_id = ?2 AND call_id = ?3 ORDER BY cycle DESC LIMIT 1",
        [CLIP, run_id, call_id],
    )
    if not rows:
        return _unfinished_call(store, run, call_id)
    cycle, name, arguments, length, outcome, result, total, duration, finished, source = rows[0]
    view = SpanView(run_id, "tool", f"{name}: tool call of cycle {cycle}", cycle, key=call_id)
    view.arguments = _shown_arguments(arguments, length)
    view.output, view.output_cut = result, total - len(result)
    view.facts += [
        ("tool", name),
        ("outcome", outcome),
        ("duration", _seconds(duration)),
        ("started", _clock(finished - duration)),
        ("finished", _clock(finished)),
        ("call id", call_id),
    ]
    if source:
        view.facts.append(("server", source))
    _add_child(store, view, run, call_id)
    return view


def _shown_arguments(text: str | None, length: int | None) -> str:
    if text is None or length is None:
        return "null"
    if length > len(text):
        return f"{text}… ({length - len(text):,} more characters)"
    return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)


def _add_child(store: RunStore, view: SpanView, run: RunSummary, call_id: str) -> None:
    """The child run an agent called as a tool started for the call, with what it spent."""
    rows = store.query(
        "SELECT run_id FROM runs WHERE parent_run_id = ? AND parent_call_id = ? LIMIT 1",
        [run.run_id, call_id],
    )
    if not rows:
        return
    child = store.get_run(rows[0][0], clip=CLIP, data=False)
    view.child = child
    view.facts += [
        ("its tokens", _tokens(child.usage)),
        ("its cost", _cost(child.usage, child)),
        ("its cycles", str(child.cycles)),
    ]


def _unfinished_call(store: RunStore, run: RunSummary, call_id: str) -> SpanView:
    """A call the model asked for that has no stored result (running, or cut off)."""
    view = load_run_view(store, run.run_id, count=1)
    for cycle in view.cycles:
        for call in cycle.calls:
            if call.call_id != call_id:
                continue
            state = "running" if run.running else "unfinished (its process ended first)"
            title = f"{call.name}: tool call of cycle {cycle.number}"
            span = SpanView(run.run_id, "tool", title, cycle.number, live=run.running, key=call_id)
            span.arguments = call.arguments
            span.facts += [("tool", call.name), ("outcome", state), ("call id", call_id)]
            _add_child(store, span, run, call_id)
            return span
    raise ValueError(f"run {run.run_id!r} has no call {call_id!r}")


def load_after_stop_span(store: RunStore, run_id: str) -> SpanView:
    """The request made after the run's stop for its best answer.

    Raises:
        UserError: If no run has this id.
        ValueError: If the run made no such request (or it was not recorded).
    """
    run = store.get_run(run_id, clip=1, data=False)
    asked = _stored_event(store, run_id, "answered_after_stop", None)
    if not asked:
        raise ValueError(f"run {run_id!r} made no request after a stop (or did not record it)")
    cycle = int(asked.get("cycle", run.cycles))
    view = SpanView(run_id, "after_stop", "The answer after the stop", cycle)
    view.facts.append(("model", run.model))
    view.prompt = str(asked.get("prompt", ""))
    content = str(asked.get("content", ""))
    view.output, view.output_cut = content[:CLIP], max(0, len(content) - CLIP)
    view.error = str(asked.get("error", ""))
    _request_facts(view, run, asked)
    view.request = load_request(store, run_id, cycle + 1, recent=True, after_stop=True)
    _keep_sent(view.request, int(asked.get("message_count", 0)))
    return view


def _keep_sent(request: RequestView, count: int) -> None:
    """Drop messages stored after the request was made (a resumed run's)."""
    shown = len(request.messages) + request.skipped
    if count and shown > count:
        del request.messages[max(0, len(request.messages) - (shown - count)) :]
