"""The activities on their own: a caller's mistake fails them for good, the conversation
is read from and extended in the payload store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from convergent import AgentSpec, Limits
from convergent.messages import ToolCall, UserMessage
from convergent.testing import write_script

if TYPE_CHECKING:
    from temporalio.exceptions import ApplicationError

    from convergent.temporal._activities import Activities


@pytest.fixture
def activities(tmp_path: Path) -> Activities:
    from convergent.temporal import PayloadStore
    from convergent.temporal._activities import Activities
    from convergent.temporal._conversation import ConversationLog

    return Activities(ConversationLog(PayloadStore(tmp_path / "runs.db")))


def spec_json(tmp_path: Path, responses: list[Any], **changes: Any) -> dict[str, Any]:
    model = write_script(tmp_path / "script.json", *responses)
    made = AgentSpec(model=model, **{"tools": ("calculator",), **changes})
    return made.model_dump(mode="json")


async def fails_for_good(work: Any, *args: Any) -> ApplicationError:
    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment

    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(work, *args)
    assert raised.value.non_retryable
    return raised.value


async def test_a_spec_the_worker_cannot_build_fails_every_activity_for_good(
    tmp_path: Path, activities: Activities
) -> None:
    from convergent.temporal._payloads import DescribeRun, ModelCall, ToolRun, dump_call

    missing = AgentSpec(model="scripted:/nonexistent.json").model_dump(mode="json")
    unknown_tool = spec_json(tmp_path, ["hi"], tools=("nowhere:tool",))
    failures = [
        await fails_for_good(activities.describe, DescribeRun(missing)),
        await fails_for_good(
            activities.model_request,
            ModelCall(recipe=missing, role="model", messages=[], tools=[]),
        ),
        await fails_for_good(
            activities.tool_call,
            ToolRun(
                recipe=unknown_tool,
                run_id="r",
                call=dump_call(ToolCall(id="c", name="calculator", arguments={})),
            ),
        ),
    ]
    assert [failure.type for failure in failures] == ["UserError"] * 3
    assert failures[0].message == failures[1].message == "script file not found: /nonexistent.json"
    assert "nowhere" in failures[2].message


async def test_a_model_request_extends_the_stored_conversation(
    tmp_path: Path, activities: Activities
) -> None:
    from temporalio.testing import ActivityEnvironment

    from convergent.temporal import PayloadStore
    from convergent.temporal._conversation import ConversationLog
    from convergent.temporal._payloads import ModelCall, dump_messages

    made = spec_json(tmp_path, ["one", "two"])
    first = await ActivityEnvironment().run(
        activities.model_request,
        ModelCall(
            recipe=made,
            role="model",
            messages=dump_messages([UserMessage(content="hello")]),
            tools=[],
        ),
    )
    # a fresh worker (an empty memory) reads the conversation back from the store
    fresh = ConversationLog(PayloadStore(tmp_path / "runs.db"))
    assert [m.content for m in await fresh.load(first.history)] == ["hello"]
    news = [{"role": "assistant", "content": "one"}, {"role": "user", "content": "and?"}]
    second = await ActivityEnvironment().run(
        activities.model_request,
        ModelCall(recipe=made, role="model", messages=news, tools=[],
                  history=first.history),
    )  # fmt: skip
    assert second.response["content"] == "two"
    conversation = await fresh.load(second.history)
    assert [m.content for m in conversation] == ["hello", "one", "and?"]


async def test_a_gate_without_a_model_of_its_own_scores_with_the_agents_model(
    tmp_path: Path, activities: Activities
) -> None:
    from temporalio.testing import ActivityEnvironment

    from convergent.temporal._payloads import ModelCall, dump_messages

    made = spec_json(tmp_path, ["scored"], gate={"threshold": 0.5})
    answer = await ActivityEnvironment().run(
        activities.model_request,
        ModelCall(
            recipe=made,
            role="scorer",
            messages=dump_messages([UserMessage(content="score this")]),
            tools=[],
        ),
    )
    assert answer.response["content"] == "scored"


def test_one_agent_serves_a_spec_whatever_its_limits(tmp_path: Path) -> None:
    from convergent.temporal._activities import AgentCache

    # each call of an agent tool narrows its limits: the worker builds the agent once
    cache = AgentCache()
    first = cache.agent(spec_json(tmp_path, ["a"], limits=Limits(max_cycles=5)))
    assert cache.agent(spec_json(tmp_path, ["a"], limits=Limits(max_cycles=4))) is first
    assert cache.agent(spec_json(tmp_path, ["a"], system_prompt="other")) is not first
