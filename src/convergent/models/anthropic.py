"""Anthropic Messages API via the ``anthropic`` SDK (optional extra)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from convergent._json import unusable_reason
from convergent._redact import known_secrets, redact, secrets_of_url
from convergent._tls import shared_tls
from convergent.exceptions import ModelError, ModelHTTPError, UserError
from convergent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from convergent.models._anthropic_stream import MessageAssembly
from convergent.models._client import LoopClient
from convergent.models._deadline import Deadline
from convergent.models._prices import (
    PriceLike,
    TokenPrice,
    client_url,
    known_price,
    token_price,
)
from convergent.models.base import OUTPUT_NAME, Model, ModelSettings, StreamPart

__all__ = ["AnthropicModel"]


def _to_anthropic(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Split out the system prompt and merge tool results into user turns."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].append(block)
        else:
            out.append({"role": role, "content": [block]})

    for message in messages:
        match message:
            case SystemMessage(content=content):
                system.append(content)
            case UserMessage(content=content):
                add("user", {"type": "text", "text": content})
            case AssistantMessage(content=content, tool_calls=calls):
                if content:
                    add("assistant", {"type": "text", "text": content})
                for call in calls:
                    add(
                        "assistant",
                        {
                            "type": "tool_use",
                            "id": call.id,
                            "name": call.name,
                            "input": call.arguments,
                        },
                    )
                if not content and not calls:
                    add("assistant", {"type": "text", "text": "(no answer)"})
            case ToolResultMessage(tool_call_id=call_id, content=content, is_error=is_error):
                add(
                    "user",
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": content,
                        "is_error": is_error,
                    },
                )
    return "\n\n".join(system), out


_ANY: dict[str, Any] = {"type": "object"}


def _tools_used(converted: list[dict[str, Any]]) -> list[str]:
    """Names of the tools the conversation's ``tool_use`` blocks called, in first-use order."""
    names = {
        block["name"]: None
        for turn in converted
        if turn["role"] == "assistant"
        for block in turn["content"]
        if block["type"] == "tool_use"
    }
    return list(names)


class AnthropicModel(Model):
    """A Claude model through the Anthropic Messages API.

    Args:
        model: Model name, e.g. ``claude-sonnet-5-5``.
        api_key: Key (default: ``ANTHROPIC_API_KEY``).
        max_tokens: Default output budget per request (the API requires one).
        max_retries: Retries the SDK makes on connection errors and 429/5xx.
        timeout: Seconds a request may take as a whole, its streamed reply included
            (a request the settings give less time ends sooner, see `ModelSettings`).
        base_url: Alternative endpoint.
        client: A ready ``anthropic.AsyncAnthropic`` client (tests pass one).
        price: What its tokens cost (a `TokenPrice`, or ``(input, output)`` in US
            dollars per million tokens); default: the price table's for a Claude model
            on Anthropic's API, else unknown.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int = 4096,
        max_retries: int = 2,
        timeout: float = 600.0,
        base_url: str | None = None,
        client: Any = None,
        price: PriceLike | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self._secrets = known_secrets(api_key, *secrets_of_url(base_url))
        factory = None
        if client is None:
            try:
                import anthropic
            except ImportError:
                raise UserError(
                    "the anthropic package is not installed: pip install 'anthropic>=2.12.0,<3'"
                ) from None
            key = api_key or os.environ.get("ANTHROPIC_API_KEY")
            if not key:
                raise UserError("ANTHROPIC_API_KEY is not set")
            self._secrets = known_secrets(key, *secrets_of_url(base_url))

            def factory() -> Any:
                return anthropic.AsyncAnthropic(
                    api_key=key,
                    base_url=base_url,
                    max_retries=max_retries,
                    timeout=timeout,
                    http_client=anthropic.DefaultAsyncHttpxClient(verify=shared_tls()),
                )

        self._client = LoopClient(client, factory)
        # looked up now, not in a request: loading the price table blocks for a moment
        price_url = base_url or (
            client_url(client) if client is not None else os.environ.get("ANTHROPIC_BASE_URL")
        )
        self._price = token_price(price) or known_price(model, "anthropic", price_url)

    @property
    def name(self) -> str:
        """``anthropic:<model>``."""
        return f"anthropic:{self.model}"

    @property
    def price(self) -> TokenPrice | None:
        """The given price, else the price table's (None: unknown)."""
        return self._price

    def build_request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings | None
    ) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for this request."""
        system, converted = _to_anthropic(messages)
        settings = settings or ModelSettings()
        if settings.json_schema is not None:
            schema = json.dumps(settings.json_schema)
            system = f"{system}\n\nReply ONLY with JSON valid under this schema: {schema}".strip()
        request: dict[str, Any] = {
            "model": self.model,
            "messages": converted,
            "max_tokens": settings.max_tokens or self.max_tokens,
        }
        if system:
            request["system"] = system
        if settings.output_schema is not None:
            # the answer is a forced call of its own tool: whichever tool the model
            # calls, it calls one, and the answer's tool takes the answer's schema
            request["tools"] = [
                *(
                    {"name": t.name, "description": t.description, "input_schema": t.parameters}
                    for t in tools
                ),
                _output_tool(settings.output_schema),
            ]
            request["tool_choice"] = (
                {"type": "any"} if tools else {"type": "tool", "name": OUTPUT_NAME}
            )
        elif tools:
            request["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        else:
            used = _tools_used(converted)
            if used:
                # the API refuses tool blocks without tools: name them, and forbid calls
                request["tools"] = [
                    {"name": name, "description": "Not available now.", "input_schema": _ANY}
                    for name in used
                ]
                request["tool_choice"] = {"type": "none"}
        if settings.temperature is not None:
            request["temperature"] = settings.temperature
        request.update(settings.extra)
        return request

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Send one Messages request and translate the reply."""
        deadline = Deadline(self.name, self.timeout, settings)
        with self._errors():
            reply = await deadline.wait(
                self._client.get().messages.create(**self.build_request(messages, tools, settings))
            )
        if not hasattr(reply, "content"):
            raise ModelError(f"{self.name}: the reply is not a message")
        return _answer_of(self.parse_message(reply), settings)

    async def request_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[StreamPart, None]:
        """Stream one Messages request: its text and tool-input chunks, then the reply.

        The usage comes from the stream itself (``message_start``, then the totals of
        ``message_delta``). The SDK retries before the stream starts, never after. The
        whole stream must end within the request's time (see `Deadline`).
        """
        request = {**self.build_request(messages, tools, settings), "stream": True}
        assembly = MessageAssembly()
        deadline = Deadline(self.name, self.timeout, settings)
        with self._errors():
            stream = await deadline.wait(self._client.get().messages.create(**request))
            async with stream:
                async for event in deadline.each(aiter(stream)):
                    for part in assembly.add(event, self.name):
                        yield part
        reply, errors = assembly.message(self.name)
        response = self.parse_message(reply)
        if errors:
            calls = tuple(
                dataclasses.replace(call, arguments={}, parse_error=errors[call.id])
                if call.id in errors
                else call
                for call in response.tool_calls
            )
            response = dataclasses.replace(response, tool_calls=calls)
        yield _answer_of(response, settings)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn the SDK's failures into `ModelError`s, with secrets masked."""
        import anthropic

        try:
            yield
        except anthropic.APIStatusError as exc:
            message = redact(str(exc.message), self._secrets)[:300]
            if exc.status_code < 400:  # an error event inside a stream that began well
                raise ModelError(f"{self.name}: {message}") from None
            raise ModelHTTPError(exc.status_code, message) from None
        except anthropic.APIError as exc:
            raise ModelError(f"{self.name}: {redact(str(exc), self._secrets)[:300]}") from None
        except (ValueError, RecursionError) as exc:  # the SDK decodes the body as it reads it
            raise ModelError(f"{self.name}: the reply is {unusable_reason(exc)}") from None

    def parse_message(self, reply: Any) -> ModelResponse:
        """Translate an SDK ``Message`` into a `ModelResponse`."""
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in reply.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                arguments = block.input if isinstance(block.input, dict) else {}
                calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(arguments)))
        return ModelResponse(
            content="".join(texts),
            tool_calls=tuple(calls),
            usage=_priced_usage(reply.usage, self._price),
            finish_reason=reply.stop_reason,
            model_name=reply.model,
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


def _priced_usage(reported: Any, price: TokenPrice | None) -> Usage:
    """A message's ``usage`` as a `Usage`, its cost from ``price`` (cache tokens included).

    Anthropic counts the prompt in three parts: ``input_tokens`` (not cached),
    ``cache_read_input_tokens`` and ``cache_creation_input_tokens``; the input tokens
    of a `Usage` are all three.
    """
    read = getattr(reported, "cache_read_input_tokens", None) or 0
    written = getattr(reported, "cache_creation_input_tokens", None) or 0
    prompt = (reported.input_tokens or 0) + read + written
    output = reported.output_tokens or 0
    cost = price.cost(prompt, output, read, written) if price is not None else 0.0
    return Usage(input_tokens=prompt, output_tokens=output, requests=1, cost=cost)


_WRAPPED = "value"
"""Property that holds an answer whose schema is not an object (a tool's input is one)."""


def _output_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """The tool through which the model gives its typed answer."""
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {_WRAPPED: schema}, "required": [_WRAPPED]}
    return {
        "name": OUTPUT_NAME,
        "description": "Give your final answer, once you have it (call no other tool then).",
        "input_schema": schema,
    }


def _answer_of(response: ModelResponse, settings: ModelSettings | None) -> ModelResponse:
    """A reply whose call of the answer's tool is the answer: its input as JSON text.

    The answer's tool is not a tool the loop runs: a reply that calls it (alone) is a
    reply without tool calls, whose text is the answer.
    """
    if settings is None or settings.output_schema is None:
        return response
    answers = [call for call in response.tool_calls if call.name == OUTPUT_NAME]
    if not answers:
        return response
    others = tuple(call for call in response.tool_calls if call.name != OUTPUT_NAME)
    if others:
        # tools first: the answer comes when their results are in
        return dataclasses.replace(response, tool_calls=others)
    data: Any = answers[0].arguments
    if settings.output_schema.get("type") != "object":
        data = data.get(_WRAPPED)
    return dataclasses.replace(
        response, content=json.dumps(data, ensure_ascii=False), tool_calls=()
    )
