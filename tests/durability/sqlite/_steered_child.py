"""A run that goes on until it is steered: python _steered_child.py DB WORKDIR.

Each cycle writes the cycle number to WORKDIR/cycle and, when the latest user message
is a redirect, writes it to WORKDIR/redirect.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from convergent import Agent, Limits, ModelResponse, ScriptedModel, ToolCall, calculator
from convergent.durability.sqlite import DatabaseSteering, RunStore
from convergent.messages import Message, ToolSpec, UserMessage


def main() -> None:
    db, workdir = Path(sys.argv[1]), Path(sys.argv[2])
    count = 0

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        nonlocal count
        count += 1
        last = messages[-1]
        if isinstance(last, UserMessage) and len(messages) > 1:
            (workdir / "redirect").write_text(last.content)
        (workdir / "cycle").write_text(str(count))
        time.sleep(0.01)
        call = ToolCall(id=f"c{count}", name="calculator", arguments={"expression": f"{count}+1"})
        return ModelResponse(tool_calls=(call,))

    store = RunStore(db)
    agent = Agent(
        ScriptedModel(script, record_requests=False),
        [calculator],
        limits=Limits(max_cycles=5_000),
        store=store,
    )
    result = asyncio.run(
        agent.run("count until told", run_id="steered", steering=DatabaseSteering(store, "steered"))
    )
    (workdir / "stopped").write_text(f"{result.stop_reason.value}\n{result.stop_detail}")


if __name__ == "__main__":
    main()
