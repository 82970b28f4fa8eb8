"""The loop streams model requests only while someone listens to the deltas."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

from convergent import (
    Agent,
    Event,
    ModelResponded,
    ModelResponse,
    ModelSettings,
    RunState,
    StopReason,
    TextDelta,
    ToolCall,
    calculator,
)
from convergent.durability.sqlite import RunStore
from convergent.events import JsonlTraceWriter, ToolCallDelta
from convergent.messages import Message, ToolSpec
from convergent.models import Model, StreamPart, TextChunk
from convergent.testing import call, scripted, step

PRODUCT = call("calculator", expression="17*23")
SUM = call("calculator", expression="17+23")
CALLS = step(PRODUCT, SUM, content="Let me compute.")


class Tracked(Model):
    """Answers from a script, and counts how it was asked: whole or streamed."""

    def __init__(self, replies: Sequence[ModelResponse]) -> None:
        self.replies = list(replies)
        self.whole = 0
        self.streamed = 0

    @property
    def name(self) -> str:
        return "tracked"

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        self.whole += 1
        return self.replies.pop(0)

    async def request_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings | None = None,
    ) -> AsyncGenerator[StreamPart, None]:
        self.streamed += 1
        reply = self.replies.pop(0)
        for word in reply.content.split(" "):
            yield TextChunk(word + " ")
        yield reply


def replies() -> list[ModelResponse]:
    call = ToolCall(id="c1", name="calculator", arguments={"expression": "2*3"})
    return [ModelResponse(content="one two", tool_calls=(call,)), ModelResponse(content="6")]


class Quiet:
    """An observer that wants no deltas."""

    receives_deltas = False

    def on_event(self, event: Event, state: RunState) -> None:
        pass


class Loud(Quiet):
    """An observer that gets every event, the deltas too."""

    receives_deltas = True

    def __init__(self) -> None:
        self.seen: list[Event] = []

    def on_event(self, event: Event, state: RunState) -> None:
        self.seen.append(event)


async def test_nobody_listening_means_no_stream() -> None:
    model = Tracked(replies())
    await Agent(model, [calculator]).run("x")
    assert (model.whole, model.streamed) == (2, 0)


async def test_observers_that_want_no_deltas_do_not_make_the_loop_stream(tmp_path: Path) -> None:
    model = Tracked(replies())
    store = RunStore(tmp_path / "runs.db")
    result = await Agent(model, [calculator], observers=[Quiet()], store=store).run("x")
    assert result.stop_reason is StopReason.COMPLETED
    assert (model.whole, model.streamed) == (2, 0)


async def test_an_observer_or_a_callback_makes_the_loop_stream() -> None:
    loud = Loud()
    model = Tracked(replies())
    await Agent(model, [calculator], observers=[loud]).run("x")
    assert (model.whole, model.streamed) == (0, 2)
    assert [e.text for e in loud.seen if isinstance(e, TextDelta)] == ["one ", "two ", "6 "]

    model = Tracked(replies())
    await Agent(model, [calculator]).run("x", on_event=lambda event: None)
    assert (model.whole, model.streamed) == (0, 2)


async def test_agent_stream_yields_the_deltas_as_they_come() -> None:
    run = Agent(Tracked(replies()), [calculator]).stream("x")
    kinds = [type(event).__name__ async for event in run]
    assert kinds[1:5] == ["CycleStarted", "TextDelta", "TextDelta", "ModelResponded"]
    assert run.result is not None and run.result.output == "6"


async def test_a_model_that_cannot_stream_gives_its_whole_reply_as_one_delta() -> None:
    seen: list[Event] = []
    model = scripted(CALLS, "391 and 40")
    result = await Agent(model, [calculator]).run("x", on_event=seen.append)
    assert result.output == "391 and 40"
    deltas = [e for e in seen if isinstance(e, TextDelta | ToolCallDelta)]
    assert [(type(e).__name__, e.cycle) for e in deltas] == [
        ("TextDelta", 1),
        ("ToolCallDelta", 1),
        ("ToolCallDelta", 1),
        ("TextDelta", 2),
    ]
    first, *calls, last = deltas
    assert isinstance(first, TextDelta) and first.text == "Let me compute."
    assert isinstance(last, TextDelta) and last.text == "391 and 40"
    assert [(c.index, c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [  # type: ignore[union-attr]
        (0, PRODUCT.id, "calculator", {"expression": "17*23"}),
        (1, SUM.id, "calculator", {"expression": "17+23"}),
    ]
    responded = [e for e in seen if isinstance(e, ModelResponded)]
    assert all(e.first_delta is not None for e in responded)


async def test_the_trace_file_leaves_the_deltas_out_unless_asked(tmp_path: Path) -> None:
    plain = JsonlTraceWriter(tmp_path / "plain.jsonl")
    full = JsonlTraceWriter(tmp_path / "full.jsonl", deltas=True)

    def both(event: Event) -> None:
        plain(event)
        full(event)

    await Agent(scripted(CALLS, "done"), [calculator]).run("x", on_event=both)
    plain.close()
    full.close()
    kinds = [
        json.loads(line)["type"] for line in (tmp_path / "plain.jsonl").read_text().splitlines()
    ]
    every = [
        json.loads(line)["type"] for line in (tmp_path / "full.jsonl").read_text().splitlines()
    ]
    assert "text_delta" not in kinds and "tool_call_delta" not in kinds
    assert every.count("text_delta") == 2 and every.count("tool_call_delta") == 2
    assert [kind for kind in every if not kind.endswith("_delta")] == kinds


async def test_a_durable_run_journals_the_response_not_its_deltas(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    seen: list[Event] = []
    agent = Agent(scripted(CALLS, "done"), [calculator], store=store)
    result = await agent.run("x", run_id="r1", on_event=seen.append)
    assert any(isinstance(e, TextDelta) for e in seen)
    stored = [kind for (kind,) in store.query("SELECT type FROM events WHERE run_id = 'r1'", [])]
    assert not [kind for kind in stored if kind.endswith("_delta")]
    assert store.load("r1").messages == list(result.messages)
