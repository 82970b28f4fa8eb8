"""`ConvergenceMiddleware` where the conformance trajectories do not reach: LangGraph's own
control flow, a checkpointer, a final request that fails, the synchronous path, and
LangSmith's set-up of traced calls made on the event loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from convergent import Limits, StopReason
from convergent.extensions import Verification

from .hosts import (
    MCP_HINTS,
    annotated_lookup,
    langchain_model,
    langchain_tools,
    run_langchain,
    run_loop,
)
from .trajectories import (
    NOTES,
    TRAJECTORIES,
    Report,
    Trajectory,
    World,
    needs_citation,
    on_hosts,
)


def test_an_interrupt_in_a_tool_passes_through_and_the_run_resumes() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, interrupt

    from convergent.adapters.langchain import ConvergenceMiddleware

    @tool
    def approve(amount: int) -> str:
        """Ask a human to approve a refund."""
        answer = interrupt(f"approve a refund of {amount}?")
        return f"the human said {answer}"

    model = langchain_model(
        [(("approve", {"amount": 120}),), "refunded: the human said yes"],
    )
    agent = create_agent(
        model, [approve], middleware=[ConvergenceMiddleware()], checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t1"}}
    paused = agent.invoke({"messages": [HumanMessage("refund 120")]}, thread)
    assert [i.value for i in paused["__interrupt__"]] == ["approve a refund of 120?"]
    assert not [m for m in paused["messages"] if isinstance(m, ToolMessage)]  # not an error
    done = agent.invoke(Command(resume="yes"), thread)
    report = done["stop_report"]
    assert (report.reason, report.output) == (StopReason.COMPLETED, "refunded: the human said yes")
    assert done["messages"][-2].content == "the human said yes"


def test_a_failed_final_request_keeps_the_last_text() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    from convergent.adapters.langchain import ConvergenceMiddleware

    steps = [(("read_file", {"path": f"part{n}.txt"}),) for n in range(2)]
    model = langchain_model([*steps])  # nothing left for the final request: it raises

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    middleware = ConvergenceMiddleware(Limits(max_cycles=2), tools={"read_file": True})
    result = create_agent(model, [read_file], middleware=[middleware]).invoke(
        {"messages": [HumanMessage("read both parts")]}
    )
    report = result["stop_report"]
    assert (report.reason, report.cycles) == (StopReason.MAX_CYCLES, 2)
    assert (report.output, report.output_after_stop) == ("", False)
    assert isinstance(result["messages"][-1], ToolMessage)  # no answer was made up


def test_the_verifier_sends_the_model_back_within_one_model_call() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langchain import ConvergenceMiddleware

    model = langchain_model(["a draft", "the answer [source]"])
    agent = create_agent(model, [], middleware=[ConvergenceMiddleware(verifier=needs_citation)])
    result = agent.invoke({"messages": [HumanMessage("answer it")]})
    texts = [(type(m).__name__, m.text) for m in result["messages"]]
    assert texts == [
        ("HumanMessage", "answer it"),
        ("AIMessage", "a draft"),
        (
            "HumanMessage",
            "Verification failed: cite the source as [source]. Continue working on the task.",
        ),
        ("AIMessage", "the answer [source]"),
    ]
    report = result["stop_report"]
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 2)


def test_each_invocation_starts_a_run_afresh_on_a_checkpointed_thread() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from convergent.adapters.langchain import ConvergenceMiddleware

    model = langchain_model(["first answer", "second answer"])
    agent = create_agent(
        model,
        [],
        middleware=[ConvergenceMiddleware(Limits(max_cycles=1))],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "t2"}}
    first = agent.invoke({"messages": [HumanMessage("one")]}, thread)
    second = agent.invoke({"messages": [HumanMessage("two")]}, thread)
    assert [r["stop_report"].cycles for r in (first, second)] == [1, 1]
    assert second["stop_report"].reason is StopReason.COMPLETED
    assert isinstance(second["messages"][-1], AIMessage)


def test_the_final_answer_keeps_to_the_models_own_cap_within_a_budget() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langchain import ConvergenceMiddleware

    budget = next(t for t in TRAJECTORIES if t.name == "budget")  # final cap 512 by default
    seen: list[tuple[str, int | None]] = []
    model = langchain_model(budget.steps, seen, max_tokens=100)
    middleware = ConvergenceMiddleware(budget.limits, tools={"read_file": True})
    agent = create_agent(model, langchain_tools(World()), middleware=[middleware])
    result = agent.invoke({"messages": [HumanMessage("read the parts")]})
    assert result["stop_report"].reason is StopReason.BUDGET_EXHAUSTED
    assert [cap for _, cap in seen] == [None] * 7 + [100]


@pytest.fixture
def langsmith_set_up_on_the_loop() -> Iterator[list[str]]:
    """LangSmith's set-up of each traced call made on the event loop, as docs/adapters.md
    shows for processes that do not trace; yields the names of the calls it ran."""
    import langsmith

    ran: list[str] = []

    async def on_the_loop(
        default: Callable[..., Awaitable[Any]], context: Any, func: Any, /, *args: Any, **kw: Any
    ) -> Any:
        ran.append(getattr(func, "__name__", repr(func)))
        return context.run(func, *args, **kw)

    langsmith.set_runtime_overrides(aio_to_thread=on_the_loop)
    try:
        yield ran
    finally:
        langsmith.set_runtime_overrides()


@pytest.mark.parametrize("trajectory", on_hosts(TRAJECTORIES))
async def test_langsmith_set_up_on_the_event_loop_ends_each_trajectory_the_same_way(
    trajectory: Trajectory, langsmith_set_up_on_the_loop: list[str]
) -> None:
    assert await run_langchain(trajectory) == await run_loop(trajectory)
    assert "_setup_run" in langsmith_set_up_on_the_loop  # the hooks' set-up ran on the loop


# -- typed output: LangChain's own response_format ------------------------------------------

_VALID_ARGS = {"files": 2, "summary": "two files"}
_INVALID_ARGS = {"files": "two"}


def _typed_agent(steps: list[Any], response_format: Any, **policy: Any) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ToolStrategy

    from convergent.adapters.langchain import ConvergenceMiddleware

    if response_format is ToolStrategy:
        response_format = ToolStrategy(Report)
    middleware = ConvergenceMiddleware(**policy)
    return create_agent(
        langchain_model(steps), [], middleware=[middleware], response_format=response_format
    )


def test_a_typed_answer_the_host_validated_completes_with_its_type() -> None:
    from langchain.agents.structured_output import ToolStrategy
    from langchain_core.messages import HumanMessage

    agent = _typed_agent([(("Report", _VALID_ARGS),)], ToolStrategy)
    result = agent.invoke({"messages": [HumanMessage("count the files")]})
    assert result["structured_response"] == Report(files=2, summary="two files")
    report = result["stop_report"]
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 1)
    assert report.output == '{"files": 2, "summary": "two files"}'


def test_the_hosts_own_retry_of_an_invalid_typed_answer_happens() -> None:
    from langchain.agents.structured_output import ToolStrategy
    from langchain_core.messages import HumanMessage, ToolMessage

    steps = [(("Report", _INVALID_ARGS),), (("Report", _VALID_ARGS),)]
    agent = _typed_agent(steps, ToolStrategy)
    result = agent.invoke({"messages": [HumanMessage("count the files")]})
    errors = [m for m in result["messages"] if isinstance(m, ToolMessage)][0]
    assert "validation error" in errors.text.lower()  # LangChain's own feedback
    assert result["structured_response"] == Report(files=2, summary="two files")
    report = result["stop_report"]
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 2)


async def test_a_typed_answer_that_never_validates_ends_as_in_the_loop() -> None:
    from langchain.agents.structured_output import ToolStrategy
    from langchain_core.messages import HumanMessage

    never = next(t for t in TRAJECTORIES if t.name == "typed_never_valid")
    loop = await run_loop(never)
    cycles = loop.cycles  # the loop's end: its final request gets the answer below
    steps = [*[(("Report", _INVALID_ARGS),)] * cycles, "best answer"]
    agent = _typed_agent(steps, ToolStrategy, limits=never.limits)
    result = await agent.ainvoke({"messages": [HumanMessage("count the files")]})
    report = result["stop_report"]
    assert (report.reason, report.cycles, report.output_after_stop) == (
        loop.reason,
        loop.cycles,
        loop.after_stop,
    )
    assert result["structured_response"] is None  # as LangChain's own limits end a run
    assert report.output == "best answer"


def test_a_providers_typed_answer_that_fails_goes_back_to_the_model() -> None:
    """LangChain raises on a provider's invalid typed answer; the loop sends it back."""
    from langchain.agents.structured_output import ProviderStrategy
    from langchain_core.messages import HumanMessage

    steps = ['{"files": "two"}', '{"files": 2, "summary": "two files"}']
    agent = _typed_agent(steps, ProviderStrategy(Report))
    result = agent.invoke({"messages": [HumanMessage("count the files")]})
    assert result["structured_response"] == Report(files=2, summary="two files")
    feedback = [m.text for m in result["messages"] if isinstance(m, HumanMessage)][1]
    assert feedback.startswith(NOTES["output"])
    report = result["stop_report"]
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 2)


def test_the_verifier_judges_the_hosts_typed_answer_as_json() -> None:
    from langchain.agents.structured_output import ToolStrategy
    from langchain_core.messages import HumanMessage

    judged: list[str] = []

    def two_files(answer: str) -> Verification:
        judged.append(answer)
        return Verification('"files": 2' in answer, "count again")

    steps = [(("Report", {"files": 3, "summary": "x"}),), (("Report", _VALID_ARGS),)]
    agent = _typed_agent(steps, ToolStrategy, verifier=two_files)
    result = agent.invoke({"messages": [HumanMessage("count the files")]})
    assert judged == ['{"files": 3, "summary": "x"}', '{"files": 2, "summary": "two files"}']
    assert result["structured_response"] == Report(files=2, summary="two files")
    assert result["stop_report"].cycles == 2


def test_an_answer_in_words_to_a_tool_strategy_goes_back_as_not_typed() -> None:
    """A provider that ignores the forced call answers in words: that is no typed answer."""
    from langchain.agents.structured_output import ToolStrategy
    from langchain_core.messages import HumanMessage

    steps = ["There are two files.", (("Report", _VALID_ARGS),)]
    agent = _typed_agent(steps, ToolStrategy)
    result = agent.invoke({"messages": [HumanMessage("count the files")]})
    feedback = [m.text for m in result["messages"] if isinstance(m, HumanMessage)][1]
    assert feedback.startswith(NOTES["output"])
    assert "not as a call of the output tool (Report)" in feedback
    assert result["structured_response"] == Report(files=2, summary="two files")
    report = result["stop_report"]
    assert (report.reason, report.cycles) == (StopReason.COMPLETED, 2)


@MCP_HINTS
def test_a_tools_mcp_annotations_in_its_metadata_declare_its_effect(
    hint: dict[str, bool] | None, runs: int
) -> None:
    """A read, an idempotent call and an undeclared one run each time and are judged on
    their result; a write's third call is held back with the note before it runs."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from convergent.adapters.langchain import ConvergenceMiddleware

    looked: list[str] = []
    model = langchain_model([(("lookup", {"key": "k"}),)] * 3 + ["k is found"])
    agent = create_agent(
        model, [annotated_lookup(hint, looked)], middleware=[ConvergenceMiddleware()]
    )
    result = agent.invoke({"messages": [HumanMessage("find k")]})
    assert result["stop_report"].output == "k is found"
    assert len(looked) == runs


def test_the_callers_declaration_comes_before_the_tools_annotations() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from convergent import Effect
    from convergent.adapters.langchain import ConvergenceMiddleware

    looked: list[str] = []
    model = langchain_model([(("lookup", {"key": "k"}),)] * 3 + ["k is found"])
    tool = annotated_lookup({"destructiveHint": True}, looked)
    middleware = ConvergenceMiddleware(tools={"lookup": Effect.READ})
    agent = create_agent(model, [tool], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("find k")]})
    assert len(looked) == 3
