"""Run in an environment with ``langchain-mcp-adapters`` and the MCP SDK 1.x it needs.

``python langchain_mcp_driver.py serve`` is a shop MCP server whose tools carry MCP
annotations (``pay`` changes something each time, ``balance`` only reads);
``python langchain_mcp_driver.py run`` loads its tools with ``langchain-mcp-adapters``,
runs a LangChain agent with `ConvergenceMiddleware` whose model asks to pay the same
amount three times, and prints as JSON the effects convergent reads from the tools and
the results of the calls.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

_PAID: list[int] = []


def serve() -> None:
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    server = FastMCP("shop")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
    def pay(amount: int) -> str:
        """Pay an amount."""
        _PAID.append(amount)
        return f"paid {amount}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def balance() -> str:
        """The balance."""
        return "100"

    server.run()


def model(replies: list[Any]) -> Any:
    """LangChain's list fake, able to take tools."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel

    class ToolCallingFake(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    return ToolCallingFake(responses=replies)


async def run() -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient

    from convergent.adapters.langchain import ConvergenceMiddleware
    from convergent.adapters.langgraph import tool_effects

    server = {"command": sys.executable, "args": [__file__, "serve"], "transport": "stdio"}
    tools = await MultiServerMCPClient({"shop": server}).get_tools()
    pay = {"name": "pay", "args": {"amount": 5}}
    replies = [AIMessage("", tool_calls=[{**pay, "id": f"c{n}"}]) for n in range(3)]
    agent = create_agent(
        model([*replies, AIMessage("paid once")]), tools, middleware=[ConvergenceMiddleware()]
    )
    result = await agent.ainvoke({"messages": [HumanMessage("pay 5")]})
    results = [m.text for m in result["messages"] if isinstance(m, ToolMessage)]
    return {
        "effects": {name: str(effect) for name, effect in tool_effects(tools).items()},
        "results": results,
        "reason": str(result["stop_report"].reason),
    }


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        print(json.dumps(asyncio.run(run())))
