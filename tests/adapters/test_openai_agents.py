"""The OpenAI Agents SDK adapter where the conformance trajectories do not reach: the SDK's
own typed output, ``run_sync``, and one instance per run."""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from convergent import Limits, StopReason
from convergent.exceptions import UserError
from convergent.extensions import Verification

from .hosts import MCP_HINTS, run_loop
from .trajectories import INVALID, NOTES, TRAJECTORIES, VALID, Report

if TYPE_CHECKING:
    from agents import Agent
    from agents.testing import ScriptedModel

    from convergent.adapters.openai_agents import Convergence


def _agent(replies: list[str], output_type: Any = None) -> tuple[Agent[Any], ScriptedModel]:
    from agents import Agent
    from agents.testing import ScriptedModel, assistant_message

    model = ScriptedModel([[assistant_message(text)] for text in replies])
    return Agent(name="counter", model=model, output_type=output_type), model


def _sent(model: ScriptedModel) -> list[str]:
    """The user messages of each request, as text."""
    return [json.dumps(call.input, default=str) for call in model.calls]


async def test_a_typed_answer_the_sdk_validated_completes_with_its_type() -> None:
    from convergent.adapters.openai_agents import run

    agent, _ = _agent([VALID], Report)
    ran = await run(agent, "count the files")
    assert ran.final_output == Report(files=2, summary="two files")
    assert (ran.report.reason, ran.report.cycles, ran.report.output) == (
        StopReason.COMPLETED,
        1,
        VALID,
    )


async def test_a_typed_answer_the_sdk_rejected_goes_back_to_the_model() -> None:
    from convergent.adapters.openai_agents import run

    agent, model = _agent([INVALID, VALID], Report)
    ran = await run(agent, "count the files")
    assert ran.final_output == Report(files=2, summary="two files")
    assert (ran.report.reason, ran.report.cycles) == (StopReason.COMPLETED, 2)
    assert NOTES["output"] in _sent(model)[1]  # why, in convergent's words


async def test_a_typed_answer_that_never_validates_ends_as_in_the_loop() -> None:
    from convergent.adapters.openai_agents import run

    never = next(t for t in TRAJECTORIES if t.name == "typed_never_valid")
    loop = await run_loop(never)
    agent, _ = _agent([*[INVALID] * loop.cycles, "best answer"], Report)
    ran = await run(agent, "count the files", limits=never.limits)
    assert (ran.report.reason, ran.report.cycles, ran.report.output_after_stop) == (
        loop.reason,
        loop.cycles,
        loop.after_stop,
    )
    assert ran.report.output == "best answer"
    assert ran.final_output is None  # no value of the type: the answer in words is reported


async def test_the_verifier_judges_the_sdks_typed_answer() -> None:
    from convergent.adapters.openai_agents import run

    judged: list[str] = []

    def two_files(answer: str) -> Verification:
        judged.append(answer)
        return Verification('"files": 2' in answer, "count again")

    agent, _ = _agent(['{"files": 3, "summary": "x"}', VALID], Report)
    ran = await run(agent, "count the files", verifier=two_files)
    assert judged == ['{"files": 3, "summary": "x"}', VALID]
    assert ran.final_output == Report(files=2, summary="two files")


@pytest.fixture
def default_loop_closed_after() -> Iterator[None]:
    """``run_sync`` leaves the thread's default loop open for the next call, as the SDK's
    ``Runner.run_sync`` does; the test closes it."""
    yield
    policy = asyncio.get_event_loop_policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        policy.get_event_loop().close()
    policy.set_event_loop(None)


@pytest.mark.usefixtures("default_loop_closed_after")
def test_run_sync_runs_the_same_way_without_an_event_loop() -> None:
    from convergent.adapters.openai_agents import run_sync

    agent, _ = _agent(["a draft", "the answer [source]"])

    def cites(answer: str) -> Verification:
        return Verification("[source]" in answer, "cite the source as [source]")

    ran = run_sync(agent, "answer it", verifier=cites)
    assert (ran.report.reason, ran.report.cycles) == (StopReason.COMPLETED, 2)
    assert ran.final_output == "the answer [source]"


async def test_run_sync_inside_an_event_loop_is_refused() -> None:
    from convergent.adapters.openai_agents import run_sync

    agent, _ = _agent(["done"])
    with pytest.raises(UserError, match="running event loop"):
        run_sync(agent, "go")


def _tool_agent(convergence: Convergence, calls: int) -> tuple[Agent[Any], ScriptedModel]:
    from agents import Agent, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    @function_tool
    def search(query: str) -> str:
        """Search."""
        return f"results for {query}"

    steps = [[function_call("search", {"query": f"q{n}"}, call_id=f"c{n}")] for n in range(calls)]
    model = ScriptedModel([*steps, [assistant_message("found it")]])
    agent = Agent(name="searcher", model=model, tools=[search])
    return convergence.agent(agent), model


async def _wired(convergence: Convergence, agent: Agent[Any]) -> Any:
    """A run wired by hand, as the module's docstring shows."""
    from agents import Runner

    result = await Runner.run(
        agent,
        "find it",
        hooks=convergence.hooks,
        run_config=convergence.run_config(),
        error_handlers=convergence.error_handlers,
        max_turns=convergence.max_turns,
    )
    await convergence.judge(result)
    return result


async def test_one_convergence_for_two_runs_at_once_is_refused() -> None:
    from convergent.adapters.openai_agents import Convergence

    convergence = Convergence(Limits(max_cycles=8))
    first, _ = _tool_agent(convergence, 2)
    second, _ = _tool_agent(convergence, 2)
    outcomes = await asyncio.gather(
        _wired(convergence, first), _wired(convergence, second), return_exceptions=True
    )
    refused = [o for o in outcomes if isinstance(o, UserError)]
    assert [str(o) for o in refused] == [
        "a Convergence serves one run, and this one already serves another: make one per run "
        "(or call convergent.adapters.openai_agents.run)"
    ]


async def test_one_convergence_used_again_for_a_second_run_is_refused() -> None:
    from convergent.adapters.openai_agents import Convergence

    convergence = Convergence(Limits(max_cycles=8))
    agent, _ = _tool_agent(convergence, 1)
    await _wired(convergence, agent)
    assert convergence.report is not None and convergence.report.cycles == 2
    again, _ = _tool_agent(convergence, 1)
    with pytest.raises(UserError, match="a Convergence serves one run"):
        await _wired(convergence, again)
    assert convergence.report.cycles == 2  # the first run's report is untouched


async def test_wired_by_hand_a_rejected_answer_waits_as_feedback() -> None:
    from convergent.adapters.openai_agents import Convergence

    def cites(answer: str) -> Verification:
        return Verification("[source]" in answer, "cite the source as [source]")

    convergence = Convergence(verifier=cites)
    agent, _ = _tool_agent(convergence, 0)
    result = await _wired(convergence, agent)
    assert result.final_output == "found it"  # the SDK's run ended there
    assert convergence.report is None
    assert convergence.feedback == (
        "Verification failed: cite the source as [source]. Continue working on the task."
    )


DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000
"""Arguments nested 100,000 deep: more than any parser's recursion can follow."""


async def test_arguments_nested_too_deeply_reach_the_driver_as_unparsed() -> None:
    from agents import Agent, RunContextWrapper
    from agents.items import ModelResponse
    from agents.testing import function_call
    from agents.usage import Usage as SdkUsage

    from convergent.adapters.openai_agents import Convergence

    convergence = Convergence(Limits(max_cycles=5))
    response = ModelResponse(
        output=[function_call("lookup", DEEP, call_id="c1")],
        usage=SdkUsage(requests=1),
        response_id=None,
    )
    context, agent = RunContextWrapper(None), Agent(name="a")
    await convergence.hooks.on_llm_start(context, agent, None, [])
    await convergence.hooks.on_llm_end(context, agent, response)
    assert convergence.driver.cycles == 1
    [converted] = convergence._calls.values()
    assert (converted.name, converted.arguments) == ("lookup", {})
    assert converted.parse_error == "nested too deeply"


async def test_a_call_of_a_tool_the_agent_lacks_is_a_mistake_not_a_crash() -> None:
    """The SDK raises ``ModelBehaviorError`` on such a call unless told otherwise."""
    from agents import Agent, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from convergent.adapters.openai_agents import run

    looked: list[str] = []

    @function_tool
    def lookup(key: str) -> str:
        """Look a key up."""
        looked.append(key)
        return f"{key}: found"

    model = ScriptedModel(
        [
            [function_call("search_web", {"query": "x"}, call_id="c1")],
            [
                function_call("fetch_page", {"url": "y"}, call_id="c2"),
                function_call("lookup", {"key": "k"}, call_id="c3"),
            ],
            [assistant_message("k: found")],
        ]
    )
    ran = await run(Agent(name="a", model=model, tools=[lookup]), "find k", tools={"lookup": True})
    assert (ran.report.reason, ran.report.cycles, ran.final_output) == (
        StopReason.COMPLETED,
        3,
        "k: found",
    )
    assert looked == ["k"]
    assert "Tool 'search_web' not found." in _sent(model)[1]


def test_a_chat_completions_agent_is_told_to_lose_cut_replies() -> None:
    from agents import Agent
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    from convergent.adapters import PolicyAdapted
    from convergent.adapters.openai_agents import Convergence

    client = AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9")
    agent = Agent(name="a", model=OpenAIChatCompletionsModel("gpt-4o", client))
    with pytest.warns(PolicyAdapted, match="drops the finish reason"):
        Convergence().agent(agent)


_RAW_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "raw_server.py"
"""A stdio MCP server that lists the tools of its plan and echoes each call's arguments."""


@MCP_HINTS
async def test_an_mcp_servers_annotations_declare_its_tools_effect(
    hint: dict[str, bool] | None, runs: int, tmp_path: Path
) -> None:
    """A read, an idempotent call and an undeclared one run each time and are judged on
    their result; a write's third call is held back with the note before it runs (the
    adapter's guardrail reaches the server's tools, which the SDK makes anew each turn)."""
    from agents import Agent
    from agents.mcp import MCPServerStdio
    from agents.testing import ScriptedModel, assistant_message, function_call

    from convergent.adapters.openai_agents import run

    tool = {
        "name": "lookup",
        "description": "Look a key up.",
        "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}},
        **({"annotations": hint} if hint else {}),
    }
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"tools": [tool]}))
    params = {"command": sys.executable, "args": [str(_RAW_SERVER), str(plan)]}
    model = ScriptedModel(
        [[function_call("lookup", {"key": "k"}, call_id=f"c{n}")] for n in range(3)]
        + [[assistant_message("k is found")]]
    )
    async with MCPServerStdio(params, name="keys") as server:
        agent = Agent(name="a", model=model, mcp_servers=[server])
        ran = await run(agent, "find k")
        assert server.tool_input_guardrails == []  # the run's guardrail is taken away after it
    assert ran.final_output == "k is found"
    echoed = json.dumps(json.dumps({"key": "k"}))[1:-1]  # a result, as JSON in the input
    assert _sent(model)[-1].count(echoed) == runs
