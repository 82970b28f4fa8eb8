"""Batched tool calls run concurrently; a repeated identical call stalls the run."""

import asyncio

from convergent import Agent, ScriptedModel, StopReason, ToolFinished, ToolStarted, tool


@tool
async def fetch(url: str) -> str:
    """Pretend to fetch a page.

    Args:
        url: Address to fetch.
    """
    await asyncio.sleep(0.01)
    return f"<html>{url}</html>"


async def main() -> None:
    pages = ["a.example", "b.example", "c.example"]
    batch = {"tool_calls": [{"name": "fetch", "arguments": {"url": u}} for u in pages]}
    result = await Agent(ScriptedModel([batch, "fetched three pages"]), [fetch]).run("fetch")
    order = [type(e).__name__ for e in result.events if isinstance(e, ToolStarted | ToolFinished)]
    print("completed:", result.stop_reason is StopReason.COMPLETED, "events:", order)

    again = {"tool_calls": [{"name": "fetch", "arguments": {"url": "a.example"}}]}
    looping = await Agent(ScriptedModel([again] * 5), [fetch]).run("fetch forever")
    print("stalled:", looping.stop_reason is StopReason.STALLED, "-", looping.stop_detail)


if __name__ == "__main__":
    asyncio.run(main())
