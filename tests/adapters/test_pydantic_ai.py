"""The PydanticAI capability with PydanticAI's own typed output, in each of its modes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from convergent import Limits, StopReason
from convergent.extensions import Verification

from .hosts import MCP_HINTS, run_loop
from .trajectories import NOTES, TRAJECTORIES, Report

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel

VALID_ARGS = {"files": 2, "summary": "two files"}
INVALID_ARGS = {"files": "two"}
MODES = ("tool", "prompted", "native")
"""PydanticAI's output modes."""


def _output_type(mode: str) -> Any:
    """The output type ``Report`` in PydanticAI's ``mode``."""
    from pydantic_ai import NativeOutput, PromptedOutput

    return {"tool": Report, "prompted": PromptedOutput(Report), "native": NativeOutput(Report)}[
        mode
    ]


def _model(answers: list[dict[str, Any] | str], seen: list[str] | None = None) -> FunctionModel:
    """Answers the way the agent's output mode asks: a call of its output tool, or JSON text;
    a plain string is an answer in words."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    replies: Iterator[dict[str, Any] | str] = iter(answers)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if seen is not None:
            seen.append(repr(messages[-1]))
        answer = next(replies)
        if isinstance(answer, str):
            return ModelResponse(parts=[TextPart(answer)])
        if info.output_tools:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, answer)])
        return ModelResponse(parts=[TextPart(json.dumps(answer))])

    return FunctionModel(respond)


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_a_typed_answer_the_host_validated_completes_with_its_type(mode: str) -> None:
    from pydantic_ai import Agent

    from convergent.adapters.pydantic_ai import Convergence

    convergence = Convergence()
    agent = Agent(_model([VALID_ARGS]), output_type=_output_type(mode), capabilities=[convergence])
    result = await agent.run("count the files")
    assert result.output == Report(files=2, summary="two files")
    report = convergence.report_for(result)
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 1)
    assert json.loads(report.output) == VALID_ARGS


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_the_hosts_own_retry_of_an_invalid_typed_answer_happens(mode: str) -> None:
    from pydantic_ai import Agent

    from convergent.adapters.pydantic_ai import Convergence

    seen: list[str] = []
    convergence = Convergence()
    agent = Agent(
        _model([INVALID_ARGS, VALID_ARGS], seen),
        output_type=_output_type(mode),
        capabilities=[convergence],
    )
    result = await agent.run("count the files")
    assert result.output == Report(files=2, summary="two files")  # never the rejected text
    assert "files" in seen[1] and NOTES["output"] not in seen[1]  # PydanticAI's own feedback
    report = convergence.report_for(result)
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 2)


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_a_typed_answer_that_never_validates_ends_as_in_the_loop(mode: str) -> None:
    from pydantic_ai import Agent

    from convergent.adapters.pydantic_ai import Convergence

    never = next(t for t in TRAJECTORIES if t.name == "typed_never_valid")
    loop = await run_loop(never)
    convergence = Convergence(never.limits)
    cycles = loop.cycles  # the loop's end: its final request gets the answer below
    agent = Agent(
        _model([*[INVALID_ARGS] * cycles, "best answer"]),
        output_type=_output_type(mode),
        retries={"output": 100},
        capabilities=[convergence],
    )
    result = await agent.run("count the files")
    report = convergence.report_for(result)
    assert (report.reason, report.cycles, report.output_after_stop) == (
        loop.reason,
        loop.cycles,
        loop.after_stop,
    )
    assert report.output == "best answer"
    assert result.output is None  # no value of the type; the answer in words is reported


async def test_the_hosts_cap_on_retries_ends_the_run_stalled_with_an_answer() -> None:
    from pydantic_ai import Agent

    from convergent.adapters.pydantic_ai import Convergence

    convergence = Convergence(Limits(max_cycles=10))
    agent = Agent(
        _model([INVALID_ARGS, INVALID_ARGS, "the files could not be counted"]),
        output_type=Report,  # output_retries=1: PydanticAI gives up at the second
        capabilities=[convergence],
    )
    result = await agent.run("count the files")
    report = convergence.report_for(result)
    assert (report.reason, report.cycles) == (StopReason.STALLED, 2)
    assert report.detail == (
        "the answer (Exceeded maximum output retries (1); PydanticAI gave up) was rejected "
        "2 times in a row"
    )
    assert (report.output, report.output_after_stop) == ("the files could not be counted", True)
    assert result.output is None


async def test_the_verifier_judges_the_hosts_typed_answer() -> None:
    from pydantic_ai import Agent

    from convergent.adapters.pydantic_ai import Convergence

    judged: list[str] = []

    def two_files(answer: str) -> Verification:
        judged.append(answer)
        return Verification(json.loads(answer)["files"] == 2, "count again")

    convergence = Convergence(verifier=two_files)
    agent = Agent(
        _model([{"files": 3, "summary": "x"}, VALID_ARGS]),
        output_type=Report,
        capabilities=[convergence],
    )
    result = await agent.run("count the files")
    assert [json.loads(answer)["files"] for answer in judged] == [3, 2]
    assert result.output == Report(files=2, summary="two files")
    assert convergence.report_for(result).cycles == 2


async def test_a_stop_keeps_a_text_agents_answer_in_words() -> None:
    from pydantic_ai import Agent

    from convergent.adapters.pydantic_ai import Convergence

    convergence = Convergence(Limits(max_cycles=1))
    agent = Agent(
        _model([INVALID_ARGS, "what I have so far"]),
        output_type=[Report, str],  # text is a valid output too
        capabilities=[convergence],
    )
    result = await agent.run("count the files")
    report = convergence.report_for(result)
    assert report.reason is StopReason.MAX_CYCLES
    assert result.output == "what I have so far" == report.output


@MCP_HINTS
async def test_a_tools_mcp_annotations_declare_its_effect(
    hint: dict[str, bool] | None, runs: int
) -> None:
    """A read, an idempotent call and an undeclared one run each time and are judged on
    their result (the third same result gets the note after it); a write's third call is
    held back with the note before it runs."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from convergent.adapters.pydantic_ai import Convergence

    looked: list[str] = []
    replies = iter(
        [
            ModelResponse(parts=[ToolCallPart("lookup", {"key": "k"}, tool_call_id=f"c{n}")])
            for n in range(3)
        ]
        + [ModelResponse(parts=[TextPart("k is found")])]
    )
    agent = Agent(FunctionModel(lambda messages, info: next(replies)), capabilities=[Convergence()])

    @agent.tool_plain(metadata={"annotations": hint} if hint else None)
    def lookup(key: str) -> str:
        """Look a key up."""
        looked.append(key)
        return "found"

    result = await agent.run("find k")
    assert result.output == "k is found"
    assert len(looked) == runs
