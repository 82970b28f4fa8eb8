"""Convergent's stop decisions inside other agent frameworks.

Each framework has its own module, imported only when used, behind its own extra:

- `convergent.adapters.langchain`: middleware for LangChain's ``create_agent``
  (``pip install convergent[langchain]``);
- `convergent.adapters.langgraph`: a drop-in ``tools_condition`` for hand-built
  LangGraph graphs (same extra);
- `convergent.adapters.openai_agents`: the OpenAI Agents SDK (``[openai-agents]``);
- `convergent.adapters.pydantic_ai`: a PydanticAI capability (``[pydantic-ai]``);
- `convergent.adapters.claude_agent_sdk`: hooks for the Claude Agent SDK
  (``[claude-agent-sdk]``).

Every adapter drives a `CycleDriver`, which asks `convergent.stop.decide` at the same
points of a cycle as convergent's own loop, and reports how the run ended as a
`StopReport` with its typed `StopReason`.
"""

from __future__ import annotations

from convergent.adapters._driver import (
    ANSWER_AFTER_STOP,
    FINAL_ANSWER_PROMPT,
    CycleDriver,
    NotExpressible,
    Review,
    StopReport,
)

__all__ = [
    "ANSWER_AFTER_STOP",
    "FINAL_ANSWER_PROMPT",
    "CycleDriver",
    "NotExpressible",
    "Review",
    "StopReport",
]
