"""Each adapter built from keywords, as a user builds it (for tests of what every adapter takes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from convergent.policy import StopPolicy


def _langchain(**kwargs: Any) -> object:
    from convergent.adapters.langchain import ConvergenceMiddleware

    return ConvergenceMiddleware(**kwargs)


def _langgraph(**kwargs: Any) -> object:
    from convergent.adapters.langgraph import ToolsCondition

    return ToolsCondition(**kwargs)


def _openai_agents(**kwargs: Any) -> object:
    from convergent.adapters.openai_agents import Convergence

    return Convergence(**kwargs)


def _pydantic_ai(**kwargs: Any) -> object:
    from convergent.adapters.pydantic_ai import Convergence

    return Convergence(**kwargs)


def _claude_agent_sdk(**kwargs: Any) -> object:
    from convergent.adapters.claude_agent_sdk import Convergence

    return Convergence(**kwargs)


PRICED: dict[str, tuple[Callable[..., object], str]] = {
    "langchain": (_langchain, "ConvergenceMiddleware"),
    "langgraph": (_langgraph, "ToolsCondition"),
    "openai_agents": (_openai_agents, "Convergence"),
    "pydantic_ai": (_pydantic_ai, "Convergence"),
}
"""The adapters whose host reports tokens but no cost, with their class's name."""

EVERY: dict[str, Callable[..., object]] = {
    **{name: build for name, (build, _) in PRICED.items()},
    "claude_agent_sdk": _claude_agent_sdk,
}
"""Every adapter."""


def policy_of(adapter: object) -> StopPolicy:
    """The policy an adapter's runs follow."""
    driver = getattr(adapter, "driver", None)
    policy = driver.policy if driver is not None else adapter._options["policy"]  # type: ignore[attr-defined]
    assert isinstance(policy, StopPolicy)
    return policy
