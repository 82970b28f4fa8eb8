"""The budgets and rules of a task's run, as `Agent` keywords of the library measured.

The suite also measures earlier trees of the library (``benchmarks/run_convergence.py
--source LABEL=SRC`` runs this benchmark against the library in ``SRC``), so that each
scenario is shown under the rules before a change as well as now. Two things moved
since then, and this module is the only place that knows it:

- the tool-error policy is a `convergent.StopPolicy` rule; before ``convergent.policy``
  existed it was a keyword of `Agent`;
- a budget the tree's `Limits` does not have (the tool-call caps came later, what a call
  past one does later still) is left out, and the run goes without it: `unsupported`
  names it for the report; so is a rule of the task's policy the tree does not have.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from typing import Any

from convergent.bench._tasks import Task
from convergent.limits import Limits

__all__ = ["agent_rules", "unsupported"]

_BUDGETS = (
    "max_total_tokens",
    "max_cost",
    "max_tool_calls",
    "max_calls_per_tool",
    "on_max_tool_calls",
    "on_max_calls_per_tool",
)


def _has_policy() -> bool:
    return importlib.util.find_spec("convergent.policy") is not None


def _budgets(task: Task) -> dict[str, Any]:
    return {name: getattr(task, name) for name in _BUDGETS if getattr(task, name) is not None}


def unsupported(task: Task) -> tuple[str, ...]:
    """The task's budgets the library measured does not have (the run goes without them)."""
    known = {field.name for field in dataclasses.fields(Limits)}
    return tuple(name for name in _budgets(task) if name not in known)


def agent_rules(task: Task, max_cycles: int) -> dict[str, Any]:
    """``limits=``, the tool-error policy and the final answer of the task's run.

    As this library takes them: ``final_answer`` is a rule of `StopPolicy` where it has
    one, a keyword of `convergent.Agent` before.
    """
    left_out = unsupported(task)
    budgets = {name: value for name, value in _budgets(task).items() if name not in left_out}
    rules: dict[str, Any] = {"limits": Limits(max_cycles=max_cycles, **budgets)}
    if _has_policy():
        policy = importlib.import_module("convergent.policy")
        known = set(policy.StopPolicy.__dataclass_fields__)
        chosen = {name: value for name, value in task.policy.items() if name in known}
        if "final_answer" in known:
            chosen["final_answer"] = task.final_answer
        else:
            rules["final_answer"] = task.final_answer
        rules["policy"] = policy.StopPolicy(on_tool_error=task.on_tool_error, **chosen)
    else:
        rules["on_tool_error"] = task.on_tool_error
        rules["final_answer"] = task.final_answer
    return rules
