from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from convergent import Model, ModelResponse, ModelSettings, ToolSpec, Usage, tool
from convergent.messages import Message, ToolCall
from convergent.tools import Tool


class RecordingScorer(Model):
    """A scorer that replies with prepared verdicts and records each request."""

    def __init__(self, *replies: dict[str, Any] | str | float) -> None:
        self.replies = list(replies)
        self.requests: list[
            tuple[tuple[Message, ...], tuple[ToolSpec, ...], ModelSettings | None]
        ] = []

    @property
    def name(self) -> str:
        return "recording-scorer"

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        self.requests.append((tuple(messages), tuple(tools), settings))
        if not self.replies:
            raise AssertionError("the scorer was asked more often than scripted")
        reply = self.replies.pop(0)
        if isinstance(reply, float | int):
            reply = {"clarity": 1.0, "certainty": float(reply), "question": "", "reason": "r"}
        content = reply if isinstance(reply, str) else json.dumps(reply)
        return ModelResponse(
            content=content, usage=Usage(input_tokens=10, output_tokens=5, requests=1)
        )


def call(name: str, call_id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def proposal(thought: str, *calls: ToolCall) -> ModelResponse:
    return ModelResponse(content=thought, tool_calls=calls, finish_reason="tool_calls")


class Clicks:
    """A fake desktop with buttons; records every click that really happened."""

    def __init__(self, buttons: dict[str, int] | None = None) -> None:
        self.buttons = buttons or {"Submit": 1, "Cancel": 1}
        self.clicked: list[str] = []

    def tool(self) -> Tool:
        from convergent.gate import ambiguous

        @tool
        def click(label: str) -> str:
            """Click a button.

            Args:
                label: The button's label.
            """
            count = self.buttons.get(label, 0)
            if count > 1:
                return ambiguous(
                    [f"{label} #{n}" for n in range(1, count + 1)],
                    detail=f"{count} buttons are labelled {label}",
                )
            self.clicked.append(label)
            return f"clicked {label}"

        return click
