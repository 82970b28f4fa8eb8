"""What a convergence task is, and the scripted model that plays it.

A `Task` is one scripted conversation with its ground truth; a `Scenario` is a family of
tasks that share one model behaviour. `Script` writes the conversation, and
`scripted_model` plays it with the token usage a provider would report (about four
characters per token), priced at the task's price, so that budgets mean the same under
every policy. It
also plays the task's surroundings: the time each request takes on the world's clock,
and the messages the user's harness sends after each step.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from convergent.bench._world import TOOL_NAMES, BenchClock, Call, Plan
from convergent.messages import Message, ModelResponse, ToolSpec, Usage
from convergent.models.scripted import ScriptedModel, response_from_dict
from convergent.stop import StopReason

__all__ = [
    "FINAL_ANSWER",
    "Harness",
    "Kind",
    "Meta",
    "Scenario",
    "Script",
    "Task",
    "honest_final",
    "honest_mid",
    "honest_script",
    "make_task",
    "script_task",
    "scripted_model",
]

Kind = Literal["behaviour", "adversarial", "premature", "progress", "stuck", "budget"]
Meta = dict[str, Any]
FINAL_ANSWER = "Here is what I have so far; the task is not finished."
"""What the scripted model answers to a request without tools (the answer after a stop)."""
PROMPT_TOKENS = 200
"""Tokens of the system prompt and tool definitions, counted in every request's input."""
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Scenario:
    """A family of tasks that shares one model behaviour."""

    name: str
    """Short name used in reports."""
    kind: Kind
    """``behaviour``, ``adversarial``, ``premature`` (the model finishes; the run must
    stop when it does), ``progress`` (the model repeats calls while the world changes; the
    run must not stop before it finishes), ``stuck`` (the model repeats itself while
    nothing changes; the run must stop) or ``budget`` (the task needs more than the
    budget; the run must stop within it, with an answer)."""
    description: str
    """What the scripted model does."""

    @property
    def structural(self) -> bool:
        """Whether the response's tool calls reflect the work left (objective stopping works)."""
        return self.kind != "premature"

    @property
    def finishes(self) -> bool:
        """Whether the scripted model finishes the task (it answers, or a tool fails)."""
        return self.kind not in ("stuck", "budget")


@dataclass(frozen=True, slots=True)
class Task:
    """One benchmark task with its ground truth."""

    id: str
    """Stable id, e.g. ``sequential-03``."""
    scenario: str
    """Name of its `Scenario`."""
    prompt: str
    """The task as the user wrote it."""
    tools: tuple[str, ...]
    """Names of the world's tools the agent gets."""
    script: tuple[Meta, ...]
    """The scripted model's responses, in order (``content``, ``tool_calls``, self-reports)."""
    needed: tuple[str, ...]
    """Effects the task needs (ground truth of the calls that must be made)."""
    done_cycle: int
    """The cycle at which the task is done and the run should stop; for a model that
    is stuck, the first cycle at which a stop is justified (the request that would
    repeat the pattern a third time)."""
    expected_stop: StopReason
    """The stop reason the library's loop should end with."""
    answer: str
    """Token a correct final answer contains (checked by the verifier)."""
    on_tool_error: Literal["stop", "continue"] = "stop"
    """The tool-error policy the task declares."""
    failures: Mapping[str, int] = field(default_factory=dict)
    """Effects whose calls fail, with how many times (``-1``: always)."""
    receipt_ids: bool = False
    """Whether payment confirmations carry a new transaction id each time."""
    max_total_tokens: int | None = None
    """The run's token budget (None: no budget)."""
    max_cost: float | None = None
    """The run's cost budget (None: no budget)."""
    max_tool_calls: int | None = None
    """The run's cap on tool calls in all (None: no cap)."""
    max_calls_per_tool: int | None = None
    """The run's cap on the calls of each tool (None: no cap)."""
    final_answer: bool = True
    """The library's loop asks for an answer after a stop."""
    price: tuple[float, float] = (0.0, 0.0)
    """The model's price, in US dollars per million input and output tokens (0, 0: free)."""
    verified: bool = False
    """The task brings its own check (the world's): every library policy applies it."""
    output_schema: Mapping[str, Any] | None = None
    """The JSON schema an answer must validate against (None: any text)."""
    declared: Mapping[str, bool | None] = field(default_factory=dict)
    """``read_only`` declarations that replace the world's (None: unannotated)."""
    tool_seconds: Mapping[str, float] = field(default_factory=dict)
    """Seconds a call of each tool takes on the world's clock."""
    request_seconds: float = 0.0
    """Seconds each model request takes on the world's clock."""
    messages: tuple[str, ...] = ()
    """What the user's harness sends after each response with tool calls, by position in
    the script ("" or past the end: nothing)."""
    on_max_tool_calls: Literal["stop", "continue"] | None = None
    """What a call past ``max_tool_calls`` does (None: the library's default)."""
    on_max_calls_per_tool: Literal["stop", "continue"] | None = None
    """What a call past ``max_calls_per_tool`` does (None: the library's default)."""
    policy: Mapping[str, Any] = field(default_factory=dict)
    """Rules of the stop policy the task sets (the others are the library's defaults)."""
    hidden_growth: int = 0
    """Input tokens the provider counts more at each request than the text shows (tool
    definitions resent, hidden reasoning)."""


class Harness(Protocol):
    """Where the user's harness puts a message for the run (a steering queue)."""

    def send(self, message: str) -> None:
        """Queue ``message`` for the model's next request."""


def honest_mid(rng: random.Random) -> Meta:
    """Self-reports of a response that still calls tools: low confidence, ``tool_use``."""
    return {"action": "tool_use", "confidence": round(rng.uniform(0.2, 0.6), 2)}


def honest_final(rng: random.Random) -> Meta:
    """Self-reports of a final answer: ``finish`` with high confidence."""
    return {"action": "finish", "confidence": round(rng.uniform(0.75, 0.98), 2)}


class Script:
    """Builds a scripted conversation, numbering tool-call ids by cycle."""

    def __init__(self) -> None:
        self.items: list[Meta] = []

    def calls(self, batch: Sequence[Call], meta: Meta, content: str = "") -> None:
        """One response with the calls of ``batch``."""
        cycle = len(self.items) + 1
        self.items.append(
            {
                "content": content or "Calling " + ", ".join(call.name for call in batch) + ".",
                "tool_calls": [
                    {"id": f"c{cycle}_{i}", "name": call.name, "arguments": dict(call.arguments)}
                    for i, call in enumerate(batch)
                ],
                **meta,
            }
        )

    def bad_call(self, name: str, arguments: dict[str, Any], meta: Meta) -> None:
        """One response with a call whose arguments do not fit the tool."""
        cycle = len(self.items) + 1
        self.items.append(
            {
                "content": f"Calling {name}.",
                "tool_calls": [{"id": f"c{cycle}_0", "name": name, "arguments": arguments}],
                **meta,
            }
        )

    def answer(self, text: str, meta: Meta, finish_reason: str | None = None) -> None:
        """A response without tool calls; ``finish_reason`` as the provider says (default: stop)."""
        item: Meta = {"content": text, **meta}
        if finish_reason is not None:
            item["finish_reason"] = finish_reason
        self.items.append(item)


def make_task(
    scenario: str, index: int, plan: Plan, script: Sequence[Meta], done: int, **extra: Any
) -> Task:
    """A task of ``scenario`` from a plan and its script; ``extra`` overrides the defaults."""
    return Task(
        id=f"{scenario}-{index:02d}",
        scenario=scenario,
        prompt=plan.prompt,
        tools=extra.pop("tools", TOOL_NAMES),
        script=tuple(script),
        needed=extra.pop("needed", plan.needed),
        done_cycle=done,
        expected_stop=extra.pop("expected_stop", StopReason.COMPLETED),
        answer=plan.answer,
        **extra,
    )


def honest_script(plan: Plan, rng: random.Random, *, answer: bool = True) -> Script:
    """An honest model's script of ``plan``: each batch in a response, then its answer."""
    script = Script()
    for batch in plan.batches:
        script.calls(batch, honest_mid(rng))
    if answer:
        script.answer(plan.answer_text, honest_final(rng))
    return script


def script_task(scenario: str, index: int, plan: Plan, script: Script, **extra: Any) -> Task:
    """A task whose model finishes with the last response of ``script`` (its done cycle)."""
    return make_task(scenario, index, plan, script.items, len(script.items), **extra)


def _chars(message: Message) -> int:
    calls = getattr(message, "tool_calls", ())
    size = len(message.content) + 16  # the message's framing: role, ids
    for call in calls:
        size += len(call.name) + len(json.dumps(call.arguments))
    return size


def _usage(messages: Sequence[Message], response: ModelResponse) -> Usage:
    sent = sum(_chars(message) for message in messages)
    made = len(response.content) + sum(
        len(call.name) + len(json.dumps(call.arguments)) for call in response.tool_calls
    )
    return Usage(
        input_tokens=PROMPT_TOKENS + -(-sent // _CHARS_PER_TOKEN),
        output_tokens=-(-made // _CHARS_PER_TOKEN),
        requests=1,
    )


def scripted_model(
    task: Task, *, clock: BenchClock | None = None, harness: Harness | None = None
) -> ScriptedModel:
    """The task's script as a model; past its end the model repeats its last response.

    A request without tools in a task that has tools is the answer asked for after a
    stop: it gets `FINAL_ANSWER` and does not advance the script.

    Args:
        task: The task.
        clock: The world's clock; each request takes ``task.request_seconds`` on it.
        harness: Where the task's ``messages`` go, each once its response came back
            (the run reads it before the next request, after the response's calls).
    """
    responses = [response_from_dict(item) for item in task.script]
    position = requests = 0

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        nonlocal position, requests
        if task.tools and not tools:
            response = ModelResponse(content=FINAL_ANSWER)
        else:
            response = responses[min(position, len(responses) - 1)]
            message = task.messages[position] if position < len(task.messages) else ""
            if message and harness is not None and response.tool_calls:
                harness.send(message)
            position += 1
        if clock is not None:
            clock.advance(task.request_seconds)
        usage = _usage(messages, response)
        if task.hidden_growth:
            hidden = task.hidden_growth * requests
            usage = replace(usage, input_tokens=usage.input_tokens + hidden)
        requests += 1
        return replace(response, usage=usage)

    price = task.price if any(task.price) else None
    return ScriptedModel(respond, name=f"scripted:{task.id}", price=price)
