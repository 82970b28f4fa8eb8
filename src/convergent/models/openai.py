"""OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp server, Ollama) via the SDK."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from convergent._json import UnusableJson, load_json, unusable_reason
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
from convergent.models._client import LoopClient
from convergent.models._deadline import Deadline
from convergent.models._openai_stream import CompletionAssembly
from convergent.models._prices import (
    PriceLike,
    TokenPrice,
    client_url,
    known_price,
    token_price,
)
from convergent.models.base import OUTPUT_NAME, Model, ModelSettings, StreamPart

__all__ = ["OpenAIChatModel", "parse_arguments"]


def parse_arguments(text: str | None) -> tuple[dict[str, Any], str | None]:
    """Parse a tool call's argument string; return (arguments, error) without raising."""
    if text is None or not text.strip():
        return {}, None
    try:
        value = load_json(text)
    except UnusableJson as exc:
        return {}, f"the arguments are {exc}"
    if not isinstance(value, dict):
        return {}, f"expected a JSON object, got {type(value).__name__}"
    return value, None


def _message_to_openai(message: Message) -> dict[str, Any]:
    match message:
        case SystemMessage(content=content):
            return {"role": "system", "content": content}
        case UserMessage(content=content):
            return {"role": "user", "content": content}
        case AssistantMessage(content=content, tool_calls=calls):
            data: dict[str, Any] = {"role": "assistant", "content": content or None}
            if calls:
                data["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            # an unparsable call is sent back as {} so the server accepts
                            # the turn; its error result tells the model what went wrong
                            "arguments": json.dumps(
                                call.arguments if call.parse_error is None else {}
                            ),
                        },
                    }
                    for call in calls
                ]
            return data
        case ToolResultMessage(tool_call_id=call_id, content=content):
            return {"role": "tool", "tool_call_id": call_id, "content": content}
    raise TypeError(f"unknown message type {type(message).__name__}")


def _tool_to_openai(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


class OpenAIChatModel(Model):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: Model name as the server knows it.
        base_url: Server URL (default: ``OPENAI_BASE_URL`` or OpenAI's own).
        api_key: Key (default: ``OPENAI_API_KEY``; a placeholder for local servers).
        max_retries: Retries the SDK makes on connection errors and 429/5xx.
        timeout: Seconds a request may take as a whole, its streamed reply included
            (a request the settings give less time ends sooner, see `ModelSettings`).
        price: What its tokens cost (a `TokenPrice`, or ``(input, output)`` in US
            dollars per million tokens); default: the price table's for an OpenAI model
            on OpenAI's API (or a provider's known API), else unknown.
        context_window: Context size in tokens, if known.
        client: A ready ``openai.AsyncOpenAI`` client (tests pass one with a mock transport).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 2,
        timeout: float = 120.0,
        price: PriceLike | None = None,
        context_window: int | None = None,
        client: Any = None,
    ) -> None:
        self.model = model
        self.timeout = timeout
        price_url = base_url or client_url(client)
        self._context_window = context_window
        self._secrets = known_secrets(api_key, *secrets_of_url(base_url))
        factory = None
        if client is None:
            try:
                import openai
            except ImportError:
                raise UserError(
                    "the openai package is not installed: pip install 'openai>=3.54.0,<4'"
                ) from None
            base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            api_key = api_key or os.environ.get("OPENAI_API_KEY")
            if not api_key:
                if base_url is None:
                    raise UserError(
                        "OPENAI_API_KEY is not set (or pass --base-url for a local server)"
                    )
                api_key = "not-needed"
            key, url = api_key, base_url
            price_url = url
            self._secrets = known_secrets(key, *secrets_of_url(url))

            def factory() -> Any:
                return openai.AsyncOpenAI(
                    api_key=key,
                    base_url=url,
                    max_retries=max_retries,
                    timeout=timeout,
                    http_client=openai.DefaultAsyncHttpxClient(verify=shared_tls()),
                )

        self._client = LoopClient(client, factory)
        # looked up now, not in a request: loading the price table blocks for a moment
        self._price = token_price(price) or known_price(model, "openai", price_url)

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)

    @property
    def name(self) -> str:
        """``openai:<model>``."""
        return f"openai:{self.model}"

    @property
    def context_window(self) -> int | None:
        """Context size in tokens, if configured."""
        return self._context_window

    @property
    def price(self) -> TokenPrice | None:
        """The given price, else the price table's (None: unknown)."""
        return self._price

    def build_request(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings | None
    ) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for this request."""
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [_message_to_openai(m) for m in messages],
        }
        if tools:
            request["tools"] = [_tool_to_openai(t) for t in tools]
        if settings is not None:
            if settings.temperature is not None:
                request["temperature"] = settings.temperature
            if settings.max_tokens is not None:
                request["max_tokens"] = settings.max_tokens
            schema, name = settings.json_schema, settings.json_schema_name
            if schema is None and settings.output_schema is not None:
                # the answer's shape; tool calls stay possible beside a response_format
                schema, name = settings.output_schema, OUTPUT_NAME
            if schema is not None:
                request["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": schema},
                }
            request.update(settings.extra)
        return request

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Send one chat completion request and translate the reply."""
        deadline = Deadline(self.name, self.timeout, settings)
        with self._errors():
            completion = await deadline.wait(
                self._client.get().chat.completions.create(
                    **self.build_request(messages, tools, settings)
                )
            )
        if not hasattr(completion, "choices"):
            raise ModelError(f"{self.name}: the reply is not a chat completion")
        return self.parse_completion(completion)

    async def request_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[StreamPart, None]:
        """Stream one chat completion: its text and tool-call chunks, then the reply.

        The server is asked for its usage in the stream's last chunk
        (``stream_options.include_usage``), so the reply carries the same usage as an
        unstreamed one. The SDK retries before the stream starts, never after. The
        whole stream must end within the request's time (see `Deadline`).
        """
        request = {**self.build_request(messages, tools, settings), "stream": True}
        request.setdefault("stream_options", {"include_usage": True})
        assembly = CompletionAssembly()
        deadline = Deadline(self.name, self.timeout, settings)
        with self._errors():
            stream = await deadline.wait(self._client.get().chat.completions.create(**request))
            async with stream:
                async for chunk in deadline.each(aiter(stream)):
                    for part in assembly.add(chunk, self.name):
                        yield part
        yield self.parse_completion(assembly.completion(self.name))

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn the SDK's failures into `ModelError`s, with secrets masked."""
        import openai

        try:
            yield
        except openai.APIStatusError as exc:
            raise ModelHTTPError(exc.status_code, _short(self._redact(exc.message))) from None
        except openai.APIError as exc:
            raise ModelError(f"{self.name}: {_short(self._redact(str(exc)))}") from None
        except (ValueError, RecursionError) as exc:  # the SDK decodes the body as it reads it
            raise ModelError(f"{self.name}: the reply is {unusable_reason(exc)}") from None

    def parse_completion(self, completion: Any) -> ModelResponse:
        """Translate an SDK ``ChatCompletion`` into a `ModelResponse`."""
        if not completion.choices:
            raise ModelError(f"{self.name}: the reply has no choices")
        choice = completion.choices[0]
        message = choice.message
        calls: list[ToolCall] = []
        for index, raw in enumerate(message.tool_calls or ()):
            function = getattr(raw, "function", None)
            if function is None:
                continue
            arguments, error = parse_arguments(function.arguments)
            if error is None and choice.finish_reason == "length":
                # a server may repair cut-off JSON into something that parses; running
                # a call whose arguments were truncated would act on half an intent
                arguments, error = {}, "the reply was cut off by max_tokens"
            calls.append(
                ToolCall(
                    id=raw.id or f"call_{index}",
                    name=function.name or "",
                    arguments=arguments,
                    parse_error=error,
                )
            )
        usage = _priced_usage(completion.usage, self.price)
        return ModelResponse(
            content=message.content or "",
            tool_calls=tuple(calls),
            usage=usage,
            finish_reason=choice.finish_reason,
            model_name=completion.model,
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


def _priced_usage(reported: Any, price: TokenPrice | None) -> Usage:
    """A completion's ``usage`` as a `Usage`, its cost from ``price`` (cached tokens included).

    ``prompt_tokens`` counts every prompt token; ``prompt_tokens_details.cached_tokens``
    is the part read from OpenAI's prompt cache.
    """
    if reported is None:
        return Usage(requests=1)
    prompt = reported.prompt_tokens or 0
    output = reported.completion_tokens or 0
    if price is None:
        return Usage(input_tokens=prompt, output_tokens=output, requests=1)
    details = getattr(reported, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    cost = price.cost(prompt, output, cache_read_tokens=cached)
    return Usage(input_tokens=prompt, output_tokens=output, requests=1, cost=cost)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
