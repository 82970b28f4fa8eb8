"""Every adapter takes ``policy=``, keeps the earlier spellings working (with a warning), and
refuses a bad rule in one line when it is built."""

from __future__ import annotations

import inspect
from contextlib import AbstractContextManager, nullcontext

import pytest

from convergent import Limits, StopPolicy
from convergent.adapters import PolicyAdapted
from convergent.exceptions import UserError

from .builders import EVERY, policy_of

ADAPTERS = sorted(EVERY)


def _notes_adapted(adapter: str) -> AbstractContextManager[object]:
    """A LangGraph route turns a policy's notes off, and says so."""
    return pytest.warns(PolicyAdapted) if adapter == "langgraph" else nullcontext()


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_policy_is_taken_as_given(adapter: str) -> None:
    policy = StopPolicy(max_repeated_calls=5, on_tool_error="stop", notes=0)
    assert policy_of(EVERY[adapter](policy=policy)) == policy


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_earlier_spellings_still_work_and_warn(adapter: str) -> None:
    with _notes_adapted(adapter), pytest.warns(DeprecationWarning, match="moved to StopPolicy"):
        built = EVERY[adapter](on_tool_error="stop", max_consecutive_tool_errors=2)
    policy = policy_of(built)
    assert (policy.on_tool_error, policy.max_repeated_failures) == ("stop", 2)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_the_earlier_limits_spelling_still_works(adapter: str) -> None:
    with pytest.warns(DeprecationWarning):
        limits = Limits(max_cycles=9, max_repeated_calls=4)
    with _notes_adapted(adapter):
        assert policy_of(EVERY[adapter](limits=limits)).max_repeated_calls == 4


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_bad_rule_is_refused_when_the_adapter_is_built(adapter: str) -> None:
    with pytest.raises(UserError) as refused, pytest.warns(DeprecationWarning):
        EVERY[adapter](on_tool_error="bogus")
    assert "on_tool_error" in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "module", ["langchain", "langgraph", "openai_agents", "pydantic_ai", "claude_agent_sdk"]
)
def test_an_adapter_stops_a_run_only_through_the_driver(module: str) -> None:
    """A stop a host makes itself goes through ``CycleDriver.host_stop`` (and ``decide``):
    no adapter sets a driver's ``stop`` or calls ``decide`` by itself."""
    import ast
    import importlib

    source = inspect.getsource(importlib.import_module(f"convergent.adapters.{module}"))
    tree = ast.parse(source)
    assigned = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and target.attr == "stop"
    ]
    called = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "decide"
    ]
    assert (assigned, called) == ([], [])
