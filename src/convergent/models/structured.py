"""The structured-output tool-call protocol, for models without native tool calling.

The wrapped model is asked for JSON ``{"thought": str, "tool_calls": [{"name", "arguments"}]}``
under a JSON schema (optionally with the tool names as an enum). The reply becomes the
same `ModelResponse.tool_calls` native tool calling produces, so the convergence rule is
identical: no calls means done. Any extra field (``confidence``, ``action``...) is kept as
metadata and never steers the loop.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any, NamedTuple

from convergent._json import UnusableJson, load_json
from convergent.exceptions import ModelError
from convergent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from convergent.models._prices import TokenPrice
from convergent.models._thought_stream import ThoughtStream
from convergent.models.base import (
    Model,
    ModelSettings,
    Replayable,
    StreamPart,
    TextChunk,
    ToolCallChunk,
)

__all__ = [
    "ANSWER_FIELD",
    "PLAIN_ANSWER_CHARS",
    "Step",
    "StructuredToolCalling",
    "parse_step",
    "parse_structured_reply",
    "plain_answer_schema",
    "plain_answer_text",
    "tool_call_schema",
    "with_answer",
]

_NAME_IN_PARTIAL_JSON = re.compile(r'"name"\s*:\s*"([^"]{1,64})"')

_INSTRUCTIONS = """You can call tools. Reply ONLY with a JSON object:
{{"thought": "<your reasoning>", "tool_calls": [{{"name": "<tool>", "arguments": {{...}}}}]}}
To call tools, list them in "tool_calls" (several at once if they are independent).
When you have the final answer, put it in "thought" and reply with "tool_calls": [].

Available tools:
{tools}"""

_NO_TOOLS = """No tools can be called now. Reply ONLY with a JSON object:
{"thought": "<your answer>", "tool_calls": []}"""

_PLAIN_ANSWER = """No tools can be called now. Reply ONLY with a JSON object:
{"answer": "<your answer to the task, in plain words>"}"""

_TYPED_ANSWER = """The final answer must be JSON under this schema: {schema}
When you have it, reply with "tool_calls": [] and put the answer in "answer"."""

ANSWER_FIELD = "answer"
"""Field of a structured reply that holds a typed answer (when an output schema is set)."""

PLAIN_ANSWER_CHARS = 400
"""Longest answer a plain-answer request allows (a small model that starts repeating
itself stops there, well before the token limit)."""


def plain_answer_schema(max_chars: int = PLAIN_ANSWER_CHARS) -> dict[str, Any]:
    """JSON schema of a reply that is only an answer in words: ``{"answer": "..."}``."""
    text = {"type": "string", "minLength": 1, "maxLength": max_chars}
    return {
        "type": "object",
        "properties": {ANSWER_FIELD: text},
        "required": [ANSWER_FIELD],
        "additionalProperties": False,
    }


def plain_answer_text(reply: ModelResponse) -> ModelResponse:
    """A reply to a plain-answer request with its ``answer`` field as its text.

    A reply that is not that JSON (cut off, or from a backend that ignored the schema)
    is left as it is: what the loop makes of it is the loop's business.
    """
    try:
        data = load_json(reply.content)
    except UnusableJson:
        return reply
    if not isinstance(data, dict) or not isinstance(data.get(ANSWER_FIELD), str):
        return reply
    return dataclasses.replace(reply, content=data[ANSWER_FIELD], tool_calls=())


def tool_call_schema(
    tools: Sequence[ToolSpec], *, name_enum: bool = True, answer: dict[str, Any] | None = None
) -> dict[str, Any]:
    """JSON schema of a structured reply; ``name_enum`` restricts names to the tools given.

    Without tools, ``tool_calls`` must be empty: the reply can only be an answer. With an
    ``answer`` schema, a reply either calls tools or gives the typed answer in its
    ``answer`` field.
    """
    name: dict[str, Any] = {"type": "string"}
    if name_enum and tools:
        name["enum"] = [t.name for t in tools]
    calls: dict[str, Any] = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"name": name, "arguments": {"type": "object"}},
            "required": ["name", "arguments"],
        },
    }
    if not tools:
        calls = {"type": "array", "maxItems": 0}
    step = {
        "type": "object",
        "properties": {"thought": {"type": "string"}, "tool_calls": calls},
        "required": ["thought", "tool_calls"],
    }
    return step if answer is None else with_answer(step, answer)


def with_answer(step: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """``step`` (a schema of calls and a thought) widened to also allow a typed answer.

    A reply then either makes at least one call, or makes none and gives the answer under
    ``answer`` in its `ANSWER_FIELD`.
    """
    properties = step["properties"]
    answering = {
        "type": "object",
        "properties": {
            "tool_calls": {"type": "array", "maxItems": 0},
            ANSWER_FIELD: answer,
        },
        "required": ["tool_calls", ANSWER_FIELD],
    }
    if properties["tool_calls"].get("maxItems") == 0:
        return answering
    calls = {**properties["tool_calls"], "minItems": 1}
    return {"anyOf": [{**step, "properties": {**properties, "tool_calls": calls}}, answering]}


def _describe(tools: Sequence[ToolSpec]) -> str:
    return "\n".join(
        f"- {t.name}: {t.description} Arguments schema: {json.dumps(t.parameters)}" for t in tools
    )


class StructuredToolCalling(Model):
    """Wraps a model so it calls tools through JSON-schema constrained output.

    Args:
        inner: A model that honours `ModelSettings.json_schema`.
        name_enum: Constrain ``tool_calls[].name`` to the available tool names.
    """

    def __init__(self, inner: Model, *, name_enum: bool = True) -> None:
        self.inner = inner
        self.name_enum = name_enum
        self._replies = 0

    @property
    def name(self) -> str:
        """The inner model's name, marked as structured."""
        return f"{self.inner.name}+structured"

    @property
    def context_window(self) -> int | None:
        """The inner model's window."""
        return self.inner.context_window

    @property
    def price(self) -> TokenPrice | None:
        """The inner model's price."""
        return self.inner.price

    def position(self) -> int | None:
        """The inner model's place in its script, if it replays one (see `Replayable`)."""
        return self.inner.position() if isinstance(self.inner, Replayable) else None

    def seek(self, position: int) -> None:
        """Move the inner model's script, if it replays one."""
        if isinstance(self.inner, Replayable):
            self.inner.seek(position)

    def translate(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[Message]:
        """Rewrite the conversation for a model that has no tool roles."""
        out: list[Message] = []
        if tools:
            out.append(SystemMessage(content=_INSTRUCTIONS.format(tools=_describe(tools))))
        results: list[str] = []
        for message in messages:
            if isinstance(message, ToolResultMessage):
                status = "error" if message.is_error else "result"
                results.append(f"{message.name} {status}: {message.content}")
                continue
            if results:
                out.append(UserMessage(content="Tool results:\n" + "\n".join(results)))
                results = []
            if isinstance(message, AssistantMessage):
                payload = {
                    "thought": message.content,
                    "tool_calls": [
                        {"name": c.name, "arguments": c.arguments} for c in message.tool_calls
                    ],
                }
                out.append(AssistantMessage(content=json.dumps(payload)))
            else:
                out.append(message)
        if results:
            out.append(UserMessage(content="Tool results:\n" + "\n".join(results)))
        return out

    def prepare(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings | None
    ) -> Step:
        """The request the inner model gets: the rewritten conversation under the schema."""
        base = settings or ModelSettings()
        if base.plain_answer:
            return plain_answer_step(self.translate(messages, ()), base)
        answer = base.output_schema
        constrained = ModelSettings(
            temperature=base.temperature,
            max_tokens=base.max_tokens,
            json_schema=tool_call_schema(tools, name_enum=self.name_enum, answer=answer),
            json_schema_name="agent_step",
            extra=base.extra,
        )
        conversation = self.translate(messages, tools)
        if not tools:
            conversation.insert(0, SystemMessage(content=_NO_TOOLS))
        if answer is not None:
            typed = _TYPED_ANSWER.format(schema=json.dumps(answer))
            conversation.insert(1, SystemMessage(content=typed))
        return Step(conversation, constrained)

    def finish(self, reply: ModelResponse, step: Step) -> ModelResponse:
        """The inner model's reply to ``step`` as a response with tool calls.

        A typed answer (the reply's `ANSWER_FIELD`) becomes the response's text, as JSON,
        so the loop validates it like any other final answer.
        """
        if step.plain:
            return plain_answer_text(reply)
        if not step.structured:
            return reply
        self._replies += 1
        response = parse_step(
            reply, id_prefix=f"call_{self._replies}", max_tokens=step.settings.max_tokens
        )
        if response.tool_calls or ANSWER_FIELD not in response.metadata:
            return response
        metadata = dict(response.metadata)
        answer = metadata.pop(ANSWER_FIELD)
        return dataclasses.replace(
            response, content=json.dumps(answer, ensure_ascii=False), metadata=metadata
        )

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Ask the inner model for a structured reply and extract its tool calls."""
        step = self.prepare(messages, tools, settings)
        reply = await self.inner.request(step.conversation, (), step.settings)
        return self.finish(reply, step)

    async def request_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[StreamPart, None]:
        """Stream the reply's ``thought`` as its text while the inner model writes it.

        A first (empty) tool-call chunk says as soon as the reply's JSON shows a call;
        the calls themselves, and any text the thought did not show (a reply that is
        not the expected JSON), follow once the reply is whole.
        """
        step = self.prepare(messages, tools, settings)
        parts = self.inner.request_stream(step.conversation, (), step.settings)
        if not step.structured:
            async with aclosing(parts):
                async for part in parts:
                    yield part
            return
        thought = ThoughtStream()
        shown: list[str] = []
        reply: ModelResponse | None = None
        async with aclosing(parts):
            async for part in parts:
                if isinstance(part, ModelResponse):
                    reply = part
                elif isinstance(part, TextChunk):
                    calls = thought.calls
                    text = thought.feed(part.text)
                    if thought.calls and not calls:
                        yield ToolCallChunk(0)
                    if text:
                        shown.append(text)
                        yield TextChunk(text)
        if reply is None:
            raise ModelError(f"{self.name}: the stream ended without a reply")
        response = self.finish(reply, step)
        said = "".join(shown)
        if response.content.startswith(said) and len(response.content) > len(said):
            yield TextChunk(response.content[len(said) :])
        for index, call in enumerate(response.tool_calls):
            yield ToolCallChunk(index, call.id, call.name, json.dumps(call.arguments))
        yield response


class Step(NamedTuple):
    """What a structured request sends to the inner model."""

    conversation: list[Message]
    """The conversation, rewritten for a model without tool roles."""
    settings: ModelSettings
    """The request's settings, with the reply's JSON schema."""
    structured: bool = True
    """Whether the reply is structured JSON (False: plain chat, passed through)."""
    plain: bool = False
    """Whether the reply is a plain answer's JSON (see `plain_answer_step`)."""


def plain_answer_step(conversation: list[Message], settings: ModelSettings) -> Step:
    """A request for a plain answer: ``conversation`` under `plain_answer_schema`.

    The reply can be nothing but ``{"answer": "<text>"}``: no call, no thought, no copy
    of the protocol's JSON, and no longer than `PLAIN_ANSWER_CHARS`.
    """
    constrained = dataclasses.replace(
        settings,
        json_schema=plain_answer_schema(),
        json_schema_name="plain_answer",
        output_schema=None,
        plain_answer=False,
    )
    return Step([SystemMessage(content=_PLAIN_ANSWER), *conversation], constrained, plain=True)


def parse_step(reply: ModelResponse, *, id_prefix: str, max_tokens: int | None) -> ModelResponse:
    """Parse a structured reply, treating one cut off by the token limit as a failed call.

    A reply truncated by ``max_tokens`` is not an answer: it becomes an invalid call (named
    after the tool it started, when that much was written) that goes back to the model.
    """
    if reply.finish_reason == "length" and not _is_json(reply.content):
        match = _NAME_IN_PARTIAL_JSON.search(reply.content)
        limit = f"max_tokens={max_tokens}" if max_tokens is not None else "the token limit"
        call = ToolCall(
            id=f"{id_prefix}_0",
            name=match.group(1) if match else "unfinished_reply",
            parse_error=f"the reply was cut off at {limit}; send a shorter reply",
        )
        return dataclasses.replace(reply, content="", tool_calls=(call,))
    return parse_structured_reply(reply, id_prefix=id_prefix)


def _is_json(text: str) -> bool:
    try:
        load_json(text)
    except UnusableJson:
        return False
    return True


def parse_structured_reply(reply: ModelResponse, *, id_prefix: str = "call") -> ModelResponse:
    """Turn a structured JSON reply into tool calls; unusable JSON is a plain answer.

    A reply that is not the expected JSON is treated as text without tool calls; a
    single malformed call becomes a call with ``parse_error`` that is sent back.
    """
    try:
        data = load_json(reply.content)
    except UnusableJson:
        return reply
    if not isinstance(data, dict):
        return reply
    thought = data.get("thought", "")
    raw_calls = data.get("tool_calls") or []
    calls: list[ToolCall] = []
    if isinstance(raw_calls, list):
        for index, raw in enumerate(raw_calls):
            call_id = f"{id_prefix}_{index}"
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                calls.append(
                    ToolCall(
                        id=call_id, name=str(raw)[:40], parse_error="a call needs a string 'name'"
                    )
                )
                continue
            arguments = raw.get("arguments", {})
            if isinstance(arguments, dict):
                calls.append(ToolCall(id=call_id, name=raw["name"], arguments=arguments))
            else:
                calls.append(
                    ToolCall(
                        id=call_id, name=raw["name"], parse_error="'arguments' must be an object"
                    )
                )
    metadata = {k: v for k, v in data.items() if k not in ("thought", "tool_calls")}
    return ModelResponse(
        content=thought if isinstance(thought, str) else json.dumps(thought),
        tool_calls=tuple(calls),
        usage=reply.usage,
        finish_reason=reply.finish_reason,
        model_name=reply.model_name,
        metadata={**reply.metadata, **metadata},
    )
