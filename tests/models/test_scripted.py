from __future__ import annotations

import json
from pathlib import Path

import pytest

from convergent import ModelResponse, ScriptedModel, UserError
from convergent.exceptions import ModelError, ScriptExhaustedError
from convergent.messages import AssistantMessage, Message, ToolResultMessage, UserMessage


async def test_plays_back_and_reports_unconsumed() -> None:
    model = ScriptedModel(["a", {"content": "b", "confidence": 0.5}, "c"])
    first = await model.request([UserMessage(content="1")], [])
    second = await model.request([UserMessage(content="2")], [])
    assert (first.content, second.content) == ("a", "b")
    assert second.metadata == {"confidence": 0.5}
    assert [r.content for r in model.unconsumed] == ["c"]
    with pytest.raises(AssertionError, match="1 scripted response"):
        model.assert_consumed()
    await model.request([], [])
    model.assert_consumed()
    with pytest.raises(ScriptExhaustedError):
        await model.request([], [])


async def test_function_scripts_may_be_async() -> None:
    async def reply(messages: object, tools: object) -> ModelResponse:
        return ModelResponse(content="async")

    assert (await ScriptedModel(reply).request([], [])).content == "async"


async def test_call_ids_are_unique_across_the_script() -> None:
    call = {"name": "t", "arguments": {}}
    model = ScriptedModel([{"tool_calls": [call, call]}, {"tool_calls": [call]}])
    ids = [c.id for _ in range(2) for c in (await model.request([], [])).tool_calls]
    assert len(set(ids)) == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is not valid JSON"),
        ("{}", "non-empty JSON list"),
        ("[]", "non-empty JSON list"),
        ('[{"tool_calls": {}}]', "must be a list"),
        ('[{"tool_calls": [{"arguments": {}}]}]', "string 'name'"),
        ('[{"tool_calls": [{"name": "x", "arguments": []}]}]', "must be an object"),
        ("[1]", "must be an object"),
        ('[{"error": ""}]', "a scripted error must be a non-empty string"),
        ('[{"error": 503}]', "a scripted error must be a non-empty string"),
        ('[{"error": "down", "content": "x"}]', "alone, not with content"),
    ],
)
def test_bad_script_files_are_user_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        ScriptedModel.from_file(path)


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        ScriptedModel.from_file(tmp_path / "nope.json")


def test_from_file_reads_the_cli_format(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            [
                {
                    "content": "hi",
                    "tool_calls": [{"name": "calculator", "arguments": {"expression": "1"}}],
                }
            ]
        )
    )
    model = ScriptedModel.from_file(path)
    assert model.name == "scripted:s.json"
    assert model.unconsumed[0].tool_calls[0].name == "calculator"


def lookups(count: int) -> list[dict[str, object]]:
    """A script of ``count`` calls, then a final answer."""
    calls = [{"tool_calls": [{"name": "t", "arguments": {"n": n}}]} for n in range(count)]
    return [*calls, {"content": "done"}]


async def conversation(model: ScriptedModel, replies: int) -> list[Message]:
    """The conversation after ``model`` gave ``replies`` replies (each call answered)."""
    messages: list[Message] = [UserMessage(content="task")]
    for _ in range(replies):
        response = await model.request(messages, [])
        messages.append(AssistantMessage(content=response.content, tool_calls=response.tool_calls))
        messages += [
            ToolResultMessage(tool_call_id=c.id, name=c.name, content="ok")
            for c in response.tool_calls
        ]
    return messages


async def test_a_fresh_script_goes_on_after_its_last_reply_in_the_conversation() -> None:
    messages = await conversation(ScriptedModel(lookups(4)), 3)
    fresh = ScriptedModel(lookups(4))
    reply = await fresh.request(messages, [])
    assert reply.tool_calls[0].arguments == {"n": 3}
    assert (await fresh.request(messages, [])).content == "done"


async def test_a_rewound_conversation_takes_the_script_back() -> None:
    messages = await conversation(ScriptedModel(lookups(4)), 3)
    rewound = messages[:3]  # the task, the first reply and its result
    reply = await ScriptedModel(lookups(4)).request(rewound, [])
    assert reply.tool_calls[0].arguments == {"n": 1}


async def test_a_compacted_conversation_goes_on_after_the_reply_it_kept() -> None:
    messages = await conversation(ScriptedModel(lookups(4)), 3)
    compacted = [UserMessage(content="[Summary] two lookups"), *messages[-2:]]
    reply = await ScriptedModel(lookups(4)).request(compacted, [])
    assert reply.tool_calls[0].arguments == {"n": 3}


async def test_a_script_that_gave_no_reply_of_the_conversation_starts_at_its_first() -> None:
    messages = await conversation(ScriptedModel(lookups(4)), 3)
    other = ScriptedModel(["another script"])
    assert (await other.request(messages, [])).content == "another script"


async def test_a_scripted_failure_is_raised_for_its_request_and_the_script_goes_on() -> None:
    model = ScriptedModel(["a", ModelError("the provider is down"), {"error": "again"}, "b"])
    assert (await model.request([], [])).content == "a"
    with pytest.raises(ModelError, match="the provider is down"):
        await model.request([], [])
    assert model.position() == 2
    with pytest.raises(ModelError, match="^again$"):
        await model.request([], [])
    assert (await model.request([], [])).content == "b"
    model.assert_consumed()
