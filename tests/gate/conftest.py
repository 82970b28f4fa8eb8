from __future__ import annotations

import json
from typing import Any

from convergent import ModelResponse, ScriptedModel, Usage, tool
from convergent.tools import Tool


def scorer_model(*replies: dict[str, Any] | str | float) -> ScriptedModel:
    """A scorer that replies with prepared verdicts (a number is the certainty) and records
    each request; a request past the last verdict fails the test."""

    def content(reply: dict[str, Any] | str | float) -> str:
        if isinstance(reply, float | int):
            reply = {"clarity": 1.0, "certainty": float(reply), "question": "", "reason": "r"}
        return reply if isinstance(reply, str) else json.dumps(reply)

    usage = Usage(input_tokens=10, output_tokens=5, requests=1)
    return ScriptedModel(
        [ModelResponse(content=content(reply), usage=usage) for reply in replies],
        name="recording-scorer",
    )


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
