"""Coordinating convergent's own agent runs: repeat until the base case passes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from convergent import Agent, ModelResponse, ScriptedModel, StopReason, UserError
from convergent.coordinator import (
    ArtifactCheck,
    AtomStatus,
    BaseCase,
    CommandCheck,
    Control,
    StateStore,
    WorkflowState,
    coordinate_agent,
)
from convergent.edit_tools import edit_tools
from convergent.messages import Message, ToolSpec, UserMessage
from convergent.result import RunResult
from convergent.testing import answer, call, step


def _store(path: Path, *checks: ArtifactCheck | CommandCheck, **control: object) -> StateStore:
    store = StateStore(path / "workflow-state.yaml")
    store.create(
        WorkflowState(
            goal="ship it",
            base_case=BaseCase(checks=list(checks)),
            control=Control(**control),
        )
    )
    return store


def _task(messages: Sequence[Message]) -> str:
    return next(m.content for m in messages if isinstance(m, UserMessage))


async def test_agent_runs_repeat_until_the_check_passes(tmp_path: Path) -> None:
    """The first run claims success without doing the work; the check's evidence sends
    it back, and the second run writes the file. Every prompt carries the evidence of
    what fails, since the base case is verified before the first attempt too."""
    prompts: list[str] = []

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        task = _task(messages)
        if messages[-1].role == "user":
            prompts.append(task)
            if len(prompts) == 2:
                return step(call("write_file", path="done.txt", content="ok"))
        return answer("All done!")

    store = _store(tmp_path, ArtifactCheck(name="artifact", path="done.txt"))
    agent = Agent(ScriptedModel(model), edit_tools(tmp_path))
    result = await coordinate_agent(agent, "Create done.txt", store)

    assert result.stop_reason is StopReason.COMPLETED
    assert result.iterations == 2
    assert all(isinstance(o.result, RunResult) for o in result.outcomes)
    assert all(p.startswith("Create done.txt\n") and "- artifact:" in p for p in prompts)
    atom = result.state.atom("check:artifact")
    assert atom.status is AtomStatus.RESOLVED
    assert (tmp_path / "done.txt").read_text() == "ok"


async def test_an_agent_that_fixes_nothing_stalls(tmp_path: Path) -> None:
    store = _store(
        tmp_path,
        CommandCheck(name="tests", command=["false"]),
        max_stall_count=2,
        max_iterations=10,
    )
    agent = Agent(ScriptedModel(lambda m, t: answer("fixed, trust me")))
    result = await coordinate_agent(agent, "make the tests pass", store)

    assert result.stop_reason is StopReason.STALLED
    assert 2 <= result.iterations < 10
    assert result.state.atom("check:tests").status is AtomStatus.PENDING


async def test_a_failing_agent_run_is_recorded_as_a_failed_attempt(tmp_path: Path) -> None:
    store = _store(tmp_path, CommandCheck(name="tests", command=["false"]), max_iterations=2)
    script = step(call("nope"))
    agent = Agent(ScriptedModel(lambda m, t: script))
    result = await coordinate_agent(agent, "x", store)

    # two iterations, below the stall count (3): the iteration limit ends the work
    assert result.stop_reason is StopReason.MAX_CYCLES
    assert result.state.attempts
    assert result.state.attempts[0].error is not None
    assert result.state.attempts[0].error.startswith("stalled")


async def test_a_base_case_without_checks_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(UserError, match="no checks"):
        await coordinate_agent(Agent(ScriptedModel(["x"])), "x", store)
