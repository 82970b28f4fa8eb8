"""The OpenAI Agents SDK adapter where the conformance trajectories do not reach."""

from __future__ import annotations

from agents import Agent as SdkAgent
from agents import RunContextWrapper
from agents.items import ModelResponse
from agents.testing import function_call
from agents.usage import Usage

from convergent import Limits
from convergent.adapters.openai_agents import Convergence

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000
"""Arguments nested 100,000 deep: more than any parser's recursion can follow."""


async def test_arguments_nested_too_deeply_reach_the_driver_as_unparsed() -> None:
    convergence = Convergence(Limits(max_cycles=5))
    response = ModelResponse(
        output=[function_call("lookup", DEEP, call_id="c1")],
        usage=Usage(requests=1),
        response_id=None,
    )
    await convergence.hooks.on_llm_end(RunContextWrapper(None), SdkAgent(name="a"), response)
    assert convergence.driver.cycles == 1
    [converted] = convergence._calls.values()
    assert (converted.name, converted.arguments) == ("lookup", {})
    assert converted.parse_error == "nested too deeply"
