"""`ScriptedModel`: a deterministic model for tests, benchmarks and examples.

It plays back a list of responses, or calls a function for each request. It fails
loudly on a request past the end of its script and reports responses never consumed,
so a test cannot silently pass with a loop that stopped early or ran long.

A list script finds its place in the conversation it is sent: its first request is
answered with the response after the last of its own responses that the conversation
holds as a reply (from the start when it holds none), and each later request with the
next one. A fresh model given a stored conversation (a Temporal worker builds one for
every request) thus goes on where the conversation is. A script given for the rest of
a run (``resume --model``) finds none of its responses and starts at its first.

Some requests leave no reply in the conversation: the answer asked for after a stop,
a summary for compaction, a gate's scoring. So that a resumed run plays no response
twice, a script is `Replayable` (`convergent.models.base`): a durable run stores its
`position` beside the conversation (not in the run's state) and `convergent.resume`
`seek`s it there. Durability knows only that protocol, never this model.

A script may also fail a request: an exception in the list (a `ModelError`, as a
backend raises after its retries), or ``{"error": "..."}`` in a script file, is raised
when its turn comes, so a test can see the run stop ``model_error`` and resume after it.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

from convergent._json import UnusableJson, load_json
from convergent.exceptions import ModelError, ScriptExhaustedError, UserError
from convergent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    ToolCall,
    ToolSpec,
    Usage,
)
from convergent.models._prices import FREE, PriceLike, TokenPrice, priced, token_price
from convergent.models.base import Model, ModelSettings, Replayable

__all__ = [
    "Replayable",
    "ScriptFunction",
    "ScriptedModel",
    "ScriptedRequest",
    "response_from_dict",
]

ScriptFunction: TypeAlias = Callable[
    [Sequence[Message], Sequence[ToolSpec]], "ModelResponse | Awaitable[ModelResponse]"
]
"""A function that computes the reply for each request."""

ScriptItem: TypeAlias = "ModelResponse | Mapping[str, Any] | str | Exception"


class ScriptedRequest(NamedTuple):
    """One request a `ScriptedModel` received, as it was sent."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    settings: ModelSettings | None


_RESERVED = {"content", "tool_calls", "usage", "finish_reason"}


def _scripted_error(data: Mapping[str, Any]) -> ModelError:
    """The failure ``{"error": "message"}`` scripts: a `ModelError` with that message.

    Raises:
        UserError: If the message is not a non-empty string, or other keys come with it.
    """
    message = data["error"]
    if not isinstance(message, str) or not message.strip():
        raise UserError('a scripted error must be a non-empty string: {"error": "..."}')
    if len(data) > 1:
        others = ", ".join(sorted(key for key in data if key != "error"))
        raise UserError(f'a scripted error is {{"error": ...}} alone, not with {others}')
    return ModelError(message)


def response_from_dict(
    data: Mapping[str, Any], *, call_ids: Iterable[str] | None = None
) -> ModelResponse:
    """Build a response from ``{"content": str, "tool_calls": [{"name", "arguments"}]}``.

    Any other keys (``confidence``, ``action``, ...) become metadata: recorded, never obeyed.

    Raises:
        UserError: If the shape is wrong.
    """
    if not isinstance(data, Mapping):
        raise UserError(f"a scripted response must be an object, got {type(data).__name__}")
    content = data.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise UserError("a scripted response's 'content' must be a string")
    raw_calls = data.get("tool_calls")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        raise UserError("a scripted response's 'tool_calls' must be a list")
    ids = iter(call_ids) if call_ids is not None else None
    calls: list[ToolCall] = []
    for index, raw in enumerate(raw_calls):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise UserError(f"tool_calls[{index}] must be an object with a string 'name'")
        arguments = raw.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise UserError(f"tool_calls[{index}].arguments must be an object")
        call_id = raw.get("id") or (next(ids) if ids is not None else f"call_{index}")
        calls.append(ToolCall(id=str(call_id), name=raw["name"], arguments=dict(arguments)))
    usage_data = data.get("usage") or {}
    if not isinstance(usage_data, Mapping):
        raise UserError("a scripted response's 'usage' must be an object")
    usage = Usage(
        input_tokens=_token_count(usage_data, "input_tokens"),
        output_tokens=_token_count(usage_data, "output_tokens"),
        requests=1,
    )
    metadata = {k: v for k, v in data.items() if k not in _RESERVED}
    finish = data.get("finish_reason") or ("tool_calls" if calls else "stop")
    return ModelResponse(
        content=content,
        tool_calls=tuple(calls),
        usage=usage,
        finish_reason=str(finish),
        model_name="scripted",
        metadata=metadata,
    )


def _token_count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"a scripted response's usage.{key} must be a whole number >= 0")
    return value


class ScriptedModel(Model):
    """A model that replays scripted responses or delegates to a function.

    Example:
        >>> model = ScriptedModel([
        ...     {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}}]},
        ...     "The answer is 4.",
        ... ])

    Args:
        script: A list of responses (`ModelResponse`, a dict in the CLI's script format,
            or a plain string meaning a text reply with no tool calls) and failures (an
            exception, raised for its request: a `ModelError` stops the run
            ``model_error``; ``{"error": "..."}`` is one), or a function
            ``(messages, tools) -> ModelResponse`` (sync or async) called per request.
        name: Name shown in traces.
        record_requests: Keep a copy of every request in `requests` (turn off for long
            benchmarks: each copy costs time proportional to the conversation).
        price: Prices the token counts of responses that report no cost. Without it
            the model is `FREE`: its costs are the ones its responses report.
    """

    def __init__(
        self,
        script: Sequence[ScriptItem] | ScriptFunction,
        *,
        name: str = "scripted",
        record_requests: bool = True,
        price: PriceLike | None = None,
    ) -> None:
        self.record_requests = record_requests
        self._price = token_price(price)
        self._name = name
        self._function: ScriptFunction | None = None
        self._responses: list[ModelResponse | Exception] = []
        self._ids = (f"call_{n}" for n in itertools.count(1))
        if callable(script):
            self._function = script
        else:
            self._responses = [self._coerce(item) for item in script]
        self._next: int | None = None
        self.requests: list[ScriptedRequest] = []
        """Every request received (messages, tools, settings), for assertions in tests."""

    @classmethod
    def from_file(cls, path: str | Path, *, price: PriceLike | None = None) -> ScriptedModel:
        """Load a script: a JSON list of response objects (``price`` as in the constructor).

        Raises:
            UserError: If the file is missing or not a valid script.
        """
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"script file not found: {file}") from None
        except OSError as exc:
            raise UserError(f"cannot read script file {file}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise UserError(
                f"script file {file} is not UTF-8 text (byte {exc.start} cannot be decoded)"
            ) from None
        try:
            data = load_json(text)
        except UnusableJson as exc:
            raise UserError(f"script file {file} is {exc}") from None
        if not isinstance(data, list) or not data:
            raise UserError(f"script file {file} must hold a non-empty JSON list of responses")
        return cls(data, name=f"scripted:{file.name}", price=price)

    def _coerce(self, item: ScriptItem) -> ModelResponse | Exception:
        if isinstance(item, ModelResponse):
            return self._priced(item)
        if isinstance(item, str):
            return ModelResponse(content=item, finish_reason="stop", model_name="scripted")
        if isinstance(item, Exception):
            return item
        if isinstance(item, Mapping) and "error" in item:
            return _scripted_error(item)
        return self._priced(response_from_dict(item, call_ids=self._ids))

    def _priced(self, response: ModelResponse) -> ModelResponse:
        """``response`` with the cost of its tokens, when it reports none and a price is set."""
        usage = priced(response.usage, self._price)
        return response if usage is response.usage else dataclasses.replace(response, usage=usage)

    @property
    def name(self) -> str:
        """Name shown in traces."""
        return self._name

    @property
    def price(self) -> TokenPrice:
        """The given price, else `FREE` (the responses' own costs count)."""
        return self._price or FREE

    def position(self) -> int | None:
        """Responses consumed so far (for a function script: requests answered)."""
        return self._next or 0

    def seek(self, position: int) -> None:
        """Continue the script after ``position`` responses (a resumed run).

        Raises:
            UserError: If the script holds fewer responses than ``position``.
        """
        if self._function is None and not 0 <= position <= len(self._responses):
            raise UserError(
                f"{self._name} holds {len(self._responses)} response(s); cannot continue "
                f"after {position}"
            )
        self._next = position

    @property
    def unconsumed(self) -> list[ModelResponse | Exception]:
        """Scripted responses (and failures) that no request has consumed yet."""
        return self._responses[self._next or 0 :]

    def assert_consumed(self) -> None:
        """Raise `AssertionError` if any scripted response was never requested."""
        if self.unconsumed:
            raise AssertionError(
                f"{len(self.unconsumed)} scripted response(s) were never requested"
            )

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Return the next scripted response (or the function's reply).

        Raises:
            ScriptExhaustedError: On a request past the end of the script.
            Exception: The failure scripted for this request (a `ModelError`, say).
        """
        if self.record_requests:
            self.requests.append(ScriptedRequest(tuple(messages), tuple(tools), settings))
        if self._function is not None:
            self._next = (self._next or 0) + 1
            reply = self._function(messages, tools)
            if not isinstance(reply, ModelResponse) and inspect.isawaitable(reply):
                reply = await reply
            if not isinstance(reply, ModelResponse):
                raise UserError(
                    f"script function returned {type(reply).__name__}, expected ModelResponse"
                )
            return reply if self._price is None else self._priced(reply)
        index = self._next if self._next is not None else self._place(messages)
        if index >= len(self._responses):
            raise ScriptExhaustedError(
                f"{self._name} received request {index + 1} "
                f"but holds only {len(self._responses)} response(s)"
            )
        self._next = index + 1
        scripted = self._responses[index]
        if isinstance(scripted, Exception):
            raise scripted
        return scripted

    def _place(self, messages: Sequence[Message]) -> int:
        """Where the script goes on for ``messages``: after its last response among them.

        A reply the script may hold twice is taken at the earliest place not before its
        place in the conversation (compaction only ever removes earlier replies). A
        reply's calls are compared as the loop keeps them (with unique ids).
        """
        replies = [m for m in messages if isinstance(m, AssistantMessage)]
        for count in range(len(replies), 0, -1):
            reply = replies[count - 1]
            places = [
                index
                for index, response in enumerate(self._responses)
                if isinstance(response, ModelResponse)
                and response.content == reply.content
                and response.with_unique_call_ids().tool_calls == reply.tool_calls
            ]
            if places:
                later = [index for index in places if index >= count - 1]
                return (later[0] if later else places[-1]) + 1
        return 0
