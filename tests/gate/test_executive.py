from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from convergent import (
    Agent,
    Limits,
    ModelResponse,
    RunState,
    ScriptedModel,
    StopPolicy,
    StopReason,
    UserError,
)
from convergent.events import Event, event_to_dict
from convergent.extensions import FollowUpGate
from convergent.gate import (
    SCORE_SCHEMA,
    AskUser,
    ExecutiveGate,
    GateDecided,
    NonInteractiveChannel,
    QueueChannel,
    UserAnswered,
    parse_score,
)
from convergent.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, ToolSpec
from convergent.testing import call, step
from convergent.tools import tool

from .conftest import Clicks, scorer_model

THOUGHT = "The user said 'submit the form'; there is a Submit button."


def gated(
    model: ScriptedModel,
    scorer: ScriptedModel,
    channel: QueueChannel | NonInteractiveChannel,
    clicks: Clicks,
    **options: object,
) -> tuple[Agent, AskUser]:
    asker = AskUser(channel, timeout=float(options.pop("timeout", 5.0)))  # type: ignore[arg-type]
    gate = ExecutiveGate(scorer, asker, **options)  # type: ignore[arg-type]
    return Agent(model, [clicks.tool()], gate=gate, limits=Limits(max_cycles=6)), asker


def gate_events(events: Sequence[Event]) -> list[GateDecided]:
    return [e for e in events if isinstance(e, GateDecided)]


def tool_results(messages: Sequence[Message], name: str) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage) and m.name == name]


async def test_score_at_or_above_threshold_executes_the_action() -> None:
    clicks = Clicks()
    model = ScriptedModel([step(call("click", label="Submit"), content=THOUGHT), "Submitted."])
    scorer = scorer_model(0.95)
    agent, _ = gated(model, scorer, QueueChannel(), clicks)

    result = await agent.run("submit the form")

    assert result.stop_reason is StopReason.COMPLETED
    assert clicks.clicked == ["Submit"]
    [decision] = gate_events(result.events)
    assert (decision.decision, decision.trigger) == ("executed", "score")
    assert decision.score == pytest.approx(0.95)
    assert decision.threshold == 0.85 and decision.question == ""
    model.assert_consumed()


async def test_score_exactly_at_threshold_executes() -> None:
    clicks = Clicks()
    model = ScriptedModel([step(call("click", label="Submit"), content=THOUGHT), "done"])
    agent, _ = gated(model, scorer_model(0.85), QueueChannel(), clicks)
    result = await agent.run("submit the form")
    assert clicks.clicked == ["Submit"]
    assert gate_events(result.events)[0].decision == "executed"


async def test_below_threshold_discards_the_action_and_asks_the_user() -> None:
    clicks = Clicks()
    model = ScriptedModel(
        [
            step(call("click", label="Cancel"), content="Maybe the team is the sales people?"),
            step(call("click", "c2", label="Submit"), content="The user chose Submit."),
            "Done.",
        ]
    )
    verdict = {
        "clarity": 0.4,
        "certainty": 0.9,
        "question": "Do you want to cancel or submit the form?",
        "reason": "the thought guesses who the team is",
    }
    scorer = scorer_model(verdict, 0.97)
    channel = QueueChannel(answers=["Submit it, please."])
    agent, _ = gated(model, scorer, channel, clicks)

    result = await agent.run("handle the form")

    assert result.stop_reason is StopReason.COMPLETED
    assert clicks.clicked == ["Submit"], "the uncertain Cancel click must never run"
    assert channel.asked == ["Do you want to cancel or submit the form?"]
    asked, executed = gate_events(result.events)
    assert (asked.decision, asked.trigger) == ("asked", "score")
    assert asked.score == pytest.approx(0.4) and asked.clarity == 0.4 and asked.certainty == 0.9
    assert asked.proposed[0].arguments == {"label": "Cancel"}
    assert asked.reason == "the thought guesses who the team is"
    assert executed.decision == "executed"
    [answered] = [e for e in result.events if isinstance(e, UserAnswered)]
    assert (answered.status, answered.answer, answered.channel) == (
        "answered",
        "Submit it, please.",
        "queue",
    )
    assert answered.call_id == asked.ask_call_id
    # The discarded call left no trace in the conversation: the thought now carries ask_user.
    first_assistant = next(m for m in result.messages if isinstance(m, AssistantMessage))
    assert first_assistant.content == "Maybe the team is the sales people?"
    assert [c.name for c in first_assistant.tool_calls] == ["ask_user"]


async def test_the_reply_reaches_the_model_as_the_observation() -> None:
    clicks = Clicks()
    model = ScriptedModel([step(call("click", label="Cancel"), content="unsure"), "ok"])
    agent, _ = gated(model, scorer_model(0.2), QueueChannel(answers=["press Submit"]), clicks)

    await agent.run("handle the form")

    second_request = model.requests[1].messages
    last = second_request[-1]
    assert isinstance(last, ToolResultMessage)
    assert (last.name, last.content, last.is_error) == ("ask_user", "press Submit", False)
    previous = second_request[-2]
    assert isinstance(previous, AssistantMessage)
    assert [c.id for c in previous.tool_calls] == [last.tool_call_id]


async def test_question_falls_back_to_the_uncertain_thought() -> None:
    clicks = Clicks()
    model = ScriptedModel(
        [step(call("click", label="Cancel"), content="I guess the red one."), "ok"]
    )
    channel = QueueChannel(answers=["the green one"])
    agent, _ = gated(model, scorer_model(0.1), channel, clicks)
    await agent.run("press the button")
    [question] = channel.asked
    assert "I guess the red one." in question
    assert 'click({"label": "Cancel"})' in question


async def test_the_scorer_request_is_focused_and_structured() -> None:
    clicks = Clicks()
    model = ScriptedModel([step(call("click", label="Submit"), content=THOUGHT), "done"])
    scorer = scorer_model(0.9)
    agent, _ = gated(model, scorer, QueueChannel(), clicks)

    result = await agent.run("submit the form")

    [(messages, tools, settings)] = scorer.requests
    assert tools == ()
    assert settings is not None and settings.json_schema == SCORE_SCHEMA
    prompt = messages[-1].content
    assert "Task: submit the form" in prompt
    assert THOUGHT in prompt and 'click({"label": "Submit"})' in prompt
    # The scoring request is an extra model call, counted in the run's usage.
    assert result.usage.requests == 1 and result.usage.input_tokens == 10
    assert gate_events(result.events)[0].usage.input_tokens == 10


@pytest.mark.parametrize(
    ("reply", "policy", "ran"),
    [
        ("not json at all", "ask", False),
        ('{"clarity": 2, "certainty": 1}', "execute", True),
        ('{"clarity": ' + "[" * 100_000 + "]" * 100_000 + "}", "ask", False),
    ],
)
async def test_an_unusable_scorer_reply_follows_the_policy(
    reply: str, policy: str, ran: bool
) -> None:
    clicks = Clicks()
    model = ScriptedModel([step(call("click", label="Submit"), content=THOUGHT), "done"])
    channel = QueueChannel(answers=["yes"])
    agent, _ = gated(model, scorer_model(reply), channel, clicks, on_scorer_error=policy)
    result = await agent.run("submit")
    assert clicks.clicked == (["Submit"] if ran else [])
    [decision] = gate_events(result.events)
    assert decision.trigger == "scorer_error" and decision.score is None
    assert decision.reason


async def test_the_models_own_question_and_exempt_tools_are_not_scored() -> None:
    clicks = Clicks()
    model = ScriptedModel(
        [
            step(call("ask_user", question="Which form?"), content="Which form?"),
            step(call("click", "c2", label="Submit"), content="look"),
            "done",
        ]
    )
    scorer = scorer_model()  # any scoring request fails the test
    agent, _ = gated(model, scorer, QueueChannel(answers=["the first"]), clicks, exempt={"click"})

    result = await agent.run("submit")

    assert result.stop_reason is StopReason.COMPLETED and not scorer.requests
    assert [(d.trigger, d.decision) for d in gate_events(result.events)] == [
        ("model_asked", "executed"),
        ("exempt", "executed"),
    ]
    assert tool_results(result.messages, "ask_user")[0].content == "the first"


async def test_an_uncertain_batch_keeps_the_models_own_question() -> None:
    clicks = Clicks()
    model = ScriptedModel(
        [
            step(
                call("ask_user", "q1", question="Which button?"),
                call("click", "c1", label="Cancel"),
                content="asking and clicking",
            ),
            "done",
        ]
    )
    channel = QueueChannel(answers=["Submit"])
    agent, _ = gated(model, scorer_model(0.3), channel, clicks)
    result = await agent.run("press")
    assert clicks.clicked == [] and channel.asked == ["Which button?"]
    assert gate_events(result.events)[0].ask_call_id == "q1"


async def test_a_declared_ambiguity_asks_without_a_score() -> None:
    clicks = Clicks({"Submit": 3})
    model = ScriptedModel(
        [
            step(call("click", label="Submit"), content=THOUGHT),
            step(call("click", "c2", label="Cancel"), content="Second one then."),
            "done",
        ]
    )
    scorer = scorer_model(0.95, 0.95)
    channel = QueueChannel(answers=["the second"])
    agent, _ = gated(model, scorer, channel, clicks)

    result = await agent.run("submit the form")

    assert channel.asked == [
        "click found several matches. Which one did you mean: Submit #1, Submit #2 or Submit #3?"
    ]
    decisions = gate_events(result.events)
    ambiguity = decisions[1]
    assert (ambiguity.trigger, ambiguity.decision, ambiguity.score) == ("ambiguity", "asked", None)
    assert ambiguity.usage.requests == 0
    assert len(scorer.requests) == 2, "one score per proposal, none for the ambiguity"
    # The model sees the ambiguous result, then the question and the user's reply.
    messages = model.requests[1][0]
    assert [type(m).__name__ for m in messages[-4:]] == [
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    assert json.loads(messages[-3].content)["ambiguous"] is True
    assert messages[-1].content == "the second"


async def test_arguments_rejected_twice_ask_without_a_score() -> None:
    clicks = Clicks()
    model = ScriptedModel(
        [
            step(call("click", "c1", lable="Submit"), content="try"),
            step(call("click", "c2", text="Submit"), content="again"),
            step(call("click", "c3", label="Submit"), content="the user said"),
            "done",
        ]
    )
    channel = QueueChannel(answers=["the argument is called label"])
    agent, _ = gated(model, scorer_model(), channel, clicks, exempt={"click"})

    result = await agent.run("submit")

    assert result.stop_reason is StopReason.COMPLETED
    assert clicks.clicked == ["Submit"]
    [question] = channel.asked
    assert "click 2 times" in question and "invalid arguments for click" in question
    invalid = [d for d in gate_events(result.events) if d.trigger == "invalid_arguments"]
    assert len(invalid) == 1 and invalid[0].score is None and invalid[0].cycle == 2
    assert model.requests[2][0][-1].content == "the argument is called label"


async def test_a_timed_out_question_is_a_recorded_resumable_stop() -> None:
    clicks = Clicks()
    model = ScriptedModel([step(call("click", label="Cancel"), content="unsure")])
    verdict = {"clarity": 0.2, "certainty": 0.2, "question": "Cancel or Submit?", "reason": "?"}
    agent, asker = gated(model, scorer_model(verdict), QueueChannel(), clicks, timeout=0.01)

    result = await agent.run("handle the form")

    assert result.stop_reason is StopReason.NEEDS_USER
    assert result.stop_detail == "Cancel or Submit?"
    [answered] = [e for e in result.events if isinstance(e, UserAnswered)]
    assert (answered.status, answered.answer) == ("timed_out", None)
    assert [x.status for x in asker.exchanges] == ["timed_out"]
    assert clicks.clicked == []


async def test_non_interactive_needs_user_then_resume_with_the_answer() -> None:
    clicks = Clicks()
    model = ScriptedModel(
        [
            step(call("click", label="Cancel"), content="unsure"),
            step(call("click", "c2", label="Submit"), content="user said Submit"),
            "Submitted.",
        ]
    )
    verdict = {"clarity": 0.3, "certainty": 0.3, "question": "Cancel or Submit?", "reason": "?"}
    agent, _ = gated(model, scorer_model(verdict, 0.99), NonInteractiveChannel(), clicks)
    state: RunState = agent.new_state("handle the form")

    first = await agent.run(state=state)

    assert first.stop_reason is StopReason.NEEDS_USER and first.stop_reason.resumable
    assert first.stop_detail == "Cancel or Submit?"
    [pending] = state.pending_calls()
    assert pending.name == "ask_user" and pending.arguments == {"question": "Cancel or Submit?"}
    [answered] = [e for e in first.events if isinstance(e, UserAnswered)]
    assert answered.status == "unavailable"
    restored = RunState.from_jsonable(json.loads(json.dumps(state.to_jsonable())))

    second = await agent.run(state=restored, answers={pending.id: "Submit"})

    assert second.stop_reason is StopReason.COMPLETED
    assert clicks.clicked == ["Submit"]
    observation = model.requests[1][0][-1]
    assert isinstance(observation, ToolResultMessage) and observation.content == "Submit"


class _DroppingGate:
    tools = ()

    async def review(
        self, response: ModelResponse, state: RunState, emit: object
    ) -> tuple[ToolCall, ...]:
        return ()

    async def after_tools(self, records: object, state: RunState, emit: object) -> None:
        return None


async def test_a_gate_that_drops_every_call_is_refused_not_completed() -> None:
    model = ScriptedModel([step(call("click", label="Submit"), content="x")])
    agent = Agent(model, [Clicks().tool()], gate=_DroppingGate())
    with pytest.raises(UserError, match="never drop"):
        await agent.run("t")


@pytest.mark.parametrize("scores", [[0.1] * 6, [0.99] * 6, [0.2, 0.9, "garbage", 0.5, 0.95, 0.0]])
async def test_the_gate_never_turns_pending_calls_into_completed(scores: list[object]) -> None:
    clicks = Clicks()

    def always_calls(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        return step(call("click", f"c{len(messages)}", label="Submit"), content="keep going")

    model = ScriptedModel(always_calls)
    asker = AskUser(QueueChannel(answers=[f"answer {n}" for n in range(10)]), timeout=5)
    gate = ExecutiveGate(scorer_model(*scores), asker)  # type: ignore[arg-type]
    agent = Agent(
        model,
        [clicks.tool()],
        gate=gate,
        limits=Limits(max_cycles=6),
        policy=StopPolicy(max_repeated_calls=99),
    )

    result = await agent.run("loop")

    assert result.stop_reason is StopReason.MAX_CYCLES
    responded = [e for e in result.events if type(e).__name__ == "ModelResponded"]
    started = {e.cycle for e in result.events if type(e).__name__ == "ToolStarted"}
    assert started == {e.cycle for e in responded}, "every cycle with proposed calls ran some call"


async def test_gate_events_serialise_for_the_trace() -> None:
    clicks = Clicks()
    model = ScriptedModel([step(call("click", label="Cancel"), content="unsure"), "ok"])
    agent, _ = gated(model, scorer_model(0.5), QueueChannel(answers=["Submit"]), clicks)
    result = await agent.run("t")
    dumped = [event_to_dict(e) for e in result.events if isinstance(e, GateDecided | UserAnswered)]
    assert [d["type"] for d in dumped] == ["gate_decided", "user_answered"]
    assert dumped[0]["proposed"][0]["arguments"] == {"label": "Cancel"}
    assert dumped[1]["answer"] == "Submit"
    json.dumps(dumped)


def test_the_agent_offers_ask_user_once() -> None:
    asker = AskUser(QueueChannel())
    gate = ExecutiveGate(scorer_model(), asker)
    assert isinstance(gate, FollowUpGate)
    agent = Agent(ScriptedModel(["x"]), [Clicks().tool(), asker.tool], gate=gate)
    assert [spec.name for spec in agent.tool_specs] == ["click", "ask_user"]
    assert agent.tools["ask_user"].parameters["required"] == ["question"]


@pytest.mark.parametrize(
    ("content", "value"),
    [
        ('```json\n{"clarity": 0.5, "certainty": 0.7, "question": "q", "reason": "r"}\n```', 0.5),
        ('{"confidence": 0.8}', 0.8),
        ('Sure: {"clarity": 1, "certainty": 0.25}', 0.25),
    ],
)
def test_parse_score_reads_lenient_replies(content: str, value: float) -> None:
    assert parse_score(content).value == pytest.approx(value)


@pytest.mark.parametrize(
    "content", ["", "[1, 2]", '{"clarity": 0.5}', '{"clarity": -1, "certainty": 1}']
)
def test_parse_score_rejects_unusable_replies(content: str) -> None:
    with pytest.raises(ValueError):
        parse_score(content)


def test_invalid_options_are_user_errors() -> None:
    from convergent import UserError

    asker = AskUser(QueueChannel())
    with pytest.raises(UserError, match="between 0 and 1"):
        ExecutiveGate(scorer_model(), asker, threshold=1.5)
    with pytest.raises(UserError, match="timeout"):
        AskUser(QueueChannel(), timeout=0)


async def test_a_run_resumed_without_an_answer_asks_again_through_the_new_channel() -> None:
    clicks = Clicks()
    script = [
        step(call("click", label="Cancel"), content="unsure"),
        step(call("click", "c2", label="Submit"), content="user said Submit"),
        "Submitted.",
    ]
    verdict = {"clarity": 0.3, "certainty": 0.3, "question": "Cancel or Submit?", "reason": "?"}
    offline, _ = gated(
        ScriptedModel(script[:1]), scorer_model(verdict), NonInteractiveChannel(), clicks
    )
    state = offline.new_state("handle the form")
    assert (await offline.run(state=state)).stop_reason is StopReason.NEEDS_USER

    channel = QueueChannel(answers=["Submit"])
    online, _ = gated(ScriptedModel(script[1:]), scorer_model(0.99), channel, clicks)
    result = await online.run(state=state)

    assert result.stop_reason is StopReason.COMPLETED
    assert channel.asked == ["Cancel or Submit?"] and clicks.clicked == ["Submit"]
    assert [e.status for e in result.events if isinstance(e, UserAnswered)] == ["answered"]


DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000
"""A JSON object nested 100,000 deep: more than any parser's recursion can follow."""


async def test_a_tool_result_nested_too_deeply_is_no_ambiguity_and_no_crash() -> None:
    @tool
    def deep() -> str:
        """Return a document nested too deeply to parse."""
        return DEEP

    model = ScriptedModel([step(call("deep")), "done"])
    asker = AskUser(NonInteractiveChannel(), timeout=1.0)
    gate = ExecutiveGate(scorer_model(0.95), asker)
    result = await Agent(model, [deep], gate=gate, limits=Limits(max_cycles=4)).run("t")
    assert result.stop_reason is StopReason.COMPLETED
    assert tool_results(result.messages, "deep")[0].content == DEEP
    assert [d.trigger for d in gate_events(result.events)] == ["score"]
