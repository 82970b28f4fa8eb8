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

Every adapter drives a `convergent.loop.driver.CycleDriver`, the same sequence of
`convergent.stop.decide` calls that convergent's own loop runs on, and reports how the
run ended as a `StopReport` with its typed `StopReason`. Where a host cannot deliver
part of the default policy (a note to the model), its adapter adapts the policy and
says so once with a `PolicyAdapted` warning; what a host cannot express that was asked
for explicitly is refused with `NotExpressible` when the adapter is built.
"""

from __future__ import annotations

from convergent.exceptions import ConvergentError as _ConvergentError
from convergent.exceptions import UserError as _UserError
from convergent.loop.driver import CycleDriver, Review
from convergent.loop.ending import FinalRequest, StopReport

__all__ = [
    "CycleDriver",
    "FinalRequest",
    "NotExpressible",
    "PolicyAdapted",
    "Review",
    "StopReport",
]


class NotExpressible(_UserError):
    """The host framework cannot express what was asked of its adapter.

    Raised when the adapter is built, never mid-run: for example a verifier for a host
    that ends its run at its first answer, or a nudge for a routing function, which
    cannot add a message.
    """


class PolicyAdapted(_ConvergentError, UserWarning):
    """An adapter changed the stop policy to what its host can deliver (said once).

    For example a LangGraph routing function, which cannot add a message, turns the
    stall and tool-error nudges off: the run stops where the loop would nudge.
    """
