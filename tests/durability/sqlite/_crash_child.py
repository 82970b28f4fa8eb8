"""A run that a test kills with SIGKILL at arbitrary moments and then resumes.

Usage: python _crash_child.py DB WORKDIR CYCLES

With ``CRASH_KILL=after:ID`` the process kills itself right after call ID's side
effect (done but not recorded); with ``CRASH_KILL=before:ID`` call ID waits until its
sibling is done (a ``step``: its result committed; a ``probe``, whose end waits for the
next transaction: its side effect made), then kills the process before doing anything.

Each cycle requests two calls in one batch: ``step`` (not idempotent) and ``probe``
(idempotent). Each appends its call id to a side-effect file once its work is done,
so the files count real executions. The model is a function of the conversation, so
a resumed process continues exactly where the stored conversation ends.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from convergent import Agent, Limits, ModelResponse, ScriptedModel, ToolCall, tool
from convergent.durability.sqlite import RunStore
from convergent.messages import AssistantMessage, Message, ToolSpec

RUN_ID = "crash"


def sibling_done(db: Path, workdir: Path, call: str) -> bool:
    """Whether the other call of ``call``'s batch is done (see the module's docstring)."""
    sibling = ("p" if call.startswith("s") else "s") + call[1:]
    if sibling.startswith("p"):
        done = workdir / "probe.log"
        return done.exists() and sibling in done.read_text().split()
    with sqlite3.connect(db) as conn:
        found = conn.execute(
            "SELECT 1 FROM finished_calls WHERE call_id = ?", (sibling,)
        ).fetchone()
    return found is not None


def main() -> None:
    db, workdir, cycles = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])

    kill = os.environ.get("CRASH_KILL", "")

    def effect(name: str, call: str) -> None:
        if kill == f"before:{call}":
            while not sibling_done(db, workdir, call):
                time.sleep(0.005)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.003)
        with (workdir / f"{name}.log").open("a") as log:
            log.write(call + "\n")
        if kill == f"after:{call}":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.002)

    @tool(timeout=None)
    def step(call: str) -> str:
        """Do a non-repeatable step.

        Args:
            call: Id of the call.
        """
        effect("step", call)
        return f"stepped {call}"

    @tool(timeout=None, idempotent=True)
    def probe(call: str) -> str:
        """Look something up.

        Args:
            call: Id of the call.
        """
        effect("probe", call)
        return f"probed {call}"

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        cycle = sum(isinstance(m, AssistantMessage) for m in messages) + 1
        if cycle > cycles:
            return ModelResponse(content="all steps done")
        ids = (f"s{cycle}", f"p{cycle}")
        return ModelResponse(
            tool_calls=(
                ToolCall(id=ids[0], name="step", arguments={"call": ids[0]}),
                ToolCall(id=ids[1], name="probe", arguments={"call": ids[1]}),
            )
        )

    store = RunStore(db)
    tools = [step, probe]
    agent = Agent(
        ScriptedModel(script),
        tools,
        limits=Limits(max_cycles=cycles + 5),
        store=store,
    )
    if store.exists(RUN_ID):
        state = store.load(RUN_ID)
        if state.stop_reason is not None:
            return
        asyncio.run(agent.run(state=state))
    else:
        asyncio.run(agent.run("do every step once", run_id=RUN_ID))


if __name__ == "__main__":
    main()
