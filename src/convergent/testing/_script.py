"""Build a model's responses for a test: tool calls, batches of them, final answers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convergent.exceptions import ModelError
from convergent.messages import NO_USAGE, ModelResponse, ToolCall, Usage
from convergent.models._prices import PriceLike
from convergent.models.scripted import ScriptedModel


def call(name: str, /, call_id: str | None = None, **arguments: Any) -> ToolCall:
    """A call of tool ``name`` with ``arguments``.

    Args:
        name: The tool to call.
        call_id: The call's id. By default it is derived from the name and the
            arguments, so the same call has the same id in every run of a test.
        **arguments: The tool's arguments, as the model would send them.
    """
    if call_id is None:
        text = json.dumps([name, arguments], sort_keys=True, default=str)
        call_id = f"call_{name}_{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return ToolCall(id=call_id, name=name, arguments=arguments)


def step(
    *calls: ToolCall,
    content: str = "",
    usage: Usage = NO_USAGE,
    metadata: Mapping[str, Any] | None = None,
) -> ModelResponse:
    """A response that asks for ``calls`` (run as one batch), so the loop goes on.

    Two calls of one batch never share an id: a repeated id gets ``-2``, ``-3``...

    Args:
        *calls: The tool calls, from `call`.
        content: Text the model writes beside the calls.
        usage: The tokens, requests and cost the response reports (none by default,
            like a plain string in a `ScriptedModel`'s script).
        metadata: Other fields the model reports (a confidence, an action...): recorded
            with the response, never obeyed.
    """
    seen: dict[str, int] = {}
    batch: list[ToolCall] = []
    for made in calls:
        seen[made.id] = count = seen.get(made.id, 0) + 1
        batch.append(made if count == 1 else dataclasses.replace(made, id=f"{made.id}-{count}"))
    return ModelResponse(
        content=content,
        tool_calls=tuple(batch),
        usage=usage,
        finish_reason="tool_calls",
        model_name="scripted",
        metadata=dict(metadata or {}),
    )


def answer(
    text: str, *, usage: Usage = NO_USAGE, metadata: Mapping[str, Any] | None = None
) -> ModelResponse:
    """A final response: ``text`` and no tool calls, so the run completes.

    Args:
        text: The answer.
        usage: The tokens, requests and cost the response reports (none by default,
            like a plain string in a `ScriptedModel`'s script).
        metadata: Other fields the model reports, as in `step`.
    """
    return ModelResponse(
        content=text,
        usage=usage,
        finish_reason="stop",
        model_name="scripted",
        metadata=dict(metadata or {}),
    )


def scripted(
    *responses: ScriptItem,
    name: str = "scripted",
    price: PriceLike | None = None,
) -> ScriptedModel:
    """A `ScriptedModel` that replays ``responses`` in order, one per request.

    Args:
        *responses: Each a response (`step`, `answer`), a single `ToolCall` or a list of
            them (a `step` of those calls), a string (an `answer`), or a `ModelError`
            (the model fails that request: the run stops ``model_error``).
        name: The model's name in traces.
        price: Prices the responses' tokens, as in `ScriptedModel`.
    """
    return ScriptedModel(_responses(responses), name=name, price=price)


def write_script(path: str | Path, *responses: ScriptItem) -> str:
    """Write ``responses`` as a script file and return the model name that plays it.

    The file holds the JSON a ``scripted:PATH`` model reads (`ScriptedModel.from_file`),
    so an agent spec, the CLI's ``--model`` or a Temporal worker can replay what a test
    wrote with `call`, `step` and `answer`.

    Args:
        path: Where to write the script.
        *responses: As `scripted` takes them.

    Returns:
        ``scripted:PATH``, a model name for a spec or ``--model``.
    """
    data = [_as_dict(response) for response in _responses(responses)]
    Path(path).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return f"scripted:{path}"


ScriptItem = ModelResponse | ToolCall | Sequence[ToolCall] | str | ModelError
"""What a script is written with: a response, a call or a batch of calls, an answer, or a
failure of the model (raised for its request)."""


def _responses(items: Sequence[ScriptItem]) -> list[ModelResponse | ModelError]:
    script: list[ModelResponse | ModelError] = []
    for item in items:
        if isinstance(item, ModelResponse | ModelError):
            script.append(item)
        elif isinstance(item, ToolCall):
            script.append(step(item))
        elif isinstance(item, str):
            script.append(answer(item))
        else:
            script.append(step(*item))
    return script


def _as_dict(response: ModelResponse | ModelError) -> dict[str, Any]:
    """A response as one entry of a script file (`response_from_dict` reads it back).

    A failure is ``{"error": "message"}`` (read back as a `ModelError`).
    """
    if isinstance(response, ModelError):
        return {"error": str(response)}
    data: dict[str, Any] = {**response.metadata, "content": response.content}
    if response.tool_calls:
        data["tool_calls"] = [
            {"id": call.id, "name": call.name, "arguments": call.arguments}
            for call in response.tool_calls
        ]
    usage = response.usage
    if usage.input_tokens or usage.output_tokens:
        data["usage"] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    return data
